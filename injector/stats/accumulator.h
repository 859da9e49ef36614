// The running state of one compute_stats() call, shared by the scalar and the vector kernels.
//
// Kernels add elements (or whole vectors' worth of partial results) to an Accumulator; finalize()
// turns it into TensorStats. Extremes are kept as exact integer keys of the source format (no
// rounding, deterministic sign of zero), sums as double-double pairs, cast outcomes as cumulative
// counts of |x| bits >= each threshold of formats.h.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "formats.h"
#include "fpscope/tensor_stats.h"

namespace fpscope::stats {

// A sum kept as hi + lo, hi + lo exact up to the rounding of lo (Knuth's TwoSum per addition).
struct CompensatedSum {
  double hi = 0.0, lo = 0.0;
  void add(double x) {
    const double s = hi + x;
    const double bp = s - hi;
    const double err = (hi - (s - bp)) + (x - bp);
    hi = s;
    lo += err;
  }
  // hi alone once it left double's range (fp64 sources only; lo is then meaningless).
  double value() const { return std::isfinite(hi) ? hi + lo : hi; }
};

// Total-order key of a float's bits: an integer that orders like the value, with -0 < +0.
// The transform flips the magnitude bits of negative values; it is its own inverse.
template <typename Bits>
inline auto order_key(Bits b) {
  if constexpr (sizeof(Bits) == 8) {
    const int64_t s = int64_t(b);
    return s ^ int64_t(uint64_t(s >> 63) >> 1);
  } else if constexpr (sizeof(Bits) == 4) {
    const int32_t s = int32_t(b);
    return s ^ int32_t(uint32_t(s >> 31) >> 1);
  } else {
    const int16_t s = int16_t(b);
    return int32_t(int16_t(s ^ int16_t(uint16_t(s >> 15) >> 1)));
  }
}

// Index into TensorStats::hist of finite nonzero magnitude bits `a`: floor(log2|x|) - (-149).
// Outside [0, kHistBins) for an fp64 value beyond the histogram's range.
template <typename Abs>
inline int hist_index(const SourceLayout& s, Abs a) {
  const int mant_bits = s.format.mantissa_bits;
  const int field = int(a >> mant_bits);
  if (field != 0) return field - s.format.bias - kHistMinExponent;
  int top_bit;  // a != 0
  if constexpr (sizeof(Abs) == 8)
    top_bit = 63 - __builtin_clzll(a);
  else
    top_bit = 31 - __builtin_clz(a);
  return top_bit + (1 - s.format.bias - mant_bits) - kHistMinExponent;
}

struct Accumulator {
  uint64_t count = 0;
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;
  // Keys and abs bits in 64 bits for fp64 sources; the narrower kernels' fit.
  int64_t min_key = INT64_MAX, max_key = INT64_MIN;  // finite values only
  uint64_t min_nonzero_abs = UINT64_MAX;             // finite nonzero values only
  CompensatedSum sum, sum_squares;                   // finite values only
  int64_t first_nonfinite = -1;
  uint64_t first_nonfinite_bits = 0;
  std::array<uint64_t, kMaxThresholds> at_least{};  // Full: finite |x| bits >= threshold
  std::array<uint64_t, kHistBins> hist{};           // Full only
  uint64_t hist_below = 0, hist_above = 0;          // Full, fp64 only: beyond hist's range

  // Adds the state of the elements that follow this accumulator's, `offset` elements from the
  // start of the array: counts add, extremes fold, the first non-finite value stays the earliest,
  // and the part's (hi, lo) sums are added with TwoSum (two more additions per part).
  void merge(const Accumulator& part, uint64_t offset) {
    count += part.count;
    nan += part.nan;
    pos_inf += part.pos_inf;
    neg_inf += part.neg_inf;
    zero += part.zero;
    subnormal += part.subnormal;
    merge_extremes(part.min_key, part.max_key, part.min_nonzero_abs);
    sum.add(part.sum.hi);
    sum.add(part.sum.lo);
    sum_squares.add(part.sum_squares.hi);
    sum_squares.add(part.sum_squares.lo);
    if (first_nonfinite < 0 && part.first_nonfinite >= 0) {
      first_nonfinite = int64_t(offset) + part.first_nonfinite;
      first_nonfinite_bits = part.first_nonfinite_bits;
    }
    for (std::size_t i = 0; i < at_least.size(); ++i) at_least[i] += part.at_least[i];
    // The part's populated bins only: a chunk's values span a few dozen of them.
    const HistSpan span = populated_bins(part.hist);
    for (int i = span.first; i < span.end; ++i) hist[std::size_t(i)] += part.hist[std::size_t(i)];
    hist_below += part.hist_below;
    hist_above += part.hist_above;
  }

