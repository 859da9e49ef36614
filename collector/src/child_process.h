// The traced program as a child process of `fpscope run`: finding it on PATH, starting it with a
// prepared environment, forwarding the interrupts fpscope receives, and reading how it ended.
// Private to the collector.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace fpscope {

// How a child ended.
struct ChildEnd {
  bool signaled = false;
  int exit_code = 0;   // when !signaled
  int signal = 0;      // when signaled
  // The status fpscope exits with: the exit code, or 128 + signal.
  int shell_status() const { return signaled ? 128 + signal : exit_code; }
};

// "SIGSEGV" for 11; "signal N" for numbers without a name.
std::string signal_name(int sig);

// The executable `program` names: itself if it has a '/', else the first match on PATH.
// nullopt + *error ("not found" or "not executable") when there is none; *not_found tells which.
std::optional<std::string> find_program(const std::string& program, bool* not_found, std::string* error);

// Catches SIGINT, SIGTERM, SIGHUP and SIGQUIT in fpscope for as long as it lives, restoring the
// previous handlers afterwards. The signals are only noted; the run loop forwards them.
class InterruptForwarder {
 public:
  InterruptForwarder();
  ~InterruptForwarder();
  InterruptForwarder(const InterruptForwarder&) = delete;
  InterruptForwarder& operator=(const InterruptForwarder&) = delete;
  // Sends the child every interrupt noted since the last call (those a terminal sent to the whole
  // process group reached it already). Returns the last one noted, or 0.
  int forward_to(pid_t child);
  // The first interrupt fpscope received, or 0.
  int first_received() const;
  // From now on an interrupt to forward also calls `wake` (async-signal-safe; nullptr: none), so
  // that a run loop asleep between drains forwards it at once.
  void wake_with(void (*wake)(void*), void* context);
};

class ChildProcess {
 public:
  // Starts `path` with `args` (args[0] is the program as the user wrote it) and `env`.
  static std::optional<ChildProcess> spawn(const std::string& path, const std::vector<std::string>& args,
                                           const std::vector<std::string>& env, std::string* error);
  pid_t pid() const { return pid_; }
  // nullopt while it runs.
  std::optional<ChildEnd> poll();
  // True once it has ended, without reaping it (poll() still returns its end), or once reaped.
  bool has_ended() const;
  ChildEnd wait();

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

}  // namespace fpscope
