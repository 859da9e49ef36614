// A front end's parameters, copied before an optimizer step so that the step can be counted from
// outside it (fpscope_update_before/after/prune, fpscope/inject_api.h; the counts and sums:
// fpscope/update_sums.h). A parameter's copy is kept under the front end's key from one watched
// step to the next, so that its memory is reused rather than faulted in again each step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fpscope/tensor_stats.h"
#include "fpscope/update_sums.h"

namespace fpscope::inject {

class UpdateCopies {
 public:
  // Copies `count` elements of `param` under `key`, with where `grad` (the same type and count) is
  // nonzero. False, and no copy under `key`, when update_sums() does not compare the type or the
  // memory cannot be had.
  bool keep(uint64_t key, ElementType type, const void* param, const void* grad, std::size_t count);
  // The step of the parameter now at `param`, counted against the copy under `key`, which is
  // then used up; nullopt when there is none of that type and count.
  std::optional<UpdateSums> compare(uint64_t key, ElementType type, const void* param, std::size_t count);
  // One optimizer step's copies are made: frees the copies of the keys not kept during the last
  // kPruneAfter calls (parameters no longer stepped). Several optimizers stepped in turn, each
  // calling it, keep their copies.
  void prune();
  static constexpr uint64_t kPruneAfter = 8;

 private:
  struct Copy {
    ElementType type = ElementType::F32;
    std::size_t count = 0;
    bool ready = false;  // kept and not yet compared
    uint64_t kept = 0;   // the prune round it was last kept in
    std::vector<uint8_t> old, nonzero;
  };
  std::mutex mutex_;
  std::unordered_map<uint64_t, Copy> copies_;
  uint64_t round_ = 0;  // prune() calls so far
};

}  // namespace fpscope::inject
