// Starting, watching and signalling the traced program (see child_process.h).
#include "child_process.h"

#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace fpscope {
namespace {

constexpr int kInterrupts[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Set by the handler, read by the run loop. Pending: signals still to forward, one bit each.
std::atomic<unsigned> g_pending{0};
std::atomic<int> g_first{0};
std::atomic<int> g_last{0};
struct sigaction g_previous[sizeof kInterrupts / sizeof kInterrupts[0]];
std::atomic<void (*)(void*)> g_wake{nullptr};
std::atomic<void*> g_wake_context{nullptr};

void on_interrupt(int sig, siginfo_t* info, void*) {
  int expected = 0;
  g_first.compare_exchange_strong(expected, sig);
  g_last.store(sig);
  // A terminal's Ctrl-C reaches every process of the foreground group, the child included:
  // forwarding it would deliver it twice. Those come from the kernel; kill() comes from a user.
  if (info == nullptr || info->si_code != SI_KERNEL) {
    g_pending.fetch_or(1u << sig);
    if (auto* wake = g_wake.load()) wake(g_wake_context.load());
  }
}

std::optional<std::string> check_executable(const std::string& path, bool* not_found, std::string* error) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    *not_found = true;
    *error = "program not found: " + path;
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode) || access(path.c_str(), X_OK) != 0) {
    *not_found = false;
    *error = "program is not executable: " + path;
    return std::nullopt;
  }
  return path;
}

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::optional<std::string> find_program(const std::string& program, bool* not_found, std::string* error) {
  if (program.find('/') != std::string::npos) return check_executable(program, not_found, error);
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::optional<std::string> not_executable;
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) {
      struct stat st {};
      if (stat(candidate.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return candidate;
    } else if (access(candidate.c_str(), F_OK) == 0 && !not_executable) {
      not_executable = candidate;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  *not_found = !not_executable;
  *error = not_executable ? "program is not executable: " + *not_executable
                          : "program not found: " + program + " (not a path and not on PATH)";
  return std::nullopt;
}

InterruptForwarder::InterruptForwarder() {
  g_pending = 0;
  g_first = 0;
  g_last = 0;
  struct sigaction sa {};
  sa.sa_sigaction = on_interrupt;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < std::size(kInterrupts); ++i) sigaction(kInterrupts[i], &sa, &g_previous[i]);
}

void InterruptForwarder::wake_with(void (*wake)(void*), void* context) {
  g_wake.store(nullptr);
  g_wake_context.store(context);
  g_wake.store(wake);
}

InterruptForwarder::~InterruptForwarder() {
  g_wake.store(nullptr);
  for (std::size_t i = 0; i < std::size(kInterrupts); ++i) sigaction(kInterrupts[i], &g_previous[i], nullptr);
}

int InterruptForwarder::forward_to(pid_t child) {
  const unsigned pending = g_pending.exchange(0);
  for (int sig : kInterrupts)
    if (pending & (1u << sig)) kill(child, sig);
  return g_last.load();
}

int InterruptForwarder::first_received() const { return g_first.load(); }

std::optional<ChildProcess> ChildProcess::spawn(const std::string& path, const std::vector<std::string>& args,
                                                const std::vector<std::string>& env, std::string* error) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // The child starts with default dispositions for the interrupts fpscope catches.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : kInterrupts) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = "cannot start " + path + ": " + strerror(rc);
    return std::nullopt;
  }
  return ChildProcess(pid);
}

static ChildEnd decode(int status) {
  ChildEnd end;
  if (WIFSIGNALED(status)) {
    end.signaled = true;
    end.signal = WTERMSIG(status);
  } else {
    end.exit_code = WEXITSTATUS(status);
  }
  return end;
}

std::optional<ChildEnd> ChildProcess::poll() {
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) return decode(status);
  return std::nullopt;
}

bool ChildProcess::has_ended() const {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid_;
}

ChildEnd ChildProcess::wait() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return decode(status);
}

}  // namespace fpscope
