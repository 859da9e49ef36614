// The per-element rules of fpscope's tensor statistics, written once for the device kernels and
// the host, and the partial result that blocks of the GPU reduction combine.
//
// Each rule mirrors fpscope::stats::add_element() (injector/stats/accumulator.h): the same abs-bit
// classification, total-order keys for min/max, compensated double sums, threshold counts and
// exponent bins. The host turns the final GpuPartial into an fpscope::stats::Accumulator and lets
// fpscope_stats' own finalize() derive TensorStats, so every derived number is the CPU's. Compiled
// without nvcc, the same functions let tests run the device logic on the host.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FPSCOPE_HD __host__ __device__ __forceinline__
#define FPSCOPE_UNROLL _Pragma("unroll")
#else
#define FPSCOPE_HD inline
#define FPSCOPE_UNROLL
#endif

namespace fpscope::gpu {

inline constexpr int kMaxThresholds = 16;        // as fpscope::stats::kMaxThresholds
inline constexpr int kHistMinExponent = -149;    // as fpscope::kHistMinExponent
inline constexpr int kHistBins = 277;            // as fpscope::kHistBins
inline constexpr uint64_t kNoIndex = ~uint64_t{0};

/* What the kernels need to know about the source format, taken from fpscope_stats' tables. */
struct StatsParams {
  int bytes;               // 4 (f32) or 2 (f16, bf16)
  uint32_t abs_mask, inf_abs, min_normal_abs;
  int mantissa_bits, bias;
  int is_f16;              // f16's magnitudes are not a prefix of fp32's
  int full;                // histogram and thresholds too
  int threshold_count;
  uint32_t thresholds[kMaxThresholds];  // unused entries are UINT32_MAX: no magnitude reaches them
};

/* The reduction state of a block (and, combined, of the whole tensor). */
struct GpuPartial {
  uint64_t nan, pos_inf, neg_inf, zero, subnormal;
  int32_t min_key, max_key;
  uint32_t min_nonzero_abs;
  uint32_t first_nonfinite_bits;  // filled by the final combine
  double sum_hi, sum_lo, squares_hi, squares_lo;
  uint64_t first_nonfinite;       // smallest index of a NaN/Inf, kNoIndex if none
  uint64_t at_least[kMaxThresholds];
};

/* What one thread of the scan keeps: a GpuPartial with 32-bit counts, which hold fewer registers
 * (a thread sees fewer than 2^32 elements; queue_reduction() checks it). */
struct ThreadTally {
  uint32_t nan, pos_inf, neg_inf, zero, subnormal;
  int32_t min_key, max_key;
  uint32_t min_nonzero_abs;
  uint32_t first_nonfinite_bits;
  double sum_hi, sum_lo, squares_hi, squares_lo;
  uint64_t first_nonfinite;
  uint32_t at_least[kMaxThresholds];
};

template <typename Partial>
FPSCOPE_HD void partial_init(Partial& p) {
  p.nan = p.pos_inf = p.neg_inf = p.zero = p.subnormal = 0;
  p.min_key = INT32_MAX;
  p.max_key = INT32_MIN;
  p.min_nonzero_abs = UINT32_MAX;
  p.first_nonfinite_bits = 0;
  p.sum_hi = p.sum_lo = p.squares_hi = p.squares_lo = 0.0;
  p.first_nonfinite = kNoIndex;
  for (int t = 0; t < kMaxThresholds; ++t) p.at_least[t] = 0;
}

/* Knuth's TwoSum: hi + lo keeps the sum with the rounding error of each addition. */
FPSCOPE_HD void compensated_add(double& hi, double& lo, double x) {
  double s = hi + x;
  double bp = s - hi;
  double err = (hi - (s - bp)) + (x - bp);
  hi = s;
  lo += err;
}

/* Total-order key of a float's bits (fpscope::stats::order_key): -0 < +0, NaN excluded. */
FPSCOPE_HD int32_t order_key(uint32_t b, int bytes) {
  if (bytes == 4) {
    int32_t s = static_cast<int32_t>(b);
    return s ^ static_cast<int32_t>(static_cast<uint32_t>(s >> 31) >> 1);
  }
  int16_t s = static_cast<int16_t>(static_cast<uint16_t>(b));
  return static_cast<int32_t>(static_cast<int16_t>(
      s ^ static_cast<int16_t>(static_cast<uint16_t>(s >> 15) >> 1)));
}

FPSCOPE_HD int leading_zeros(uint32_t a) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(a));
#else
  return __builtin_clz(a);
#endif
}

