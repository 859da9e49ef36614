// Which process wrote a trace, told apart from a later process that reuses its pid: the pid, the
// kernel's start time of that process (in clock ticks since boot) and the boot id. `fpscope run`
// records its own identity in meta and in its ring's name; a reader, or the next `fpscope run`
// cleaning up rings, asks whether that process still runs.
//
// Linux only (/proc). The trace's meta and the rings' names carry the identity (docs/schema.md).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace fpscope::common {

struct ProcessIdentity {
  pid_t pid = 0;
  unsigned long long start_ticks = 0;  // /proc/PID/stat field 22
  std::string boot_id;                 // /proc/sys/kernel/random/boot_id
};

// The start time of `pid` (field 22 of /proc/PID/stat), or nullopt if no such process runs.
std::optional<unsigned long long> process_start_ticks(pid_t pid);

// This boot of the machine (a random id the kernel makes at boot).
std::string current_boot_id();

// This process's identity.
ProcessIdentity self_identity();

// true: that process still runs; false: it is gone (no such pid, another process under its pid,
// or the machine rebooted since); nullopt: cannot be told (identity incomplete).
std::optional<bool> is_alive(const ProcessIdentity& who);

}  // namespace fpscope::common
