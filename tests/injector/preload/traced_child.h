// Runs a program with the injector preloaded into it and reads its trace straight from the ring,
// as `fpscope run` would but without SQLite: the injection tests then check records directly.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fpscope/collector/ring.h"
#include "memory_sink.h"
#include "temp_path.h"

extern char** environ;

namespace fpscope::inject::testing {

struct TracedRun {
  int wait_status = 0;
  std::string error;        // why the run could not be made
  std::string stderr_text;  // what the program printed on stderr
  DecodedTrace trace;
  uint64_t dropped = 0;
};

// Runs argv with LD_PRELOAD and NVTX_INJECTION64_PATH naming `library` and FPSCOPE_RING naming a
// fresh ring; `extra` adds or replaces environment variables (an empty value removes one).
// Starts argv with `env` (NAME=value strings), stdout to /dev/null and stderr kept; calls poll()
// every millisecond until the program ends. Returns false if it could not start.
template <typename Poll>
bool spawn_and_wait(const std::vector<std::string>& argv, const std::vector<std::string>& env, Poll poll,
                    int* wait_status, std::string* stderr_text) {
  std::vector<std::string> argv_copy = argv, env_copy = env;
  std::vector<char*> args, envp;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  for (auto& s : env_copy) envp.push_back(s.data());
  envp.push_back(nullptr);
  char stderr_path[] = "/tmp/fpscope-e2e-stderr-XXXXXX";
  const int err_fd = mkstemp(stderr_path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(err_fd);
  if (rc == 0) {
    while (waitpid(pid, wait_status, WNOHANG) == 0) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    poll();
    std::ifstream in(stderr_path);
    std::stringstream text;
    text << in.rdbuf();
    *stderr_text = text.str();
  }
  unlink(stderr_path);
  return rc == 0;
}

// This process's environment with `extra` added or replaced (an empty value removes a variable).
inline std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) {
    if (v.empty()) env.erase(k);
    else env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Runs argv with LD_PRELOAD and NVTX_INJECTION64_PATH naming `library` and FPSCOPE_RING naming a
// fresh ring; `extra` adds or replaces environment variables (an empty value removes one).
inline TracedRun run_traced(const std::string& library, const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& extra = {}, bool with_ring = true) {
  TracedRun run;
  const std::string ring = fpscope::test::unique_shm_name("fpscope-inject-e2e");
  std::unique_ptr<RingConsumer> consumer;
  if (with_ring) {
    consumer = RingConsumer::create(ring, 1 << 16, &run.error);
    if (!consumer) return run;
  }
  std::map<std::string, std::string> vars = {{"LD_PRELOAD", library}, {"NVTX_INJECTION64_PATH", library}};
  if (with_ring) vars["FPSCOPE_RING"] = ring;
  for (const auto& [k, v] : extra) vars[k] = v;
  auto drain = [&] {
    if (consumer) consumer->drain([&](const wire::RecordHeader* h) { run.trace.add(h); });
  };
  if (!spawn_and_wait(argv, environment_with(vars), drain, &run.wait_status, &run.stderr_text))
    run.error = "cannot start " + argv[0];
  if (consumer) run.dropped = consumer->dropped_records();
  return run;
}

}  // namespace fpscope::inject::testing
