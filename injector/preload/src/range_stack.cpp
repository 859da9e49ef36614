// Per-thread NVTX range stacks and launch attribution (see range_stack.h).
#include "range_stack.h"

namespace fpscope::inject {

int RangeStack::push(OpenRange range) {
  ranges_.push_back(std::move(range));
  reattribute();
  return static_cast<int>(ranges_.size()) - 1;
}

int RangeStack::pop(const void* domain, OpenRange* closed) {
  for (size_t i = ranges_.size(); i-- > 0;) {
    if (ranges_[i].domain != domain) continue;
    if (closed) *closed = std::move(ranges_[i]);
    ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(i));
    reattribute();
    return static_cast<int>(i);
  }
  return -1;
}

void RangeStack::reattribute() {
  Attribution a;
  bool have_step = false;
  for (size_t i = ranges_.size(); i-- > 0;) {
    const OpenRange& r = ranges_[i];
    if (!r.trainer_domain) continue;
    if (r.category == kStepCategory && !have_step) {
      a.step = r.step;
      have_step = true;
    } else if (r.category == kPhaseCategory && a.phase == nullptr) {
      a.phase = r.message.c_str();
      a.phase_id = r.message_id;
    } else if (r.category == kLayerCategory && a.layer == nullptr) {
      a.layer = r.message.c_str();
      a.layer_id = r.message_id;
    }
  }
  attribution_ = a;
}

RangeStack& this_thread_ranges() {
  thread_local RangeStack stack;
  return stack;
}

}  // namespace fpscope::inject
