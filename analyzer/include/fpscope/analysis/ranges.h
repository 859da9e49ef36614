// Value ranges by layer or tensor and step (the heat maps), by kernel, and the cast outcomes per
// format.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

struct FormatOutcome {
  bool measured = false;   // false when the trace has --stats basic (NULL columns)
  int64_t overflow = 0, underflow = 0, subnormal = 0, near_max = 0;  // values
  double overflow_share = 0, underflow_share = 0, subnormal_share = 0, near_max_share = 0;
};

enum class RangeGrouping { LayerKernel, Layer, Kernel, Op };
enum class RoleFilter { Outputs, Inputs, Both };

struct RangeRow {
  std::string kernel;                // "" when grouped by layer only
  std::string op;                    // op_of_kernel, or the op when grouped by op
  std::optional<std::string> layer;  // nullopt: outside any layer range (or grouped by kernel)
  std::string role;                  // "out", "in" or "both"
  int64_t tensors = 0, elements = 0;
  int64_t nan = 0, inf = 0, zero = 0;        // NaN and Inf no allow rule covers
  int64_t intended = 0;                      // NaN/Inf an allow rule covers
  std::optional<double> absmax, min_nonzero;
  std::optional<int> absmax_exponent;        // floor(log2(absmax))
  std::optional<double> headroom_f16_log2;   // log2(65504 / absmax); < 0 overflows
  std::optional<double> headroom_bf16_log2;  // log2(bf16 max / absmax)
  std::optional<double> footroom_f16_log2;   // log2(min_nonzero / 2^-24); < 0 flushes to zero
  std::array<FormatOutcome, kFormatCount> formats;
};
// Side outputs of forward-phase kernels (a normalisation's saved mean and reciprocal deviation,
// pooling's argmax: contract::kMainOutputSlot) are not the layer's activation. Apart: a row counts
// their NaN/Inf and nothing else of them; Included: they count as any output.
enum class SideOutputs { Apart, Included };
std::vector<RangeRow> ranges(const Trace& trace, RangeGrouping grouping = RangeGrouping::LayerKernel,
                             RoleFilter roles = RoleFilter::Outputs, SideOutputs side_outputs = SideOutputs::Apart);

// What a range view shows, by the question a user asks of it. Backward outputs carry the loss
// scale, so mixing phases would colour every layer of a loss-scaled run by its scaled gradients.
enum class RangeView {
  Activations,        // outputs of forward-phase kernels, by layer (the default)
  GradientsScaled,    // outputs of backward-phase kernels as stored, by layer: what overflows
  GradientsUnscaled,  // the same divided by the step's loss scale: what the gradients are
  Weights,            // weights and master weights the optimizer wrote, by parameter tensor
  OptimizerState,     // optimizer state the optimizer wrote (momentum, Adam moments), by tensor
};
inline constexpr int kRangeViewCount = 5;
struct RangeViewInfo {
  RangeView view;
  const char* key;     // on the command line: --view KEY
  const char* title;   // heading and legend: what the cells are
  const char* short_title;  // the same in a few words, for narrow places
  const char* rows;    // what a row is: "layer" or "tensor"
};
const RangeViewInfo& range_view_info(RangeView view);
std::optional<RangeView> parse_range_view(std::string_view key);

// Range of each row (a layer, or a parameter tensor for Weights and OptimizerState) at each step,
// for heat maps. Rows appear in the order they first appear; cells in step order.
struct LayerStepCell {
  std::string layer;  // the row: a layer name, or a tensor name (range_view_info(view).rows)
  int64_t step = 0;
  std::optional<double> absmax, min_nonzero;
  int64_t nonfinite = 0;
};
std::vector<LayerStepCell> layer_step_ranges(const Trace& trace, RangeView view = RangeView::Activations);

// The same cells gathered per row over every step: the range section of `fpscope report --view`.
struct ViewRangeRow {
  std::string row;                          // layer or tensor, in first-seen order
  int64_t steps = 0;                        // steps with a cell
  std::optional<double> absmax, min_nonzero;
  std::optional<double> headroom_f16_log2;  // log2(fp16 max / absmax); < 0: beyond fp16
  std::optional<double> footroom_f16_log2;  // log2(min_nonzero / fp16 smallest subnormal); < 0 flushes
  int64_t nonfinite = 0;
};
std::vector<ViewRangeRow> view_ranges(const Trace& trace, RangeView view = RangeView::Activations);
std::vector<ViewRangeRow> view_ranges(const std::vector<LayerStepCell>& cells);  // the same from cells at hand

}  // namespace fpscope::analysis
