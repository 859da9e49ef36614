// Process identity from /proc (fpscope/common/process_identity.h).
#include "fpscope/common/process_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace fpscope::common {

std::optional<unsigned long long> process_start_ticks(pid_t pid) {
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

std::string current_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

ProcessIdentity self_identity() {
  ProcessIdentity me;
  me.pid = ::getpid();
  me.start_ticks = process_start_ticks(me.pid).value_or(0);
  me.boot_id = current_boot_id();
  return me;
}

std::optional<bool> is_alive(const ProcessIdentity& who) {
  if (who.pid <= 0 || who.start_ticks == 0 || who.boot_id.empty()) return std::nullopt;
  const std::string boot = current_boot_id();
  if (boot.empty()) return std::nullopt;
  if (boot != who.boot_id) return false;
  const auto ticks = process_start_ticks(who.pid);
  return ticks && *ticks == who.start_ticks;
}

}  // namespace fpscope::common
