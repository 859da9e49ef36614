// Tensors: the measured tensors of a launch and a tensor's exponent histogram.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/ranges.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

struct TensorRecord {
  int64_t id = 0, kernel_id = 0;
  std::string role;  // "in", "out"
  int slot = 0;
  std::optional<int64_t> tensor_uid;
  std::string name, dtype, shape;
  int64_t count = 0, nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;
  std::optional<double> min, max, absmax, min_nonzero, mean, rms;
  std::array<FormatOutcome, kFormatCount> formats;
};
std::vector<TensorRecord> tensors_of_kernel(const Trace& trace, int64_t kernel_id);

struct ExponentHistogram {
  int64_t tensor_id = 0;
  std::string tensor, kernel, dtype;
  bool measured = false;                       // false: the trace has no histogram (--stats basic)
  std::vector<std::pair<int, int64_t>> bins;   // (e, count): 2^e <= |x| < 2^(e+1), ascending e
  int64_t zero = 0, nan = 0, inf = 0;
};
ExponentHistogram exponent_histogram(const Trace& trace, int64_t tensor_id);  // throws if no such tensor

// The largest output tensor (by absmax) of one heat-map cell: `row` and `step` as in
// layer_step_ranges(trace, view), the same tensors that cell summarizes. nullopt when the cell has no
// measured output.
struct CellTensor {
  int64_t kernel_id = 0, tensor_id = 0;
  std::string tensor;
  std::optional<double> absmax;  // as stored (not unscaled)
};
std::optional<CellTensor> largest_tensor_of_cell(const Trace& trace, RangeView view, std::string_view row,
                                                 int64_t step);

}  // namespace fpscope::analysis
