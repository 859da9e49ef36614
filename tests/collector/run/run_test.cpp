// Tests of `fpscope run` (run_main) with a small test program instead of a trainer: the trace of a
// program without kernels, exit statuses, SIGKILL and SIGSEGV, a trap, interrupts forwarded, the
// environment the injector gets, every refusal (missing program, existing trace, bad output, bad
// option values), and a producer SIGKILLed at random moments whose published records all arrive.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "../writer/sqlite_reader.h"
#include "fpscope/collector/run_command.h"
#include "fpscope/common/process_identity.h"
#include "fpscope/collector/ring_names.h"
#include "fpscope/contract/wire.h"
#include "temp_path.h"

namespace fpscope {
namespace {

namespace fs = std::filesystem;
using test::Reader;

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    trace_ = (dir_ / "t.sqlite").string();
    setenv("FPSCOPE_INJECT_LIB", FPSCOPE_TEST_NOOP_PRELOAD, 1);
  }

  // Runs `fpscope run ARGS...` in this process; stderr is kept in err_.
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::testing::internal::CaptureStderr();
    const int status = run_main(static_cast<int>(args.size()), argv.data());
    err_ = ::testing::internal::GetCapturedStderr();
    return status;
  }
  int run_program(std::vector<std::string> program, std::vector<std::string> options = {}) {
    std::vector<std::string> args = {"-o", trace_};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.push_back(FPSCOPE_TEST_PROGRAM);
    args.insert(args.end(), program.begin(), program.end());
    return run(args);
  }
  bool says(const std::string& text) const { return err_.find(text) != std::string::npos; }
  // Runs the test program's `env` mode and reads back the environment it was given.
  std::map<std::string, std::string> program_environment(std::vector<std::string> options = {}) {
    const std::string env_file = (dir_ / "env.txt").string();
    options.push_back("--force");
    EXPECT_EQ(run_program({"env", env_file}, options), 0) << err_;
    std::ifstream in(env_file);
    std::map<std::string, std::string> env;
    for (std::string line; std::getline(in, line);) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return env;
  }

  fpscope::test::TempDir temp_{"fpscope-run"};  // gtest makes a fixture per test: one folder each
  fs::path dir_;
  std::string trace_;
  std::string err_;
};

