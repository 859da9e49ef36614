// Names of the collector's shared-memory rings, and the removal of rings whose collector is gone.
//
// A ring is named "/fpscope-<pid>-<start>-<random>" (its siblings add "-<k>") after the `fpscope run` that created it (its pid
// and kernel start time, contract/process_identity.h). The collector removes its ring when it
// ends; a collector killed with SIGKILL cannot, so every `fpscope run` first removes the rings whose
// named collector no longer runs. A ring of a live collector, or a name in another form, is never
// touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/common/process_identity.h"

namespace fpscope {

// "/fpscope-<pid>-<start_ticks>-<random as 8 hex digits>".
std::string ring_name_for(const common::ProcessIdentity& collector, uint32_t random);

// The collector named by a ring's name (with or without the leading '/'), or nullopt if the name
// is not one ring_name_for() makes, or a sibling of one (sibling_ring_name(), ring.h). Its boot_id is left empty: /dev/shm does not outlive a boot.
std::optional<common::ProcessIdentity> ring_collector(std::string_view name);

// Removes every ring in `shm_dir` (the folder behind shm_open, /dev/shm on Linux) whose collector
// no longer runs; returns the names removed.
std::vector<std::string> remove_orphaned_rings(const std::string& shm_dir = "/dev/shm");

}  // namespace fpscope
