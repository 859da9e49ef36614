// The NVTX ranges open on one thread, and what they say about the kernel launched now.
//
// mptrain marks its structure with ranges of the trainer's domain, by the categories of the trace
// contract (fpscope/contract/nvtx.h: step with the optimizer step as int64 payload, phase, layer).
// A launch belongs to the innermost open range of each category. RangeStack keeps one thread's
// open ranges (any domain) and recomputes that attribution on every push and pop, so a launch
// reads it without searching.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fpscope/contract/nvtx.h"

namespace fpscope::inject {

inline constexpr uint32_t kStepCategory = static_cast<uint32_t>(contract::NvtxCategory::Step);
inline constexpr uint32_t kPhaseCategory = static_cast<uint32_t>(contract::NvtxCategory::Phase);
inline constexpr uint32_t kLayerCategory = static_cast<uint32_t>(contract::NvtxCategory::Layer);
inline constexpr const char* kTrainerDomain = contract::kTrainerNvtxDomain;

struct OpenRange {
  const void* domain = nullptr;  // the NVTX domain handle, null for the default domain
  bool trainer_domain = false;   // the domain is "mptrain": its categories attribute launches
  uint32_t category = 0;
  int64_t step = -1;             // the payload of a step range
  uint32_t message_id = 0;       // interned message (0 when not tracing)
  std::string message;
};

// What a launch is attributed to. Names point into the stack: valid until the next push or pop.
struct Attribution {
  int64_t step = -1;
  uint32_t phase_id = 0, layer_id = 0;
  const char* phase = nullptr;
  const char* layer = nullptr;
};

class RangeStack {
 public:
  // Returns the 0-based depth of the new range.
  int push(OpenRange range);
  // Closes the innermost range of `domain`; returns its 0-based depth, or -1 if none is open.
  // `closed` (if given) receives the range.
  int pop(const void* domain, OpenRange* closed = nullptr);
  const Attribution& attribution() const { return attribution_; }
  size_t depth() const { return ranges_.size(); }

 private:
  void reattribute();
  std::vector<OpenRange> ranges_;
  Attribution attribution_;
};

// The calling thread's stack.
RangeStack& this_thread_ranges();

}  // namespace fpscope::inject
