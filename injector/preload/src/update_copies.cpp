// A front end's parameters copied before an optimizer step (update_copies.h).
#include "update_copies.h"

#include <exception>

namespace fpscope::inject {

bool UpdateCopies::keep(uint64_t key, ElementType type, const void* param, const void* grad, std::size_t count) {
  if (!update_sums_supported(type) || param == nullptr || grad == nullptr) return false;
  std::lock_guard lock(mutex_);
  Copy& copy = copies_[key];
  copy.ready = false;
  copy.kept = round_;
  try {
    copy.old.resize(count * element_bytes(type));
    copy.nonzero.resize(count);
  } catch (const std::exception&) {  // std::bad_alloc, or std::length_error: more than a vector holds
    copies_.erase(key);
    return false;
  }
  snapshot_update(type, param, grad, count, copy.old.data(), copy.nonzero.data());
  copy.type = type;
  copy.count = count;
  copy.ready = true;
  return true;
}

std::optional<UpdateSums> UpdateCopies::compare(uint64_t key, ElementType type, const void* param,
                                                std::size_t count) {
  if (param == nullptr) return std::nullopt;
  std::lock_guard lock(mutex_);
  const auto it = copies_.find(key);
  if (it == copies_.end() || !it->second.ready) return std::nullopt;
  Copy& copy = it->second;
  copy.ready = false;
  if (copy.type != type || copy.count != count) return std::nullopt;
  return update_sums(type, copy.old.data(), param, copy.nonzero.data(), count);
}

void UpdateCopies::prune() {
  std::lock_guard lock(mutex_);
  ++round_;
  std::erase_if(copies_, [&](const auto& entry) { return round_ - entry.second.kept >= kPruneAfter; });
}

}  // namespace fpscope::inject
