// Runs the mptrain program for the tests that exercise it end to end: command line in, exit code,
// combined output and (optionally) the metrics JSON out.
#pragma once

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

// A file name unique to this process and test.
inline std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()))).string();
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace mptrain_test
