// Runs the mptrain program for the tests that exercise it end to end: command line in, exit code,
// combined output and (optionally) the metrics JSON out.
#pragma once

#include "temp_path.h"
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace mptrain_test {

struct RunOutcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline RunOutcome run_command(const std::string& command) {
  RunOutcome outcome;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return outcome;
  std::array<char, 4096> buffer{};
  std::size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) outcome.output.append(buffer.data(), got);
  int status = ::pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

inline RunOutcome run_mptrain(const std::string& args, const std::string& env = "") {
  return run_command(env + " " + MPTRAIN_BIN + " " + args);
}

// A new empty file of its own (mkstemp), removed with the process's test folder at exit.
inline std::string temp_path(const std::string& stem) {
  return fpscope::test::process_temp_dir().make_file(stem).string();
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace mptrain_test
