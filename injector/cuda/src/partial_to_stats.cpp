// StatsParams from fpscope_stats' tables, and GpuPartial -> Accumulator -> finalize().
#include "partial_to_stats.h"

#include <cstring>
#include <vector>

#include "accumulator.h"
#include "formats.h"

namespace fpscope::gpu {
namespace {

static_assert(kMaxThresholds == stats::kMaxThresholds);
static_assert(kHistBins == fpscope::kHistBins && kHistMinExponent == fpscope::kHistMinExponent);

const stats::SourceLayout& layout_of(ElementType type) {
  return type == ElementType::F16 ? stats::kLayoutF16
         : type == ElementType::BF16 ? stats::kLayoutBF16 : stats::kLayoutF32;
}

const stats::ThresholdTable& thresholds_of(ElementType type) {
  return type == ElementType::F16 ? stats::kThresholdsF16
         : type == ElementType::BF16 ? stats::kThresholdsBF16 : stats::kThresholdsF32;
}

}  // namespace

StatsParams stats_params(ElementType type, StatsLevel level) {
  const stats::SourceLayout& layout = layout_of(type);
  const stats::ThresholdTable& table = thresholds_of(type);
  StatsParams s{};
  s.bytes = type == ElementType::F32 ? 4 : 2;
  // The device scans fp32, fp16 and bf16 only: their layouts and thresholds fit 32 bits.
  s.abs_mask = static_cast<uint32_t>(layout.abs_mask);
  s.inf_abs = static_cast<uint32_t>(layout.inf_abs);
  s.min_normal_abs = static_cast<uint32_t>(layout.min_normal_abs);
  s.mantissa_bits = layout.format.mantissa_bits;
  s.bias = layout.format.bias;
  s.is_f16 = type == ElementType::F16;
  s.full = level == StatsLevel::Full;
  s.threshold_count = table.count;
  for (int t = 0; t < kMaxThresholds; ++t) s.thresholds[t] = t < table.count ? static_cast<uint32_t>(table.value[t]) : UINT32_MAX;
  return s;
}

void partial_to_stats(const GpuPartial& p, const uint64_t* hist, uint64_t count, ElementType type,
                      StatsLevel level, TensorStats* out) {
  stats::Accumulator acc;
  acc.count = count;
  acc.nan = p.nan;
  acc.pos_inf = p.pos_inf;
  acc.neg_inf = p.neg_inf;
  acc.zero = p.zero;
  acc.subnormal = p.subnormal;
  acc.min_key = p.min_key;
  acc.max_key = p.max_key;
  acc.min_nonzero_abs = p.min_nonzero_abs;
  acc.sum.hi = p.sum_hi;
  acc.sum.lo = p.sum_lo;
  acc.sum_squares.hi = p.squares_hi;
  acc.sum_squares.lo = p.squares_lo;
  if (p.first_nonfinite != kNoIndex) {
    acc.first_nonfinite = static_cast<int64_t>(p.first_nonfinite);
    acc.first_nonfinite_bits = p.first_nonfinite_bits;
  }
  if (level == StatsLevel::Full) {
    for (int t = 0; t < kMaxThresholds; ++t) acc.at_least[t] = p.at_least[t];
    for (int b = 0; b < kHistBins; ++b) acc.hist[b] = hist[b];
  }
  stats::finalize(acc, type, level, out);
}

void host_reduction(const void* data, ElementType type, size_t n, StatsLevel level,
                    TensorStats* out) {
  StatsParams s = stats_params(type, level);
  GpuPartial total;
  partial_init(total);
  std::vector<uint64_t> hist(kHistBins, 0);
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    std::memcpy(&b, bytes + i * s.bytes, static_cast<size_t>(s.bytes));  // little-endian
    int bin = add_element(total, s, b, i);
    if (bin >= 0) ++hist[bin];
    if (total.first_nonfinite == i) total.first_nonfinite_bits = b;
  }
  partial_to_stats(total, hist.data(), n, type, level, out);
}

}  // namespace fpscope::gpu
