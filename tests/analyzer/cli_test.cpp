// The fpscope command line as a user meets it: formats, exit codes, refused writes, and damaged
// traces (truncated, bytes flipped, tables dropped) that every verb must reject with a message and
// a documented nonzero exit code, never a crash.
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

using fpscope::test::make_trace;
using fpscope::test::sql_exec;
using fpscope::test::sql_value;

struct Result {
  int code = -1;
  bool signalled = false;
  std::string out, err;
};

Result run(const std::string& args) {
  const std::string err_file = fpscope::test::temp_dir() + "/stderr.txt";
  const std::string cmd = std::string(FPSCOPE_BIN) + " " + args + " 2>" + err_file;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.signalled = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) != 130);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

fpscope::synthetic::Options small_run() {
  fpscope::synthetic::Options o;
  o.steps = 5;
  o.precision = "amp-fp16";
  o.loss_scale = "dynamic";
  o.nan_at_step = 2;
  return o;
}

TEST(Cli, HelpAndUnknownVerb) {
  const Result help = run("--help");
  EXPECT_EQ(help.code, 0);
  for (const char* verb : {"report", "compare", "advise", "export", "query"}) {
    EXPECT_NE(help.out.find(verb), std::string::npos) << verb;
    EXPECT_EQ(run(std::string(verb) + " --help").code, 0) << verb;
  }
  const Result bad = run("frobnicate x");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown verb 'frobnicate'"), std::string::npos);
}