TEST_F(RunTest, ProgramWithoutKernelsGivesAValidTraceThatSaysSo) {
  EXPECT_EQ(run_program({"exit", "0"}), 0) << err_;
  EXPECT_TRUE(says("no kernels were seen")) << err_;
  EXPECT_TRUE(says("trace written to " + trace_)) << err_;
  Reader db(trace_);
  EXPECT_EQ(db.text("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db.integer("PRAGMA application_id"), 1179669315);
  EXPECT_EQ(db.meta("end_reason"), "exited");
  EXPECT_EQ(db.meta("exit_code"), "0");
  EXPECT_FALSE(db.meta("signal"));
  EXPECT_EQ(db.meta("kernels"), "0");
  EXPECT_EQ(db.meta("schema_version"), "6");
  EXPECT_EQ(db.meta("protocol_version"), std::to_string(wire::kProtocolVersion));
  EXPECT_EQ(db.meta("command"), std::string("[\"") + FPSCOPE_TEST_PROGRAM + "\",\"exit\",\"0\"]");
  EXPECT_EQ(db.meta("dropped_records"), "0");
  EXPECT_EQ(db.meta("cwd"), fs::current_path().string());
  const std::string start = db.meta("start_time").value_or("");
  ASSERT_EQ(start.size(), 24u) << start;  // 2026-11-21T19:40:15.123Z
  EXPECT_EQ(start[10], 'T');
  EXPECT_EQ(start.back(), 'Z');
  EXPECT_LE(std::stoll(db.meta("start_ns").value_or("0")), std::stoll(db.meta("end_ns").value_or("0")));
  EXPECT_EQ(db.meta("options").value_or("").front(), '{');
}

// Meta collector_cpu_ms is this process's CPU time on the trace, and none of the program's: it
// lies between zero and what getrusage says this process spent around the run, while the
// program alone spent more than that.
TEST_F(RunTest, CollectorCpuTimeCountsTheCollectorAndNotTheProgram) {
  auto cpu_ms = [](int who) {
    rusage u{};
    EXPECT_EQ(getrusage(who, &u), 0);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
  };
  const double self_before = cpu_ms(RUSAGE_SELF);
  const double children_before = cpu_ms(RUSAGE_CHILDREN);
  ASSERT_EQ(run_program({"spin", "300"}), 0) << err_;
  const double self = cpu_ms(RUSAGE_SELF) - self_before;
  const double program = cpu_ms(RUSAGE_CHILDREN) - children_before;
  Reader db(trace_);
  const double collector = std::stod(db.meta("collector_cpu_ms").value_or("-1"));
  EXPECT_GT(collector, 0.0);
  EXPECT_LE(collector, self + 0.05);  // the meta has one decimal
  EXPECT_GE(program, 300.0);
  EXPECT_LT(self, program) << "the test needs a collector that spends less than the program";
}

TEST_F(RunTest, ExitStatusIsTheProgramsOwn) {
  EXPECT_EQ(run_program({"exit", "3"}), 3);
  EXPECT_TRUE(says("exited with status 3")) << err_;
  EXPECT_EQ(Reader(trace_).meta("exit_code"), "3");
}

TEST_F(RunTest, SigkilledProgramIsRecordedAsSignaled) {
  EXPECT_EQ(run_program({"kill-self"}), 128 + SIGKILL);
  Reader db(trace_);
  EXPECT_EQ(db.meta("end_reason"), "signaled");
  EXPECT_EQ(db.meta("signal"), "SIGKILL");
  EXPECT_EQ(db.meta("signal_number"), "9");
  EXPECT_FALSE(db.meta("exit_code"));
  EXPECT_TRUE(says("killed by SIGKILL")) << err_;
}

TEST_F(RunTest, SegfaultIsRecordedAsSignaled) {
  EXPECT_EQ(run_program({"segv"}), 128 + SIGSEGV);
  Reader db(trace_);
  EXPECT_EQ(db.meta("end_reason"), "signaled");
  EXPECT_EQ(db.meta("signal"), "SIGSEGV");
  EXPECT_EQ(db.text("PRAGMA integrity_check"), "ok");
}

TEST_F(RunTest, TrapEndsTheRunAsTrapped) {
  EXPECT_EQ(run_program({"trap", "first NaN made by conv2d_forward"}), 128 + SIGTRAP);
  EXPECT_TRUE(says("fpscope: trap: first NaN made by conv2d_forward")) << err_;
  Reader db(trace_);
  EXPECT_EQ(db.meta("end_reason"), "trapped");
  EXPECT_EQ(db.meta("signal"), "SIGTRAP");
  EXPECT_EQ(db.meta("trap.message"), "first NaN made by conv2d_forward");
  EXPECT_EQ(db.meta("trap.kernel_id"), "42");
}

TEST_F(RunTest, InjectorGetsTheSelectionThroughTheEnvironment) {
  const std::string env_file = (dir_ / "env.txt").string();
  setenv("FPSCOPE_STALE_SETTING", "1", 1);
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(run_program({"env", env_file}, {"--every", "2", "--steps", "3-5", "--ops", "conv*,fc1", "--tensors",
                                            "out", "--stats", "basic", "--stats-threads", "3", "--trap", "nan",
                                            "--dump", "op=conv2d_backward,step=4", "--quiet"}),
            0)
      << err_;
  unsetenv("FPSCOPE_STALE_SETTING");
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(err_, "");  // --quiet
  std::ifstream in(env_file);
  std::map<std::string, std::string> env;
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["FPSCOPE_EVERY"], "2");
  EXPECT_EQ(env["FPSCOPE_STEPS"], "3-5");
  EXPECT_EQ(env["FPSCOPE_OPS"], "conv*,fc1");
  EXPECT_EQ(env["FPSCOPE_TENSORS"], "out");
  EXPECT_EQ(env["FPSCOPE_STATS"], "basic");
  EXPECT_EQ(env["FPSCOPE_RECIPES"], "none");
  EXPECT_EQ(env["FPSCOPE_STATS_THREADS"], "3");
  EXPECT_EQ(env["FPSCOPE_TRAP"], "nan");
  EXPECT_EQ(env["FPSCOPE_DUMP"], "op=conv2d_backward,step=4");
  EXPECT_EQ(env["FPSCOPE_ALLOW"], "masked_fill*:-inf,full:-inf,fill_:-inf,scalar_tensor:-inf");  // the default rule
  EXPECT_EQ(env["FPSCOPE_DUMP_DIR"], trace_ + ".dumps");
  EXPECT_TRUE(fs::is_directory(trace_ + ".dumps"));
  EXPECT_EQ(env["FPSCOPE_RING"].rfind("/fpscope-", 0), 0u);
  EXPECT_EQ(env.count("FPSCOPE_STALE_SETTING"), 0u);
  EXPECT_EQ(env.count("FPSCOPE_INJECT_LIB"), 0u);
  const std::string lib = fs::canonical(FPSCOPE_TEST_NOOP_PRELOAD).string();
  EXPECT_EQ(env["LD_PRELOAD"].rfind(lib, 0), 0u) << env["LD_PRELOAD"];
  EXPECT_EQ(env["NVTX_INJECTION64_PATH"], lib);
  EXPECT_EQ(env["CUDA_INJECTION64_PATH"], lib);
  Reader db(trace_);
  EXPECT_EQ(db.meta("env.OMP_NUM_THREADS"), "3");
  EXPECT_EQ(db.meta("options"),
            R"({"allow":"masked_fill*:-inf,full:-inf,fill_:-inf,scalar_tensor:-inf","cupti":true,"dump":"op=conv2d_backward,step=4","eager":false,"every":2,)"
            R"("max_size_mib":0,"ops":"conv*,fc1","recipes":"none",)"
            R"("rescan_inputs":false,"ring_size_mib":64,)"
            R"("stats":"basic","stats_threads":3,"steps":"3-5","tensors":"out","torch_operators":"observer",)"
            R"("trap":"nan","updates":"on"})");
}

TEST_F(RunTest, NoCuptiLeavesCudaInjectionUnset) {
  unsetenv("CUDA_INJECTION64_PATH");
  const auto env = program_environment({"--no-cupti"});
  EXPECT_EQ(env.count("CUDA_INJECTION64_PATH"), 0u);
  EXPECT_EQ(env.at("NVTX_INJECTION64_PATH"), fs::canonical(FPSCOPE_TEST_NOOP_PRELOAD).string());
  EXPECT_NE(Reader(trace_).meta("options").value_or("").find(R"("cupti":false)"), std::string::npos);
}

TEST_F(RunTest, CudaInjectionTheUserSetIsKeptWithOneWarning) {
  setenv("CUDA_INJECTION64_PATH", "/opt/other-profiler/libinject.so", 1);
  const auto env = program_environment();
  const std::string err = err_;
  const auto again_env = program_environment({"--no-cupti"});
  unsetenv("CUDA_INJECTION64_PATH");
  EXPECT_EQ(env.at("CUDA_INJECTION64_PATH"), "/opt/other-profiler/libinject.so");
  const std::string warning = "CUDA_INJECTION64_PATH is already set";
  ASSERT_NE(err.find(warning), std::string::npos) << err;
  EXPECT_EQ(err.find(warning, err.find(warning) + 1), std::string::npos) << "warned twice: " << err;
  // --no-cupti leaves the user's value alone and says nothing about it.
  EXPECT_EQ(again_env.at("CUDA_INJECTION64_PATH"), "/opt/other-profiler/libinject.so");
  EXPECT_EQ(err_.find(warning), std::string::npos) << err_;
}

TEST_F(RunTest, InterruptIsForwardedToTheProgram) {
  const std::string started = (dir_ / "started").string();
  std::thread interrupter([&] {
    while (!fs::exists(started)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    kill(getpid(), SIGTERM);  // fpscope catches it and passes it on
  });
  const int status = run_program({"wait", started});
  interrupter.join();
  EXPECT_EQ(status, 128 + SIGTERM);
  Reader db(trace_);
  EXPECT_EQ(db.meta("end_reason"), "collector_interrupted");
  EXPECT_EQ(db.meta("interrupted_by"), "SIGTERM");
  EXPECT_EQ(db.meta("signal"), "SIGTERM");
}

TEST_F(RunTest, MissingProgramIsReportedWithoutATrace) {
  EXPECT_EQ(run({"-o", trace_, "--", "fpscope-no-such-program"}), 127);
  EXPECT_TRUE(says("program not found: fpscope-no-such-program")) << err_;
  EXPECT_FALSE(fs::exists(trace_));
  EXPECT_EQ(run({"-o", trace_, "--", (dir_ / "nothing").string()}), 127);
  EXPECT_EQ(run({"-o", trace_, "--", dir_.string()}), 126);
  EXPECT_TRUE(says("not executable")) << err_;
}

TEST_F(RunTest, ExistingTraceNeedsForce) {
  { std::ofstream(trace_) << "precious"; }
  EXPECT_EQ(run_program({"exit", "0"}), 2);
  EXPECT_TRUE(says("already exists; pass --force")) << err_;
  std::ifstream in(trace_);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  EXPECT_EQ(run_program({"exit", "0"}, {"--force"}), 0) << err_;
  EXPECT_EQ(Reader(trace_).meta("end_reason"), "exited");
}

TEST_F(RunTest, UnusableOutputIsRefusedBeforeTheProgramStarts) {
  const std::string env_file = (dir_ / "env.txt").string();
  EXPECT_EQ(run({"-o", (dir_ / "missing" / "t.sqlite").string(), "--", FPSCOPE_TEST_PROGRAM, "env", env_file}), 2);
  EXPECT_TRUE(says("does not exist")) << err_;
  // /proc refuses new files even to root, whose access() checks always pass.
  EXPECT_EQ(run({"-o", "/proc/fpscope-test.sqlite", "--", FPSCOPE_TEST_PROGRAM, "env", env_file}), 2);
  EXPECT_TRUE(says("/proc")) << err_;
  EXPECT_EQ(run({"-o", dir_.string(), "--", FPSCOPE_TEST_PROGRAM, "env", env_file}), 2);
  EXPECT_FALSE(fs::exists(env_file)) << "the program must not have run";
}

TEST_F(RunTest, BadOptionValuesAreRefusedWithStatus2) {
  const std::vector<std::vector<std::string>> bad = {
      {"--every", "0"},        {"--every", "x"},          {"--steps", "5-2"},   {"--steps", "a-b"},
      {"--ops", ","},          {"--tensors", "all"},      {"--stats", "most"},  {"--trap", "zero"},
      {"--dump", "op="},       {"--dump", "size=3"},      {"--dump", "step=x"}, {"--dump", "op=a,op=b"}, {"--dump", "step=5-1"},
      {"--ring-size", "0"},    {"--ring-size", "99999"},  {"--no-such-option"}};
  for (const auto& options : bad) {
    EXPECT_EQ(run_program({"exit", "0"}, options), 2) << options[0] << " " << (options.size() > 1 ? options[1] : "");
    EXPECT_FALSE(err_.empty());
    EXPECT_FALSE(fs::exists(trace_));
  }
  EXPECT_EQ(run({"-o", trace_}), 2);
  EXPECT_TRUE(says("no program to run")) << err_;
  EXPECT_EQ(run({"--help"}), 0);
}

// `kill -9` of fpscope run itself: the program goes on untraced, the trace names a collector that
// no longer runs, and the ring it left in /dev/shm is removed by the next fpscope run.
TEST_F(RunTest, SigkilledCollectorLeavesNoRingAndATraceThatSaysSo) {
  const std::string started = (dir_ / "started").string(), go = (dir_ / "go").string();
  const pid_t collector = fork();
  if (collector == 0) {
    std::vector<std::string> args = {"run", "-q", "-o", trace_, "--", FPSCOPE_TEST_PROGRAM, "wait-for", started, go};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    _exit(run_main(static_cast<int>(args.size()), argv.data()));
  }
  for (int i = 0; i < 3000 && !fs::exists(started); ++i) usleep(10000);
  ASSERT_TRUE(fs::exists(started)) << "the traced program did not start";
  kill(collector, SIGKILL);
  int status = 0;
  waitpid(collector, &status, 0);
  std::ofstream(go).put('\n');  // let the orphaned program finish

  Reader db(trace_);
  EXPECT_EQ(db.meta("end_reason"), "running");
  EXPECT_EQ(db.meta("collector_pid"), std::to_string(collector));
  const common::ProcessIdentity named{collector, std::stoull(db.meta("collector_start_ticks").value_or("0")),
                                        db.meta("collector_boot_id").value_or("")};
  EXPECT_EQ(common::is_alive(named), false);
  const std::string ring = db.meta("ring").value_or("");
  ASSERT_EQ(ring_collector(ring)->pid, collector) << ring;

  EXPECT_EQ(run({"-o", (dir_ / "next.sqlite").string(), "--", FPSCOPE_TEST_PROGRAM, "exit", "0"}), 0) << err_;
  EXPECT_FALSE(fs::exists("/dev/shm" + ring)) << ring << " outlived its collector";
}

// Once every traced process has said it exits, the trace is completed while the program is still
// being torn down (the test program waits until the trace says so before it exits). What comes
// after that is drained as it comes (the program waits for it to be read) and makes the collector
// complete the trace anew: a late record, a process started afterwards with its own ring.
TEST_F(RunTest, TheTraceIsCompletedWhileTheProgramExitsAndAgainWhenMoreArrives) {
  const auto scalars = [this] {
    Reader db(trace_);
    std::vector<double> values;
    for (const auto& row : db.rows("SELECT value FROM scalars ORDER BY value")) values.push_back(row[0].d);
    return values;
  };
  ASSERT_EQ(run_program({"exit-then", trace_, "nothing"}, {"--force"}), 0) << err_;
  {
    Reader db(trace_);
    EXPECT_EQ(db.meta("finished_during_exit"), "1");
    EXPECT_EQ(db.meta("finalize_status"), "ok");
    EXPECT_TRUE(db.meta("collector_cpu_ms"));  // written by finish() after prepare_finish() too
    EXPECT_EQ(db.meta("end_reason"), "exited");
    EXPECT_EQ(db.meta("exit_code"), "0");
    EXPECT_EQ(db.meta("records"), "5");
    EXPECT_EQ(db.meta("ranks_ended"), "0:exited");
    EXPECT_EQ(db.one("PRAGMA journal_mode").s, "delete");
  }
  EXPECT_EQ(scalars(), (std::vector<double>{1}));

  ASSERT_EQ(run_program({"exit-then", trace_, "record"}, {"--force"}), 0) << err_;
  {
    Reader db(trace_);
    EXPECT_EQ(db.meta("records"), "6");  // the counts were written again
    EXPECT_EQ(db.meta("finalize_status"), "ok");
  }
  EXPECT_EQ(scalars(), (std::vector<double>{1, 2}));

  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(run_program({"exit-then", trace_, "process"}, {"--force"}), 0) << err_;
  // Drained as it came: a collector that stopped draining would leave the child waiting on its
  // ring for the 30 s no-progress limit.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  {
    Reader db(trace_);
    EXPECT_EQ(db.meta("ranks_ended"), "0:exited 0:exited");
    EXPECT_EQ(db.meta("traced_processes"), "2");
    EXPECT_EQ(db.meta("dropped_records"), "0");
    EXPECT_EQ(db.meta("finalize_status"), "ok");
    EXPECT_EQ(db.one("SELECT count(*) FROM processes WHERE ended = 'exited'").i, 2);
    EXPECT_EQ(db.one("SELECT processes FROM summary_ranks WHERE rank = 0").i, 2);  // the summaries too
  }
  EXPECT_EQ(scalars(), (std::vector<double>{1, 3}));
}

// A program that publishes now and then, 60 ms apart: the drain loop's naps grow between its
// records to their longest (a nap that finds nothing doubles the next, up to 50 ms), and every
// record still reaches the trace, once.
TEST_F(RunTest, RecordsOfAProgramThatPublishesNowAndThenAllReachTheTrace) {
  ASSERT_EQ(run_program({"trickle", "12", "60"}), 0) << err_;
  Reader db(trace_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM scalars"), 12);
  EXPECT_EQ(db.integer("SELECT count(*) FROM scalars WHERE value = step AND step BETWEEN 0 AND 11"), 12);
  EXPECT_EQ(db.integer("SELECT count(DISTINCT step) FROM scalars"), 12);
  EXPECT_EQ(db.meta("dropped_records"), "0");
  EXPECT_EQ(db.meta("end_reason"), "exited");
}

// The program publishes numbered records and SIGKILLs itself at a random moment; every record it
// published (its own count, kept in a file mapping that survives it) must be in the trace, in order.
TEST_F(RunTest, RecordsPublishedBeforeASigkillAllReachTheTrace) {
  std::mt19937 rng(2024);
  for (int round = 0; round < 5; ++round) {
    const std::string count_file = (dir_ / "count").string();
    const long kill_after_us = 2000 + static_cast<long>(rng() % 40000);
    EXPECT_EQ(run_program({"produce", count_file, std::to_string(kill_after_us)}, {"--force", "--ring-size", "1"}),
              128 + SIGKILL)
        << err_;
    uint64_t published = 0;
    std::ifstream(count_file, std::ios::binary).read(reinterpret_cast<char*>(&published), sizeof published);
    Reader db(trace_);
    EXPECT_EQ(db.text("PRAGMA integrity_check"), "ok");
    const int64_t rows = db.integer("SELECT count(*) FROM scalars");
    EXPECT_GE(rows, static_cast<int64_t>(published)) << "round " << round;
    EXPECT_LE(rows, static_cast<int64_t>(published) + 1) << "round " << round;
    EXPECT_GT(rows, 0);
    EXPECT_EQ(db.integer("SELECT count(DISTINCT step) FROM scalars WHERE step BETWEEN 0 AND " + std::to_string(rows - 1)), rows);
    EXPECT_EQ(db.integer("SELECT count(*) FROM scalars WHERE value = step * 0.5"), rows);
    EXPECT_EQ(db.meta("dropped_records"), "0");
    EXPECT_EQ(db.meta("end_reason"), "signaled");
  }
}

}  // namespace
}  // namespace fpscope