  // Folds the extremes of a batch (already reduced by a kernel) into this accumulator.
  void merge_extremes(int64_t batch_min_key, int64_t batch_max_key, uint64_t batch_min_nz) {
    if (batch_min_key < min_key) min_key = batch_min_key;
    if (batch_max_key > max_key) max_key = batch_max_key;
    if (batch_min_nz < min_nonzero_abs) min_nonzero_abs = batch_min_nz;
  }
};

// What add_element() counts beyond the Basic statistics (a bit set of Full-level parts).
inline constexpr unsigned kHistogramPart = 1;
inline constexpr unsigned kThresholdPart = 2;
inline constexpr unsigned kFullParts = kHistogramPart | kThresholdPart;

// Adds element `i` with bits `b` of a tensor in layout `S`. Used by the scalar kernel for every
// element and by the vector kernels for tails and for groups holding, at the Full level, an fp32 or
// bf16 subnormal (all parts: the vector kernels' histogram and threshold compares leave those
// groups out).
template <const SourceLayout& S, const ThresholdTable& T, typename Bits>
inline void add_element(Accumulator& acc, Bits b, int64_t index, double value, unsigned parts) {
  using Abs = std::conditional_t<sizeof(Bits) == 8, uint64_t, uint32_t>;
  const Abs a = Abs(b) & Abs(S.abs_mask);
  if (a >= S.inf_abs) {
    if (a > S.inf_abs)
      ++acc.nan;
    else if (a == Abs(b))
      ++acc.pos_inf;
    else
      ++acc.neg_inf;
    if (acc.first_nonfinite < 0) {
      acc.first_nonfinite = index;
      acc.first_nonfinite_bits = uint64_t(b);
    }
    return;
  }
  const auto key = order_key(b);
  if (key < acc.min_key) acc.min_key = key;
  if (key > acc.max_key) acc.max_key = key;
  acc.sum.add(value);
  if constexpr (sizeof(Bits) == 8) {
    // The square of a double is rounded: its error (exact, by FMA) joins the low part. A square
    // beyond double's range makes the sum +Inf (docs/statistics.md).
    const double square = value * value;
    acc.sum_squares.add(square);
    if (std::isfinite(square)) acc.sum_squares.lo += std::fma(value, value, -square);
  } else {
    acc.sum_squares.add(value * value);  // exact: a square of a float fits a double
  }
  if (a == 0) {
    ++acc.zero;
    return;
  }
  if (a < acc.min_nonzero_abs) acc.min_nonzero_abs = a;
  if (a < S.min_normal_abs) ++acc.subnormal;
  if (parts & kHistogramPart) {
    const int bin = hist_index(S, a);
    if constexpr (sizeof(Bits) == 8) {
      if (bin < 0)
        ++acc.hist_below;
      else if (bin >= kHistBins)
        ++acc.hist_above;
      else
        ++acc.hist[std::size_t(bin)];
    } else {
      ++acc.hist[bin];
    }
  }
  if (parts & kThresholdPart)
    for (int t = 0; t < T.count; ++t) acc.at_least[t] += a >= T.value[t];
}

// Exact value of a source element's bits.
inline double bits_to_double(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
// Without a branch and without arithmetic on subnormal operands (which costs a microcode assist):
// a normal binary16, Inf or NaN as fp64 bits, its exponent rebiased (by 1008, twice for the all-ones
// exponent), a subnormal or zero as its integer mantissa times 2^-24, exact; then the sign bit.
inline double f16_bits_to_double(uint16_t b) {
  const uint64_t a = b & 0x7FFFu;
  const uint64_t rebias = uint64_t{1008} << 52;
  const uint64_t normal = (a << 42) + (a >= 0x7C00u ? 2 * rebias : rebias);
  uint64_t small;
  const double scaled = double(int(a)) * 0x1p-24;
  std::memcpy(&small, &scaled, 8);
  const uint64_t bits = (a < 0x0400u ? small : normal) | (uint64_t(b & 0x8000u) << 48);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
inline double bf16_bits_to_double(uint16_t b) { return bits_to_double(uint32_t(b) << 16); }
inline double f64_bits_to_double(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

// Fills `out` from a finished accumulator of a tensor in layout `S` with thresholds `T`.
void finalize(const Accumulator& acc, ElementType type, StatsLevel level, TensorStats* out);

}  // namespace fpscope::stats
