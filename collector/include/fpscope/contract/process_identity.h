// Which process wrote a trace, told apart from a later process that reuses its pid: the pid, the
// kernel's start time of that process (in clock ticks since boot) and the boot id. `fpscope run`
// records its own identity in meta and in its ring's name; a reader, or the next `fpscope run`
// cleaning up rings, asks whether that process still runs.
//
// Part of the trace contract (see contract.h). Linux only (/proc).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace fpscope::contract {

struct ProcessIdentity {
  pid_t pid = 0;
  unsigned long long start_ticks = 0;  // /proc/PID/stat field 22
  std::string boot_id;                 // /proc/sys/kernel/random/boot_id
};

// The start time of `pid` (field 22 of /proc/PID/stat), or nullopt if no such process runs.
inline std::optional<unsigned long long> process_start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  return std::stoull(field);
}

inline std::string current_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

inline ProcessIdentity self_identity() {
  ProcessIdentity me;
  me.pid = ::getpid();
  me.start_ticks = process_start_ticks(me.pid).value_or(0);
  me.boot_id = current_boot_id();
  return me;
}

// true: that process still runs; false: it is gone (no such pid, another process under its pid,
// or the machine rebooted since); nullopt: cannot be told (identity incomplete).
inline std::optional<bool> is_alive(const ProcessIdentity& who) {
  if (who.pid <= 0 || who.start_ticks == 0 || who.boot_id.empty()) return std::nullopt;
  const std::string boot = current_boot_id();
  if (boot.empty()) return std::nullopt;
  if (boot != who.boot_id) return false;
  const auto ticks = process_start_ticks(who.pid);
  return ticks && *ticks == who.start_ticks;
}

}  // namespace fpscope::contract