/* Histogram bin of finite nonzero magnitude bits a: floor(log2|x|) + 149. */
FPSCOPE_HD int hist_index(const StatsParams& s, uint32_t a) {
  int field = static_cast<int>(a >> s.mantissa_bits);
  if (field != 0) return field - s.bias - kHistMinExponent;
  int top_bit = 31 - leading_zeros(a);
  return top_bit + (1 - s.bias - s.mantissa_bits) - kHistMinExponent;
}

FPSCOPE_HD double bits_as_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return static_cast<double>(__uint_as_float(b));
#else
  return static_cast<double>(__builtin_bit_cast(float, b));
#endif
}

/* Exact value of finite element bits. */
FPSCOPE_HD double element_value(const StatsParams& s, uint32_t b) {
  if (s.bytes == 4) return bits_as_float(b);
  if (!s.is_f16) return bits_as_float(b << 16);  // bf16 is the top half of an fp32
  uint32_t a = b & 0x7fffu, field = a >> 10, mant = a & 0x3ffu;
  double magnitude = field == 0 ? static_cast<double>(mant) * 5.9604644775390625e-08  // 2^-24
                                : static_cast<double>(0x400u | mant) * bits_as_float((field + 102u) << 23);
  return (b & 0x8000u) ? -magnitude : magnitude;
}

/* Adds element `index` with bits b to a GpuPartial or a ThreadTally. Returns the histogram bin to
 * count, or -1 for none. */
template <typename Partial>
FPSCOPE_HD int add_element(Partial& p, const StatsParams& s, uint32_t b, uint64_t index) {
  uint32_t a = b & s.abs_mask;
  if (a >= s.inf_abs) {
    if (a > s.inf_abs) ++p.nan;
    else if (a == b) ++p.pos_inf;
    else ++p.neg_inf;
    if (index < p.first_nonfinite) p.first_nonfinite = index;
    return -1;
  }
  int32_t key = order_key(b, s.bytes);
  if (key < p.min_key) p.min_key = key;
  if (key > p.max_key) p.max_key = key;
  double v = element_value(s, b);
  compensated_add(p.sum_hi, p.sum_lo, v);
  compensated_add(p.squares_hi, p.squares_lo, v * v);  // exact: a float's square fits a double
  if (a == 0) {
    ++p.zero;
    return -1;
  }
  if (a < p.min_nonzero_abs) p.min_nonzero_abs = a;
  if (a < s.min_normal_abs) ++p.subnormal;
  if (!s.full) return -1;
  // Every entry, so that the counts stay in registers; the unused ones never count.
  FPSCOPE_UNROLL
  for (int t = 0; t < kMaxThresholds; ++t) p.at_least[t] += a >= s.thresholds[t] ? 1u : 0u;
  return hist_index(s, a);
}

FPSCOPE_HD GpuPartial widen(const ThreadTally& t) {
  GpuPartial p;
  p.nan = t.nan;
  p.pos_inf = t.pos_inf;
  p.neg_inf = t.neg_inf;
  p.zero = t.zero;
  p.subnormal = t.subnormal;
  p.min_key = t.min_key;
  p.max_key = t.max_key;
  p.min_nonzero_abs = t.min_nonzero_abs;
  p.first_nonfinite_bits = t.first_nonfinite_bits;
  p.sum_hi = t.sum_hi;
  p.sum_lo = t.sum_lo;
  p.squares_hi = t.squares_hi;
  p.squares_lo = t.squares_lo;
  p.first_nonfinite = t.first_nonfinite;
  for (int i = 0; i < kMaxThresholds; ++i) p.at_least[i] = t.at_least[i];
  return p;
}

/* Folds `from` into `into`. Integer parts are exact in any order; the sums are combined with the
 * same compensated addition, in the order the caller merges. */
FPSCOPE_HD void merge(GpuPartial& into, const GpuPartial& from) {
  into.nan += from.nan;
  into.pos_inf += from.pos_inf;
  into.neg_inf += from.neg_inf;
  into.zero += from.zero;
  into.subnormal += from.subnormal;
  if (from.min_key < into.min_key) into.min_key = from.min_key;
  if (from.max_key > into.max_key) into.max_key = from.max_key;
  if (from.min_nonzero_abs < into.min_nonzero_abs) into.min_nonzero_abs = from.min_nonzero_abs;
  compensated_add(into.sum_hi, into.sum_lo, from.sum_hi);
  into.sum_lo += from.sum_lo;
  compensated_add(into.squares_hi, into.squares_lo, from.squares_hi);
  into.squares_lo += from.squares_lo;
  if (from.first_nonfinite < into.first_nonfinite) into.first_nonfinite = from.first_nonfinite;
  for (int t = 0; t < kMaxThresholds; ++t) into.at_least[t] += from.at_least[t];
}

}  // namespace fpscope::gpu
