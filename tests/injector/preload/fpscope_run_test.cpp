// End-to-end through the whole pipeline: `fpscope run` starts mptrain with the injector, the
// collector writes SQLite, and the tests query the trace's tables and views. Label `injection`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <iterator>
#include <set>
#include <string_view>

#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/tensor_stats.h"
#include "fpscope/collector/trace_writer.h"
#include "temp_path.h"
#include "traced_child.h"

namespace fpscope::inject {
namespace {

namespace fs = std::filesystem;
using testing::environment_with;
using testing::spawn_and_wait;

struct RunResult {
  int status = -1;  // exit status of fpscope run
  std::string stderr_text;
};

// One row per result row, columns as text (NULL as "NULL").
std::vector<std::vector<std::string>> query(const fs::path& trace, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(trace.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << trace;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      auto& row = rows.emplace_back();
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const auto* text = sqlite3_column_text(st, c);
        row.push_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

// Every measured number of every tensor, in launch order.
const std::string kEveryTensorColumn =
      "select t.kernel_id, t.role, t.slot, t.tensor_uid, t.name_id, t.dtype, t.shape, t.count, t.nan, t.pos_inf, "
      "t.neg_inf, t.zero, t.subnormal, quote(t.min), quote(t.max), quote(t.absmax), quote(t.min_nonzero), "
      "quote(t.mean), quote(t.rms), t.f16_overflow, t.f16_underflow, t.f16_subnormal, t.f16_near_max, "
      "t.bf16_overflow, t.bf16_underflow, t.bf16_subnormal, t.bf16_near_max, t.e4m3_overflow, t.e4m3_underflow, "
      "t.e4m3_subnormal, t.e4m3_near_max, t.e5m2_overflow, t.e5m2_underflow, t.e5m2_subnormal, t.e5m2_near_max, "
      "t.exp_hist, n.kind, n.first_index, n.first_bits, n.origin "
      "from tensors t left join nonfinite n on n.tensor_id = t.id order by t.kernel_id, t.role, t.slot";

class FpscopeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(FPSCOPE_TEST_DATA_DIR) / "train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "FashionMNIST is not in " << FPSCOPE_TEST_DATA_DIR << " (scripts/install-deps.sh)";
    dir_ = temp_.path();
    trace_ = dir_ / "trace.sqlite";
  }

  RunResult trace_run(std::vector<std::string> fpscope_options, std::vector<std::string> trainer_options) {
    std::vector<std::string> argv = {FPSCOPE_CLI, "run", "-q", "-o", trace_.string()};
    argv.insert(argv.end(), fpscope_options.begin(), fpscope_options.end());
    std::vector<std::string> trainer = {"--", FPSCOPE_MPTRAIN, "--model", "cnn", "--data-dir", FPSCOPE_TEST_DATA_DIR,
                                        "--train-subset", "256", "--test-subset", "64"};
    argv.insert(argv.end(), trainer.begin(), trainer.end());
    argv.insert(argv.end(), trainer_options.begin(), trainer_options.end());
    RunResult r;
    int wait_status = 0;
    // fpscope finds the injector beside itself (../lib), as installed by the build.
    EXPECT_TRUE(spawn_and_wait(argv, environment_with({}), [] {}, &wait_status, &r.stderr_text));
    r.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    return r;
  }
  fpscope::test::TempDir temp_{"fpscope-inject-run"};  // gtest makes a fixture per test: one folder each
  fs::path dir_, trace_;
};

TEST_F(FpscopeRun, TracedLossesEqualUntracedOnesBitForBit) {
  const fs::path plain = dir_ / "plain.json", traced = dir_ / "traced.json";
  int wait_status = 0;
  std::string err;
  ASSERT_TRUE(spawn_and_wait({FPSCOPE_MPTRAIN, "--model", "cnn", "--data-dir", FPSCOPE_TEST_DATA_DIR, "--train-subset",
                              "256", "--test-subset", "64", "--precision", "amp-fp16", "--loss-scale", "dynamic",
                              "--metrics-json", plain.string()},
                             environment_with({}), [] {}, &wait_status, &err));
  ASSERT_EQ(wait_status, 0) << err;
  const RunResult r = trace_run({}, {"--precision", "amp-fp16", "--loss-scale", "dynamic", "--metrics-json", traced.string()});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto losses = [](const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in).at("losses").get<std::vector<double>>();
  };
  const auto a = losses(plain), b = losses(traced);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0);
  // The loss scaler ran every step: one loss-scale row per step.
  EXPECT_EQ(query(trace_, "select count(*) from loss_scale")[0][0], "8");
}

