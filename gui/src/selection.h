// The selection every view shares: a step, a layer, a kernel launch (of one trace) and the tensor
// looked at. A view that selects something sets it here; the others follow on their next frame.
// Views may also ask to be shown (a double-click in the event table opens the timeline there).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <fpscope/analysis.h>

namespace fpscope::gui {

struct KernelRef {
  int trace_id = 0;       // TraceDoc::id()
  int64_t kernel_id = 0;  // kernels.id in that trace
  bool operator==(const KernelRef&) const = default;
};

struct Selection {
  std::optional<int64_t> step;
  std::optional<std::string> layer;
  std::optional<KernelRef> kernel;
  std::optional<int64_t> tensor_id;  // of the selected kernel's trace
  std::optional<std::string> tensor_name;
  // Which tensors the range heat maps show (forward activations unless the user picks another).
  analysis::RangeView range_view = analysis::RangeView::Activations;

  // Set by a view that wants the timeline to centre on the selected kernel (or step).
  bool focus_timeline = false;
  // Set to a view name ("timeline", ...) to bring that tab to the front on the next frame.
  std::string show_view;

  void select_step(int64_t s) {
    step = s;
  }
  // A launch, its step when known; the layer stays as it was.
  void select_kernel(int trace_id, int64_t kernel_id, std::optional<int64_t> kernel_step) {
    kernel = KernelRef{trace_id, kernel_id};
    if (kernel_step) step = kernel_step;
    tensor_id.reset();
  }
  // A launch, its step and its layer when known.
  void select_kernel(int trace_id, int64_t kernel_id, std::optional<int64_t> kernel_step,
                     const std::optional<std::string>& kernel_layer) {
    select_kernel(trace_id, kernel_id, kernel_step);
    if (kernel_layer) layer = *kernel_layer;
  }
  void jump_to_timeline() {
    focus_timeline = true;
    show_view = "timeline";
  }
  void clear() { *this = Selection{}; }
};

}  // namespace fpscope::gui
