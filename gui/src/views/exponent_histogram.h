// The exponent histogram of one tensor against the representable ranges of fp16, bf16, fp8 e4m3
// and e5m2 (normal, subnormal, overflow and flush-to-zero bands, the palette's), with its format
// strips and what a cast to each format would do, as the trace counted it. The tensor is the one
// selected (a heat map cell, a kernel of the timeline), else the one the caller offers. Drawn
// below the tensor ranges view's heat maps.
#pragma once

#include <cstdint>
#include <optional>

#include "fpscope/analysis.h"
#include "trace_data.h"
#include "ui/plot.h"
#include "views/view.h"

namespace fpscope::gui {

// A tensor of an open trace, by its launch.
struct TensorRef {
  const TraceDoc* doc = nullptr;
  int64_t kernel_id = 0, tensor_id = 0;
};

class ExponentHistogramPanel {
 public:
  // The selected tensor's histogram, or `fallback`'s when nothing is selected.
  void draw(ViewContext& ctx, const std::optional<TensorRef>& fallback);

 private:
  const TraceDoc* selected_doc(ViewContext& ctx) const;
  const analysis::TensorRecord* find_record(const TraceData& d, int64_t kernel_id, int64_t tensor_id);
  static void draw_cast_table(const analysis::TensorRecord& t);
  static float cast_table_width();
  void draw_tensor_picker(ViewContext& ctx, const TraceData& d);
  void draw_format_choice();
  void draw_histogram(const analysis::ExponentHistogram& h, const analysis::TensorRecord* record);
  // One strip per format under the histogram: where its values underflow, are subnormal, normal,
  // or overflow, on the same exponent axis.
  template <typename ToPx>
  void draw_format_strips(const plot::Range& xr, float left, float right, ToPx px);

  KernelDetailCache details_;
  int shaded_format_ = 0;
};

}  // namespace fpscope::gui