// Inputs that take the statistics a launch measured of the same bytes as its output (the default)
// give the trace that scanning every input gives, row for row and column for column: amp-fp16
// with dynamic loss scaling (casts, in-place optimizer and scaler updates, fp16 copies of
// weights) and fp16 with a planted NaN.
TEST_F(FpscopeRun, ReusedInputStatisticsEqualARescanRowForRow) {
  const std::vector<std::string> runs[] = {
      {"--precision", "amp-fp16", "--loss-scale", "dynamic", "--optimizer", "adamw"},
      {"--precision", "fp16", "--fault", "nan@conv2:2:7"}};
  for (const auto& options : runs) {
    const fs::path reused = dir_ / "reused.sqlite", scanned = dir_ / "scanned.sqlite";
    for (const auto& [trace, rescan] : {std::pair{reused, false}, std::pair{scanned, true}}) {
      trace_ = trace;
      fs::remove(trace_);
      const RunResult r = trace_run(rescan ? std::vector<std::string>{"--rescan-inputs"} : std::vector<std::string>{}, options);
      ASSERT_EQ(r.status, 0) << r.stderr_text;
    }
    const auto a = query(reused, kEveryTensorColumn), b = query(scanned, kEveryTensorColumn);
    ASSERT_GT(a.size(), 1000u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "row " << i << " of " << options[1];
    // Most inputs were taken from memory; none with --rescan-inputs.
    const auto reused_count = query(reused, "select value from meta where key = 'injector.reused_input_stats'");
    ASSERT_EQ(reused_count.size(), 1u);
    const auto inputs = query(reused, "select count(*) from tensors where role = 'in'");
    EXPECT_GT(std::stoll(reused_count[0][0]), std::stoll(inputs[0][0]) / 2);
    EXPECT_TRUE(query(scanned, "select value from meta where key = 'injector.reused_input_stats'").empty());
  }
}

// Scans shared with the trainer's own pool (the default where the kernel library lends it) give
// the trace that scans on the launching thread alone give, row for row; large tensors were shared.
TEST_F(FpscopeRun, ScansSharedWithTheProgramsPoolEqualScansOnOneThread) {
  const fs::path shared = dir_ / "shared.sqlite", alone = dir_ / "alone.sqlite";
  const std::vector<std::string> trainer = {"--precision", "amp-fp16", "--loss-scale", "dynamic", "--threads", "2"};
  for (const auto& [trace, options] : {std::pair{shared, std::vector<std::string>{}},
                                       std::pair{alone, std::vector<std::string>{"--stats-threads", "1"}}}) {
    trace_ = trace;
    const RunResult r = trace_run(options, trainer);
    ASSERT_EQ(r.status, 0) << r.stderr_text;
  }
  const auto a = query(shared, kEveryTensorColumn), b = query(alone, kEveryTensorColumn);
  ASSERT_GT(a.size(), 1000u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "row " << i;
  const std::string lent = "select value from meta where key = 'injector.scans_on_program_threads'";
  const auto large = query(shared, "select count(*) from tensors where count > " + std::to_string(kStatsChunkElements));
  const auto shared_count = query(shared, lent);
  ASSERT_EQ(shared_count.size(), 1u);
  EXPECT_GT(std::stoll(shared_count[0][0]), 0);
  EXPECT_LE(std::stoll(shared_count[0][0]), std::stoll(large[0][0]));
  EXPECT_TRUE(query(alone, lent).empty());
  EXPECT_TRUE(query(shared, "select value from meta where key = 'injector.scans_on_helper_threads'").empty());
}

// The injector's own time on the trainer's threads: some, and with the launching thread's kernel
// spans (the kernels' own, one after another, outside the injector's work) it fits in the
// process's life. mptrain launches from one thread only, so the two sums are of that thread.
TEST_F(FpscopeRun, OwnTimeAndKernelSpansFitInTheProcesssLife) {
  const RunResult r = trace_run({}, {"--threads", "2"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  ASSERT_EQ(query(trace_, "select count(distinct thread) from kernels"), (std::vector<std::vector<std::string>>{{"1"}}));
  const auto own = query(trace_, "select value from meta where key = 'injector.own_time_ms'");
  ASSERT_EQ(own.size(), 1u);
  const double own_ms = std::stod(own[0][0]);
  const auto life = query(trace_, "select (exit_ns - monotonic_ns) / 1e6 from processes");
  const auto kernels = query(trace_, "select sum(end_ns - start_ns) / 1e6 from kernels");
  EXPECT_GT(own_ms, 0.0);
  EXPECT_LE(own_ms + std::stod(kernels[0][0]), std::stod(life[0][0]));
}

// failure_target.cpp's exit status when it cannot lower its address-space limit.
constexpr int kFailureTargetCannotLimit = 6;

// An exception inside the injector (here std::bad_alloc, under an address-space limit) stops tracing
// in that process; the program carries on, the trace keeps what came before and says why it stops.
TEST_F(FpscopeRun, AFailureInsideTheInjectorStopsTracingAndTheProgramGoesOn) {
  int wait_status = 0;
  std::string err;
  ASSERT_TRUE(spawn_and_wait({FPSCOPE_CLI, "run", "-q", "-o", trace_.string(), "--", FPSCOPE_FAILURE_TARGET},
                             environment_with({}), [] {}, &wait_status, &err));
  ASSERT_TRUE(WIFEXITED(wait_status));
  if (WEXITSTATUS(wait_status) == kFailureTargetCannotLimit)
    GTEST_SKIP() << "the address-space limit cannot be set here (a hard limit, ulimit -v, is below it)";
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << err;
  EXPECT_NE(err.find("tracing stopped in process"), std::string::npos) << err;
  EXPECT_NE(err.find("fpscope_op_begin failed inside the injector"), std::string::npos) << err;
  const auto failure = query(trace_, "select value from meta where key = 'injector.failure'");
  ASSERT_EQ(failure.size(), 1u);
  EXPECT_EQ(failure[0][0].rfind("fpscope_op_begin: ", 0), 0u) << failure[0][0];
  EXPECT_NE(failure[0][0].find("bad_alloc"), std::string::npos) << failure[0][0];
  // The op before the failure is there; what the program did after it is not.
  EXPECT_EQ(query(trace_, "select s.value from kernels k join strings s on s.id = k.name_id"),
            (std::vector<std::vector<std::string>>{{"small"}}));
  EXPECT_EQ(query(trace_, "select value from meta where key = 'config.who'"),
            (std::vector<std::vector<std::string>>{{"before"}}));
  // The process still said it exits.
  EXPECT_EQ(query(trace_, "select ended from processes"), (std::vector<std::vector<std::string>>{{"exited"}}));
}

TEST_F(FpscopeRun, FirstNonfiniteIsThePlantedFault) {
  const RunResult r = trace_run({}, {"--fault", "nan@fc1:3:17"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  const auto first = query(trace_, "select kernel, layer, phase, step, \"index\", kind from v_first_nonfinite");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], (std::vector<std::string>{"inject_fault", "fc1", "forward", "3", "17", "nan"}));
  // Everything downstream holds NaN that it was handed: origin 0.
  const auto origins = query(trace_, "select origin, count(*) from nonfinite group by origin order by origin");
  ASSERT_EQ(origins.size(), 2u);
  EXPECT_EQ(origins[1], (std::vector<std::string>{"1", "1"}));
  EXPECT_GT(std::stoi(origins[0][1]), 10);
  const auto later = query(trace_,
                           "select min(k.step) from nonfinite n join kernels k on k.id = n.kernel_id "
                           "where n.origin = 0");
  EXPECT_EQ(later[0][0], "3");
}

// Two processes of one run, ranked by the launcher's variables, each a ring of its own: one trace.
// Each rank's records are those of the same program traced alone, down to every statistic.
TEST_F(FpscopeRun, TwoRanksLandInOneTraceEachAsIfTracedAlone) {
  const std::string trainer = std::string(FPSCOPE_MPTRAIN) + " --model cnn --data-dir " + FPSCOPE_TEST_DATA_DIR +
                              " --train-subset 256 --test-subset 64 --threads 1";
  const fs::path alone = dir_ / "alone.sqlite";
  const RunResult single = trace_run({}, {"--threads", "1", "--fault", "nan@conv2:3:5"});
  ASSERT_EQ(single.status, 0) << single.stderr_text;
  fs::rename(trace_, alone);
  int wait_status = 0;
  std::string err;
  ASSERT_TRUE(spawn_and_wait({FPSCOPE_CLI, "run", "-o", trace_.string(), "--", "/bin/sh", "-c",
                              "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 " + trainer + " >/dev/null & "
                              "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 " + trainer + " --fault nan@conv2:3:5 >/dev/null; wait"},
                             environment_with({}), [] {}, &wait_status, &err));
  ASSERT_EQ(wait_status, 0) << err;
  EXPECT_NE(err.find("from 2 processes"), std::string::npos) << err;
  EXPECT_EQ(query(trace_, "select rank, local_rank, world_size, rank_source, ended from processes order by rank"),
            (std::vector<std::vector<std::string>>{{"0", "0", "2", "RANK", "exited"}, {"1", "1", "2", "RANK", "exited"}}));
  // The first NaN made from finite inputs is rank 1's planted fault; rank 0 made none.
  EXPECT_EQ(query(trace_, "select rank, kernel, layer, step, \"index\" from v_first_nonfinite"),
            (std::vector<std::vector<std::string>>{{"1", "inject_fault", "conv2", "3", "5"}}));
  EXPECT_EQ(query(trace_, "select count(*) from nonfinite where rank = 0")[0][0], "0");
  EXPECT_EQ(query(trace_, "select rank, first_origin_step from summary_ranks order by rank"),
            (std::vector<std::vector<std::string>>{{"0", "NULL"}, {"1", "3"}}));
  // Rank 1's kernels and tensors, in its own launch numbers, equal the lone run's exactly.
  const std::string per_launch =
      "select k.id & ((1 << 40) - 1), s.value, t.role, t.slot, t.count, t.nan, t.zero, t.subnormal, t.min, t.max, "
      "t.absmax, t.min_nonzero, t.mean, t.rms, t.f16_overflow, t.f16_underflow, t.bf16_underflow, t.exp_hist "
      "from kernels k join strings s on s.id = k.name_id join tensors t on t.kernel_id = k.id ";
  const auto lone = query(alone, per_launch + "order by 1, t.role, t.slot");
  ASSERT_GT(lone.size(), 500u);
  EXPECT_EQ(query(trace_, per_launch + "where k.rank = 1 order by 1, t.role, t.slot"), lone);
  // Rank 0 ran the same program without the fault: one launch fewer (inject_fault).
  EXPECT_EQ(std::stoll(query(trace_, "select count(*) from kernels where rank = 0")[0][0]) + 1,
            std::stoll(query(alone, "select count(*) from kernels")[0][0]));
  // Launch numbers and allocation ids stay apart: each process's own, above its ring's base.
  EXPECT_EQ(query(trace_, "select count(*) from (select k.id >> 40 as p, k.rank from kernels k group by p, rank)")[0][0], "2");
  EXPECT_EQ(query(trace_, "select count(*) from memory_events m join processes p on p.id = m.alloc_id >> 40 "
                          "where p.rank != m.rank")[0][0], "0");
  // One id per text: both ranks name their kernels with the same strings.
  EXPECT_EQ(query(trace_, "select count(*) - count(distinct value) from strings")[0][0], "0");
  // Memory is per rank: each peak is that of the lone run (same program, same sizes).
  EXPECT_EQ(query(trace_, "select max(live) from v_memory_live where rank = 1"),
            query(alone, "select max(live) from v_memory_live"));
}

// A rank killed with SIGKILL mid-run: the trace keeps what it published, says it vanished, and the
// other rank's records are complete.
TEST_F(FpscopeRun, AKilledRankLeavesASoundTraceWithBothRanks) {
  const std::string trainer = std::string(FPSCOPE_MPTRAIN) + " --model cnn --data-dir " + FPSCOPE_TEST_DATA_DIR +
                              " --test-subset 64 --threads 1";
  // Rank 1 trains long enough to be killed once its first kernels are in the trace, which the
  // script reads while the run goes on (the trace is readable while it is written).
  const std::string wait_for_rank1 =
      "import sqlite3, sys, time\n"
      "for _ in range(1200):\n"
      "    try:\n"
      "        db = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n"
      "        if db.execute('select count(*) from kernels where rank = 1').fetchone()[0] > 0: sys.exit(0)\n"
      "    except sqlite3.Error:\n"
      "        pass\n"
      "    time.sleep(0.05)\n"
      "sys.exit(1)\n";
  const fs::path waiter = dir_ / "wait_for_rank1.py";
  std::ofstream(waiter) << wait_for_rank1;
  int wait_status = 0;
  std::string err;
  ASSERT_TRUE(spawn_and_wait(
      {FPSCOPE_CLI, "run", "-o", trace_.string(), "--", "/bin/sh", "-c",
       "RANK=0 " + trainer + " --train-subset 256 >/dev/null & "
       "RANK=1 " + trainer + " --train-subset 60000 --epochs 5 >/dev/null & victim=$!; "
       "/usr/bin/python3 " + waiter.string() + " " + trace_.string() + " || echo 'rank 1 never traced' >&2; "
       "kill -KILL $victim; wait"},
      environment_with({}), [] {}, &wait_status, &err));
  ASSERT_EQ(wait_status, 0) << err;
  EXPECT_EQ(err.find("never traced"), std::string::npos) << err;
  EXPECT_EQ(query(trace_, "pragma integrity_check")[0][0], "ok");
  EXPECT_EQ(query(trace_, "select rank, ended from processes order by rank"),
            (std::vector<std::vector<std::string>>{{"0", "exited"}, {"1", "vanished"}}));
  EXPECT_EQ(query(trace_, "select count(distinct step) from kernels where rank = 0")[0][0], "8");
  EXPECT_GT(std::stoll(query(trace_, "select count(*) from kernels where rank = 1")[0][0]), 0);
  EXPECT_EQ(query(trace_, "select value from meta where key = 'traced_processes'")[0][0], "2");
  EXPECT_EQ(query(trace_, "select value from meta where key = 'ranks_ended'")[0][0], "0:exited 1:vanished");
}

TEST_F(FpscopeRun, TrapStopsWithSigtrapAndTheTraceHoldsIt) {
  const RunResult r = trace_run({"--trap", "nan"}, {"--fault", "nan@fc1:3:17"});
  EXPECT_EQ(r.status, 128 + SIGTRAP) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("fpscope: trap: first NaN made by inject_fault (layer fc1, step 3, phase forward) in "),
            std::string::npos)
      << r.stderr_text;
  const auto message = query(trace_, "select value from meta where key = 'trap.message'");
  ASSERT_EQ(message.size(), 1u);
  EXPECT_NE(message[0][0].find(" at index 17"), std::string::npos);
  EXPECT_NE(r.stderr_text.find(message[0][0]), std::string::npos);
  const auto kernel = query(trace_,
                            "select kernel, step from v_kernels where id = "
                            "(select cast(value as integer) from meta where key = 'trap.kernel_id')");
  ASSERT_EQ(kernel.size(), 1u);
  EXPECT_EQ(kernel[0], (std::vector<std::string>{"inject_fault", "3"}));
  // Nothing ran after the trap.
  EXPECT_EQ(query(trace_, "select count(*) from kernels where step > 3")[0][0], "0");
}

TEST_F(FpscopeRun, EveryTenMeasuresOnlyThoseSteps) {
  const RunResult r = trace_run({"--every", "10"}, {"--train-subset", "704"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::set<std::string> steps;
  for (const auto& row : query(trace_, "select distinct k.step from tensors t join kernels k on k.id = t.kernel_id"))
    steps.insert(row[0]);
  EXPECT_EQ(steps, (std::set<std::string>{"0", "10", "20"}));
  EXPECT_EQ(query(trace_, "select count(*) from kernels where sampled = 1 and (step is null or step % 10 != 0)")[0][0],
            "0");
  EXPECT_EQ(query(trace_, "select count(distinct step) from kernels where step is not null")[0][0], "22");
}

// A selection that measured nothing says so, with the query that lists the names to match; one that
// measured something does not.
TEST_F(FpscopeRun, ASelectionThatMatchesNothingIsToldOf) {
  const std::vector<std::vector<std::string>> selections = {
      {"--ops", "nomatch*"}, {"--ops", "conv*"}, {"--steps", "50-60"}, {"--steps", "1"}};
  for (const auto& selection : selections) {
    const std::string& option = selection[0];
    const std::string& value = selection[1];
    SCOPED_TRACE(option + " " + value);
    const std::vector<std::string> argv = {FPSCOPE_CLI, "run", "--force", "-o", trace_.string(), option, value, "--",
                                           FPSCOPE_MPTRAIN, "--model", "cnn", "--data-dir", FPSCOPE_TEST_DATA_DIR,
                                           "--train-subset", "64", "--test-subset", "32"};
    int wait_status = 0;
    std::string err;
    ASSERT_TRUE(spawn_and_wait(argv, environment_with({}), [] {}, &wait_status, &err));
    ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << err;
    const std::string tensors = query(trace_, "select count(*) from tensors")[0][0];
    const std::string said = option == "--ops" ? "--ops '" + value + "'" : "--steps " + value;
    const bool told = err.find("warning: no tensor was measured: " + said + " selected none of the run's " +
                               query(trace_, "select count(*) from kernels")[0][0] + " launches") != std::string::npos;
    EXPECT_EQ(told, tensors == "0") << err;
    EXPECT_EQ(tensors == "0", value == "nomatch*" || value == "50-60");  // a 2-step run has no step 50
    if (told) {
      EXPECT_NE(err.find("fpscope query " + trace_.string() + " \"SELECT DISTINCT kernel, layer FROM v_kernels\""),
                std::string::npos) << err;
    }
  }
}

// The command it suggests can be pasted into a shell whatever the trace's name: quoted when the
// name holds a space or a quote, as it is otherwise.
TEST_F(FpscopeRun, TheSuggestedCommandQuotesATracePathAShellWouldSplit) {
  const fs::path odd = dir_ / "it's a trace.sqlite";
  const std::vector<std::string> argv = {FPSCOPE_CLI, "run", "--force", "-o", odd.string(), "--ops", "nomatch",
                                         "--", FPSCOPE_MPTRAIN, "--model", "cnn", "--data-dir", FPSCOPE_TEST_DATA_DIR,
                                         "--train-subset", "64", "--test-subset", "32"};
  int wait_status = 0;
  std::string err;
  ASSERT_TRUE(spawn_and_wait(argv, environment_with({}), [] {}, &wait_status, &err));
  ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << err;
  const std::string quoted = "'" + dir_.string() + "/it'\\''s a trace.sqlite'";
  EXPECT_NE(err.find("--ops 'nomatch' selected none"), std::string::npos) << err;
  EXPECT_NE(err.find("fpscope query " + quoted + " \"SELECT"), std::string::npos) << err;
  // What a shell makes of that word is the trace's path.
  FILE* shell = popen(("printf %s " + quoted).c_str(), "r");
  ASSERT_NE(shell, nullptr);
  std::string word;
  for (int ch; (ch = std::fgetc(shell)) != EOF;) word += static_cast<char>(ch);
  pclose(shell);
  EXPECT_EQ(word, odd.string());
}

TEST_F(FpscopeRun, DumpsLandBesideTheTraceWithTheirTensorRows) {
  const RunResult r = trace_run({"--dump", "op=linear_forward,step=2"}, {});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  const auto rows = query(trace_,
                          "select d.path, t.count, t.role, k.kernel from dumps d join tensors t on t.id = d.tensor_id "
                          "join v_kernels k on k.id = t.kernel_id");
  ASSERT_EQ(rows.size(), 8u);  // fc1 and fc2: x, w, b in, y out
  for (const auto& row : rows) {
    const fs::path file = dir_ / row[0];
    ASSERT_TRUE(fs::exists(file)) << file;
    EXPECT_EQ(row[3], "linear_forward");
    // f32 data after the header: the element count agrees with the tensor row.
    const auto header = fs::file_size(file) - 4 * std::stoull(row[1]);
    EXPECT_EQ(header % 64, 0u) << file;
  }
}

// A trace that cannot hold the run (--max-size here; a full disk takes the same path) keeps what
// it stored and its end: how the program ended, that the trace is incomplete and from which step.
// It does not read as a lost collector, and fpscope run does not call it written.
TEST_F(FpscopeRun, ATraceThatFillsUpKeepsItsEndAndSaysWhere) {
  const RunResult r = trace_run({"--max-size", "1"}, {});
  EXPECT_EQ(r.status, 1) << r.stderr_text;  // the program exited 0; the trace is not whole
  const auto meta = [&](const std::string& key) {
    const auto rows = query(trace_, "select value from meta where key = '" + key + "'");
    return rows.empty() ? std::string("-") : rows[0][0];
  };
  EXPECT_EQ(meta("end_reason"), "exited");
  EXPECT_EQ(meta("exit_code"), "0");
  EXPECT_EQ(meta("trace_incomplete"), "size_limit");
  const auto stored = query(trace_, "select count(*), max(step), max(id) from kernels");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_GT(std::stoll(stored[0][0]), 0);
  EXPECT_EQ(stored[0][2], stored[0][0]);  // a prefix of the run: nothing torn out of order
  EXPECT_EQ(meta("incomplete_at_step"), stored[0][1]);
  EXPECT_GT(std::stoll(meta("records_not_stored")), 0);
  EXPECT_NE(r.stderr_text.find("the trace is incomplete: the trace reached its size limit (--max-size) at step " +
                               stored[0][1] + "; it holds what was stored before ("),
            std::string::npos)
      << r.stderr_text;
  EXPECT_FALSE(fs::exists(trace_.string() + "-reserve"));
  EXPECT_LE(fs::file_size(trace_), (1u << 20) + fpscope::TraceWriter::kReserveBytes);
  // The report tells it as it is, and counts what the trace holds.
  std::string report;
  FILE* out = popen((std::string(FPSCOPE_CLI) + " report --section summary " + trace_.string()).c_str(), "r");
  ASSERT_TRUE(out);
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, out)) > 0;) report.append(buffer, n);
  EXPECT_EQ(pclose(out), 0);
  EXPECT_NE(report.find("INCOMPLETE: the trace reached its size limit (--max-size) at step " + stored[0][1]),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("exited normally"), std::string::npos) << report;
  EXPECT_EQ(report.find("collector lost"), std::string::npos) << report;
  const size_t launches = report.find("kernel launches");
  ASSERT_NE(launches, std::string::npos) << report;
  const size_t value = report.find_first_not_of(' ', launches + 15);
  EXPECT_EQ(report.substr(value, stored[0][0].size() + 1), stored[0][0] + " ") << report;
}


// The fp8 recipe forecast of the operands (--recipes operands) against the independent quantizer
// run on the same tensors dumped: every recipe's counts and scales equal, sums within rounding,
// delayed scaling replayed from the operand's earlier dumps. A bf16 MLP's linear layers (its
// weights' 2D tiles included) and an fp16 CNN's convolutions.
TEST_F(FpscopeRun, RecipeForecastEqualsTheReferenceOnTheDumpedOperands) {
  if (std::string_view(FPSCOPE_ML_DTYPES_PYTHON).empty())
    GTEST_SKIP() << "no Python with ml_dtypes: scripts/python-env.sh installs one";
  struct Case {
    std::vector<std::string> fpscope, trainer;
  };
  const Case cases[] = {
      {{"--recipes", "operands", "--dump", "op=linear_*"},
       {"--model", "mlp", "--hidden", "64", "--precision", "bf16", "--train-subset", "96", "--test-subset", "32"}},
      {{"--recipes", "operands", "--dump", "op=conv2d_forward"},
       {"--precision", "fp16", "--train-subset", "64", "--test-subset", "16"}},
  };
  for (const Case& c : cases) {
    fs::remove_all(dir_ / "trace.sqlite.dumps");
    fs::remove(trace_);
    const RunResult r = trace_run(c.fpscope, c.trainer);
    ASSERT_EQ(r.status, 0) << r.stderr_text;
    int wait_status = 0;
    std::string err;
    const fs::path out = dir_ / "compared.txt";
    ASSERT_TRUE(spawn_and_wait({"/bin/sh", "-c",
                                std::string(FPSCOPE_ML_DTYPES_PYTHON) + " " + FPSCOPE_RECIPES_FROM_DUMPS + " " +
                                    trace_.string() + " " + FPSCOPE_RECIPES_REFERENCE_DIR + " > " + out.string()},
                               environment_with({}), [] {}, &wait_status, &err));
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << text << err;
    EXPECT_NE(text.find("\"failures\": 0"), std::string::npos) << text;
  }
}

// Without --recipes, and with basic statistics, no tensor gets a forecast.
TEST_F(FpscopeRun, RecipeForecastIsOffByDefaultAndNeedsFullStatistics) {
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{}, std::vector<std::string>{"--stats", "basic", "--recipes", "operands"}}) {
    fs::remove(trace_);
    const RunResult r = trace_run(options, {"--train-subset", "64", "--test-subset", "16"});
    ASSERT_EQ(r.status, 0) << r.stderr_text;
    EXPECT_EQ(query(trace_, "select count(*) from tensor_recipes")[0][0], "0");
    EXPECT_EQ(query(trace_, "select count(*) from recipes")[0][0], std::to_string(contract::kRecipeCount));
  }
  fs::remove(trace_);
  const RunResult r = trace_run({"--recipes", "all"}, {"--train-subset", "64", "--test-subset", "16"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  // Every measured fp32 tensor, each with every recipe.
  EXPECT_EQ(query(trace_, "select count(*) from tensor_recipes")[0][0],
            query(trace_, "select count(*) * " + std::to_string(contract::kRecipeCount) +
                              " from tensors where dtype = 0")[0][0]);
}

// At step 0 an amp-bf16 run and an fp8 run of the same seed hold bit-identical weights and the same
// first-layer input, so the amp-bf16 run's forecast for a recipe must be what the fp8 run's own
// quantize kernels did to those bytes: the values they turned to zero, made subnormal and
// saturated, as their launch reports counted them (tensor_stores of the 8-bit output). The zeros
// also agree with the fp8 trace's measurements of the 8-bit tensors (zeros of the output less
// zeros of the input).
TEST_F(FpscopeRun, Fp8RunsQuantizeTheSameOperandsAsTheForecastSaid) {
  const std::vector<std::string> trainer = {"--seed", "4", "--train-subset", "64", "--test-subset", "16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), trainer.begin(), trainer.end());
    return extra;
  };
  const fs::path bf16 = dir_ / "bf16.sqlite";
  trace_ = bf16;
  RunResult r = trace_run({"--recipes", "operands"}, with({"--precision", "amp-bf16"}));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  const std::vector<std::pair<std::string, std::string>> recipes = {
      {"current", "current-e4m3"}, {"delayed", "delayed-e4m3"}, {"mxfp8", "mxfp8-e4m3"},
      {"mxfp8-ceil", "mxfp8-e4m3-ceil"}, {"block", "block-e4m3"}, {"mxfp4", "mxfp4"}, {"nvfp4", "nvfp4"}};
  int64_t compared = 0, lost = 0, saturated = 0;
  for (const auto& [flag, recipe] : recipes) {
    SCOPED_TRACE(flag);
    trace_ = dir_ / (flag + ".sqlite");
    r = trace_run({}, with({"--precision", "fp8", "--fp8-recipe", flag}));
    ASSERT_EQ(r.status, 0) << r.stderr_text;
    // What the forecast says of step 0's weights and of conv1's input, by tensor name.
    const auto forecast = query(bf16,
        "select layer || ' ' || tensor, underflow, subnormal, saturated from v_tensor_recipes where step = 0 and "
        "phase = 'forward' and recipe = '" + recipe + "' and (operand = 'weight' or layer = 'conv1') order by 1");
    // What the fp8 run's quantize kernels counted on the same operands.
    const std::string launches =
        " from v_kernels k join v_tensors x on x.kernel_id = k.id and x.role = 'in' and x.slot = 0 "
        "join v_tensors q on q.kernel_id = k.id and q.role = 'out' and q.slot = 0 "
        "join tensor_stores s on s.tensor_id = q.id "
        "where k.kernel like 'fp8_quantize_%' and k.step = 0 and k.phase = 'forward' and "
        "(x.tensor like '%.weight' or k.layer = 'conv1') order by 1";
    const auto measured = query(trace_, "select k.layer || ' ' || x.tensor, s.flushed, s.subnormal, s.overflowed" + launches);
    ASSERT_EQ(forecast.size(), 5u);  // four weights and conv1's input
    EXPECT_EQ(forecast, measured);
    EXPECT_EQ(query(trace_, "select k.layer || ' ' || x.tensor, q.zero - x.zero, x.count - x.zero" + launches),
              query(trace_, "select k.layer || ' ' || x.tensor, s.flushed, s.results" + launches));
    for (const auto& row : forecast) {
      lost += std::stoll(row[1]) + std::stoll(row[2]);
      saturated += std::stoll(row[3]);
    }
    compared += int64_t(forecast.size());
  }
  EXPECT_EQ(compared, 35);
  EXPECT_GT(lost, 0);  // the comparison covers values lost or made subnormal, not only clean casts
  EXPECT_GT(saturated, 0);  // and values saturated (the OCP rule's top binade)
}

// Runs a reference script on the trace; returns its standard output, failing the test unless it
// exits 0.
std::string run_reference(const fs::path& dir, const std::string& command) {
  int wait_status = 0;
  std::string err;
  const fs::path out = dir / "reference.txt";
  EXPECT_TRUE(spawn_and_wait({"/bin/sh", "-c", command + " > " + out.string()}, environment_with({}), [] {},
                             &wait_status, &err));
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << command << "\n" << text << err;
  return text;
}

// The weight updates a bf16 run without master weights loses (SGD, no momentum, lr 1e-4): the
// trace's counts and sums equal numpy's recount from the dumped weights before and after each step
// and the gradient; most updates of every weight are lost. The same run with fp32 master weights
// (amp-bf16) loses under 1% of them, and with stochastic rounding fc1's weights, though most stay
// put, move by the computed magnitude to within 3%.
TEST_F(FpscopeRun, LostUpdatesEqualARecountFromTheDumpedWeights) {
  const std::vector<std::string> sgd = {"--momentum", "0", "--lr", "1e-4", "--train-subset", "160", "--test-subset", "16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), sgd.begin(), sgd.end());
    return extra;
  };
  const std::string recount = std::string(FPSCOPE_REFERENCE_PYTHON) + " " + FPSCOPE_UPDATES_FROM_DUMPS + " ";
  trace_ = dir_ / "bf16.sqlite";
  RunResult r = trace_run({"--dump", "op=sgd_step"}, with({"--precision", "bf16"}));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::string text = run_reference(dir_, recount + trace_.string());
  EXPECT_NE(text.find("\"compared\": 50"), std::string::npos) << text;  // 10 parameters, 5 steps
  EXPECT_NE(text.find("\"plain_sgd\": true"), std::string::npos) << text;
  for (const auto& row : query(trace_, "select param, sum(lost) * 1.0 / sum(nonzero) from v_param_updates "
                                       "where param like '%.weight' and param != 'norm.weight' group by param"))
    EXPECT_GE(std::stod(row[1]), 0.5) << row[0];

  trace_ = dir_ / "amp-bf16.sqlite";
  r = trace_run({"--dump", "op=sgd_step"}, with({"--precision", "amp-bf16"}));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  text = run_reference(dir_, recount + trace_.string());
  EXPECT_NE(text.find("\"compared\": 50"), std::string::npos) << text;
  const auto master = query(trace_, "select sum(lost) * 1.0 / sum(nonzero), min(dtype_name) from v_param_updates");
  EXPECT_LT(std::stod(master[0][0]), 0.01);
  EXPECT_EQ(master[0][1], "f32");

  trace_ = dir_ / "stochastic.sqlite";
  r = trace_run({}, with({"--precision", "bf16", "--stochastic-rounding"}));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  const auto fc1 = query(trace_, "select sum(lost) * 1.0 / sum(nonzero), 1 - sum(applied_abs_sum) / sum(computed_abs_sum) "
                                 "from v_param_updates where param = 'fc1.weight'");
  EXPECT_GT(std::stod(fc1[0][0]), 0.5);
  EXPECT_LT(std::fabs(std::stod(fc1[0][1])), 0.03);

  // --updates off asks the kernels for nothing.
  trace_ = dir_ / "off.sqlite";
  r = trace_run({"--updates", "off"}, with({"--precision", "bf16"}));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(query(trace_, "select (select count(*) from param_updates) + (select count(*) from tensor_stores)")[0][0], "0");
}

// What the backward kernels' narrowing stores did in amp-fp16 at a loss scale of 1 (gradients go
// subnormal): each count equals the same kernel run again in fp32 on the dumped inputs and its
// results cast by numpy, and the cast equals the dumped output bit for bit.
TEST_F(FpscopeRun, StoreCountsEqualTheKernelRunAgainInFp32AndCastByNumpy) {
  RunResult r = trace_run({"--dump", "op=*_backward*,step=0-1"},
                          {"--precision", "amp-fp16", "--loss-scale", "static:1", "--train-subset", "96"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  const std::string text = run_reference(dir_, std::string(FPSCOPE_REFERENCE_PYTHON) + " " + FPSCOPE_STORES_FROM_DUMPS +
                                                   " " + trace_.string() + " " + MPT_KERNELS_LIBRARY);
  const auto summary = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << text;
  EXPECT_GE(summary["compared"].get<int>(), 8) << text;
  EXPECT_GT(summary["nonzero_kinds"].get<int>(), 0) << "no store lost anything: the comparison would be weak";
  EXPECT_EQ(summary["failures"].get<int>(), 0) << text;
  // A store that lost values is visible in the view, per tensor and phase.
  EXPECT_GT(std::stoll(query(trace_, "select count(*) from v_tensor_stores where phase = 'backward' and subnormal > 0")[0][0]), 0);
}

}  // namespace
}  // namespace fpscope::inject