TEST(Cli, ReportJsonMatchesSql) {
  const auto path = make_trace("cli_report", small_run());
  const Result r = run("report " + path + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  // Data, not rendered text: typed numbers, integers for bytes, null for what is not known.
  EXPECT_EQ(doc["fpscope_report"], 1);
  EXPECT_EQ(doc["memory"]["peak_bytes"].get<int64_t>(), *sql_value(path, "select peak_total_bytes from v_memory_peak limit 1"));
  EXPECT_TRUE(doc["memory"]["peak_bytes"].is_number_integer());
  EXPECT_EQ(doc["nonfinite"]["first_origin"]["kernel_id"].get<int64_t>(), *sql_value(path, "select kernel_id from v_first_nonfinite"));
  EXPECT_TRUE(doc["nonfinite"]["first_origin"]["shape"].is_array());
  EXPECT_EQ(doc["nonfinite"]["nan"].get<int64_t>(), *sql_value(path, "select sum(nan) from tensors where role = 'out'"));
  EXPECT_EQ(doc["loss_scale"]["backoffs"].get<int64_t>(), 1);
  EXPECT_EQ(doc["run"]["kernels"].get<int64_t>(), *sql_value(path, "select count(*) from kernels"));
  EXPECT_EQ(doc["run"]["end"]["state"], "exited");
  EXPECT_EQ(doc["run"]["end"]["failure"], false);
  EXPECT_TRUE(doc["run"]["end"]["signal"].is_null());
  EXPECT_TRUE(doc["run"]["final_loss"].is_number_float());
  EXPECT_TRUE(doc["run"]["tracing_own_ms"].is_null());  // the generated trace has no injector meta
  ASSERT_TRUE(doc["run"]["collector_cpu_ms"].is_number()) << doc["run"].dump();
  EXPECT_EQ(doc["run"]["collector_cpu_ms"].get<double>(),
            *sql_value(path, "select cast(value as real) from meta where key = 'collector_cpu_ms'"));
  EXPECT_TRUE(doc["run"]["tracing_failure"].is_null());
  EXPECT_EQ(doc["ranges"]["view"], "activations");
  EXPECT_FALSE(doc["ranges"]["rows"].empty());
  // The injector's own time and a failure that stopped tracing, from meta.
  sql_exec(path, "UPDATE meta SET value = '48.26' WHERE key = 'collector_cpu_ms'");
  sql_exec(path, "INSERT INTO meta(key, value) VALUES ('injector.own_time_ms', '12.5'), "
                 "('injector.failure', 'mpt_launch: std::bad_alloc')");
  const auto with_meta = nlohmann::json::parse(run("report " + path + " --format json").out);
  EXPECT_EQ(with_meta["run"]["tracing_own_ms"], 12.5);
  EXPECT_EQ(with_meta["run"]["collector_cpu_ms"], 48.26);
  EXPECT_EQ(with_meta["run"]["tracing_failure"], "mpt_launch: std::bad_alloc");
  const Result shown = run("report " + path);
  EXPECT_NE(shown.out.find("tracing stopped early"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("12.5 ms on the program's threads around launches"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("48.3 ms in fpscope run's own process"), std::string::npos) << shown.out;
  // One section: the run and that section only.
  const auto only = nlohmann::json::parse(run("report " + path + " --section loss-scale --format json").out);
  EXPECT_TRUE(only.contains("run") && only.contains("loss_scale"));
  EXPECT_FALSE(only.contains("memory") || only.contains("nonfinite") || only.contains("ranges"));
  for (const char* format : {"text", "csv", "md"}) EXPECT_EQ(run("report " + path + " --format " + format).code, 0) << format;
  const Result text = run("report " + path);
  EXPECT_NE(text.out.find("First origin: linear_forward (fc1) made nan"), std::string::npos) << text.out;
}

TEST(Cli, CompareAndExports) {
  auto o = small_run();
  o.nan_at_step.reset();
  const auto b = make_trace("cli_b", o);
  o.precision = "fp32";
  o.loss_scale = "none";
  const auto a = make_trace("cli_a", o);
  const Result c = run("compare " + a + " " + b + " --format json");
  ASSERT_EQ(c.code, 0) << c.err;
  const auto doc = nlohmann::json::parse(c.out);
  EXPECT_EQ(doc["fpscope_compare"], 1);
  int checked = 0;
  for (const auto& row : doc["memory_at_peak"]) {
    EXPECT_EQ(row["difference_bytes"].get<int64_t>(), row["target_bytes"].get<int64_t>() - row["source_bytes"].get<int64_t>());
    if (row["category"] == "activation") {
      EXPECT_GT(row["reduction_pct"].get<double>(), 40.0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1);
  const std::string dir = fpscope::test::temp_dir();
  EXPECT_EQ(run("export " + a + " --format html -o " + dir + "/r.html").code, 0);
  EXPECT_EQ(run("export " + a + " --format json -o " + dir + "/r.json").code, 0);
  EXPECT_NO_THROW(nlohmann::json::parse(std::ifstream(dir + "/r.json")));
  EXPECT_EQ(run("export " + a + " --format csv -o " + dir + "/csv").code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/csv/kernels.csv"));
  EXPECT_EQ(run("advise " + a + " -o " + dir + "/advice").code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/advice/fp32_ops.txt"));
}

// The loss table lists every common step in CSV; a person reads all of up to 20 steps, else ten
// spread evenly plus the first step where the curves part, and is told so. A NaN loss shows.
TEST(Cli, CompareLossStepsAndNaN) {
  fpscope::synthetic::Options o;
  o.steps = 25;
  const auto a = make_trace("cli_loss_a", o);
  const auto b = make_trace("cli_loss_b", o);
  sql_exec(b, "UPDATE scalars SET value = NULL WHERE step >= 12 AND name_id = (SELECT id FROM strings WHERE value = 'loss')");
  const Result csv = run("compare " + a + " " + b + " --format csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  const size_t from = csv.out.find("# loss/steps\n");
  ASSERT_NE(from, std::string::npos) << csv.out;
  std::istringstream lines(csv.out.substr(from));
  std::string line;
  std::getline(lines, line);  // the table's name
  std::getline(lines, line);  // its columns
  int rows = 0;
  while (std::getline(lines, line) && !line.empty()) {
    EXPECT_EQ(line.rfind(std::to_string(rows) + ",", 0), 0u) << line;
    EXPECT_EQ(line.find(",NaN,") != std::string::npos, rows >= 12) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 25);
  const Result text = run("compare " + a + " " + b);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("The curves first part at step 12: finite against NaN."), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("B's loss is non-finite at 12 of the 12 common steps after it."), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("11 of the 25 common steps shown"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("then NaN/Inf from step 12 on (13 steps)"), std::string::npos) << text.out;
  const auto doc = nlohmann::json::parse(run("compare " + a + " " + b + " --format json").out);
  ASSERT_EQ(doc["loss"].size(), 25u);
  EXPECT_TRUE(doc["loss"][12]["target"].is_null());
  EXPECT_TRUE(doc["loss"][12]["nonfinite_mismatch"].get<bool>());
  EXPECT_TRUE(doc["final_loss_delta"].is_null());
  EXPECT_EQ(doc["first_divergent_step"], 12);
}

// With no NaN/Inf among the measured outputs, the report says when the trace cannot tell.
TEST(Cli, ReportSaysWhenTheTraceCannotTellWhereNaNAppeared) {
  fpscope::synthetic::Options o;
  o.steps = 5;
  o.finalize = false;  // the summaries are computed from the rows as they are
  const auto path = make_trace("cli_no_origin", o);
  auto note = [&] {
    const Result r = run("report " + path + " --section nonfinite");
    EXPECT_EQ(r.code, 0) << r.err;
    const size_t at = r.out.find("\n  ", r.out.find("===="));
    return r.out.substr(at + 3, r.out.find('\n', at + 1) - at - 3);
  };
  EXPECT_EQ(note(), "None: every measured output was finite.");
  sql_exec(path, "UPDATE scalars SET value = NULL WHERE step >= 3 AND name_id = (SELECT id FROM strings WHERE value = 'loss')");
  EXPECT_EQ(note(), "None among the measured outputs, but the loss went NaN/Inf from step 3 on: it came from what "
                    "fpscope does not measure (a type other than f32, f16 and bf16, or work outside the traced kernels "
                    "and operators).");
  sql_exec(path, "INSERT OR REPLACE INTO meta (key, value) VALUES ('options', '{\"every\": 10, \"steps\": \"\", "
                 "\"ops\": \"\"}')");
  EXPECT_EQ(note(), "None among the measured outputs, but the loss went NaN/Inf from step 3 on: a launch that was not "
                    "measured made it (trace every step: no --every, --steps or --ops).");
  sql_exec(path, "DELETE FROM tensors");
  EXPECT_EQ(note(), "Unknown: no tensor was measured (the selection of --every, --steps or --ops measured none), and "
                    "the loss went NaN/Inf from step 3 on.");
  sql_exec(path, "DELETE FROM kernels");
  EXPECT_EQ(note(), "Unknown: the trace holds no kernel launch, and the loss went NaN/Inf from step 3 on.");
}

// A table with no rows is left out of the text a person reads, and kept (its header) in CSV.
TEST(Cli, TextLeavesOutATableWithNoRows) {
  const auto path = make_trace("cli_empty_table", small_run());
  sql_exec(path, "DELETE FROM nonfinite WHERE origin = 0");  // nothing passed the NaN on
  const Result text = run("report " + path + " --section nonfinite");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("kernel"), std::string::npos) << text.out;  // the table by kernel
  EXPECT_EQ(text.out.find("launch  kernel"), std::string::npos) << text.out;
  const Result csv = run("report " + path + " --section nonfinite --format csv");
  EXPECT_NE(csv.out.find("# nonfinite/propagation\nlaunch,kernel,layer,phase,step,tensor,kind\n"), std::string::npos)
      << csv.out;
}

// A trap message in a run that ended well: the program caught the trap's exception and went on.
TEST(Cli, ATrapThatDidNotEndTheRunIsSaidAsSuch) {
  auto o = small_run();
  o.nan_at_step.reset();
  const auto path = make_trace("cli_trap_caught", o);
  sql_exec(path, "INSERT OR REPLACE INTO meta (key, value) VALUES ('trap.message', 'fpscope: trap: first NaN made by x')");
  const Result r = run("report " + path + " --section summary");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("exited normally; --trap fired and the program went on: first NaN made by x"), std::string::npos)
      << r.out;
}

TEST(Cli, QueryRefusesWrites) {
  const auto path = make_trace("cli_query", small_run());
  const Result w = run("query " + path + " \"delete from kernels\"");
  EXPECT_EQ(w.code, 8);
  EXPECT_NE(w.err.find("refused"), std::string::npos);
  EXPECT_GT(*sql_value(path, "select count(*) from kernels"), 0);
  const Result r = run("query " + path + " \"select count(*) as n from kernels\" --format json");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["n"].get<int64_t>(), *sql_value(path, "select count(*) from kernels"));
}

TEST(Cli, RunningTraceReportsWithExitNine) {
  auto o = small_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto path = make_trace("cli_running", o);
  const Result r = run("report " + path);
  EXPECT_EQ(r.code, 9);
  EXPECT_NE(r.out.find("still being written"), std::string::npos);
}

TEST(Cli, CollectorLostTraceReportsWithExitTen) {
  auto o = small_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto path = make_trace("cli_lost", o);
  // The collector named in meta ran on another boot of the machine: it is gone.
  sql_exec(path, "insert into meta values ('collector_pid', '1'), ('collector_start_ticks', '1'), "
                 "('collector_boot_id', '00000000-0000-0000-0000-000000000000')");
  const Result r = run("report " + path + " --section summary");
  EXPECT_EQ(r.code, 10) << r.err;
  EXPECT_NE(r.err.find("collector lost"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("FAILED: collector lost"), std::string::npos) << r.out;
}

TEST(Cli, TrappedRunReportsAsAFailure) {
  const auto path = make_trace("cli_trapped", small_run());
  sql_exec(path, "update meta set value = 'trapped' where key = 'end_reason'; delete from meta where key = 'exit_code'; "
                 "insert into meta values ('signal', 'SIGTRAP'), ('signal_number', '5')");
  const Result r = run("report " + path + " --section summary");
  EXPECT_EQ(r.code, 0);  // the report itself succeeded
  EXPECT_NE(r.out.find("FAILED: stopped by --trap at a non-finite value (signal SIGTRAP, 5)"), std::string::npos) << r.out;
  const Result html = run("export " + path + " --format html -o -");
  EXPECT_NE(html.out.find("<td class=\"bad\">stopped by --trap"), std::string::npos);
}

// Every verb on every damaged copy: a documented nonzero code and a message, never a crash.
TEST(Cli, DamagedTracesFailCleanly) {
  const auto good = make_trace("cli_good", small_run());
  const std::string dir = fpscope::test::temp_dir();
  const auto size = std::filesystem::file_size(good);
  std::vector<std::string> damaged;
  auto copy = [&](const std::string& name) {
    const std::string p = dir + "/damaged_" + name + ".sqlite";
    std::filesystem::copy_file(good, p, std::filesystem::copy_options::overwrite_existing);
    damaged.push_back(p);
    return p;
  };
  for (uintmax_t cut : {uintmax_t{0}, uintmax_t{50}, uintmax_t{4096}, size / 2, size - 4096}) {
    std::filesystem::resize_file(copy("cut" + std::to_string(cut)), cut);
  }
  // Bytes that matter: the file header (0, 19: the file format), page 1's b-tree header (100) and
  // the page-type byte at the start of later pages, at the page size the header gives.
  uintmax_t page_size = 0;
  {
    std::ifstream f(good, std::ios::binary);
    unsigned char header[18] = {};
    f.read(reinterpret_cast<char*>(header), sizeof header);
    page_size = (uintmax_t{header[16]} << 8) | header[17];
    if (page_size == 1) page_size = 65536;
  }
  ASSERT_GE(page_size, 512u);
  ASSERT_GT(size, 5 * page_size) << "the trace is too small to damage its fifth page";
  for (uintmax_t offset : {uintmax_t{0}, uintmax_t{19}, uintmax_t{100}, page_size, 2 * page_size, 5 * page_size}) {
    const std::string p = copy("flip" + std::to_string(offset));
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5A);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }
  sql_exec(copy("nometa"), "drop table meta");
  sql_exec(copy("nokernels"), "drop view v_kernels; drop view v_first_nonfinite; drop view v_op_ranges; drop table kernels");
  const std::vector<std::string> verbs = {"report {}", "compare {} {}", "advise {} -o " + dir + "/adv", "export {} --format json -o -",
                                          "query {} \"select count(*) from kernels\""};
  for (const auto& p : damaged) {
    for (std::string v : verbs) {
      for (size_t at; (at = v.find("{}")) != std::string::npos;) v.replace(at, 2, p);
      const Result r = run(v);
      EXPECT_FALSE(r.signalled) << v;
      EXPECT_GE(r.code, 3) << v << "\n" << r.out.substr(0, 300);
      EXPECT_LE(r.code, 8) << v << "\n" << r.err;
      EXPECT_FALSE(r.err.empty()) << v;
    }
  }
}

}  // namespace
