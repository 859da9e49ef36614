// Ring names that carry their collector's identity, and the sweep of orphaned rings (ring_names.h).
#include "fpscope/collector/ring_names.h"

#include <dirent.h>
#include <sys/mman.h>

#include <fmt/format.h>

#include <charconv>
#include <memory>

namespace fpscope {
namespace {

constexpr std::string_view kPrefix = "fpscope-";

template <typename T>
bool parse_number(std::string_view text, T* out, int base = 10) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string ring_name_for(const common::ProcessIdentity& collector, uint32_t random) {
  return fmt::format("/{}{}-{}-{:08x}", kPrefix, collector.pid, collector.start_ticks, random);
}

std::optional<common::ProcessIdentity> ring_collector(std::string_view name) {
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  std::string_view parts[3];
  for (int i = 0; i < 2; ++i) {
    const std::size_t dash = name.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    parts[i] = name.substr(0, dash);
    name.remove_prefix(dash + 1);
  }
  parts[2] = name;
  // A sibling ring (ring.h) carries its number after the random part: "...-<random>-<k>".
  if (const std::size_t dash = parts[2].find('-'); dash != std::string_view::npos) {
    uint32_t k = 0;
    if (!parse_number(parts[2].substr(dash + 1), &k) || k == 0) return std::nullopt;
    parts[2] = parts[2].substr(0, dash);
  }
  common::ProcessIdentity who;
  uint32_t random = 0;
  if (!parse_number(parts[0], &who.pid) || who.pid <= 0 || !parse_number(parts[1], &who.start_ticks) ||
      parts[2].size() != 8 || !parse_number(parts[2], &random, 16)) {
    return std::nullopt;
  }
  return who;
}

std::vector<std::string> remove_orphaned_rings(const std::string& shm_dir) {
  std::vector<std::string> removed;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(shm_dir.c_str()), closedir);
  if (!dir) return removed;
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    const auto collector = ring_collector(name);
    if (!collector) continue;
    const auto ticks = common::process_start_ticks(collector->pid);
    if (ticks && *ticks == collector->start_ticks) continue;  // its collector still runs
    if (shm_unlink(("/" + name).c_str()) == 0) removed.push_back("/" + name);
  }
  return removed;
}

}  // namespace fpscope
