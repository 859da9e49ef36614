// Bit layouts of the element and cast formats, and the cast thresholds derived from them.
//
// Everything here is constexpr: the boundaries at which a round-to-nearest-even cast overflows,
// flushes to zero or lands subnormal are computed from each format's parameters (exponent width,
// mantissa width, bias, largest finite value), then translated into the abs-bit patterns of each
// source format, so that every count becomes one unsigned compare `abs_bits >= threshold`.
// docs/statistics.md explains the derivation; the tests check the results against an independent
// rounding reference.
#pragma once

#include <array>
#include <cstdint>

#include "fpscope/contract/number_formats.h"
#include "fpscope/tensor_stats.h"

namespace fpscope::stats {

// The formats' parameters and limits are the trace contract's (fpscope/contract/number_formats.h);
// this file derives the cast thresholds from them.
using contract::FloatFormat;
using contract::kBF16;
using contract::kE4M3;
using contract::kE5M2;
using contract::kF16;
using contract::kF32;
using contract::kF64;
using contract::pow2;

constexpr const FloatFormat& cast_format(int f) { return contract::kCastFormats[f].bits; }  // CastFormat order

// A magnitude bound: |x| >= value (inclusive) or |x| > value (exclusive).
struct Bound {
  double value;
  bool inclusive;
};

// The four bounds that split finite |x| into the cast outcomes of format `f` (see statistics.md):
//   overflow   iff |x| reaches `overflow`   (max_finite + top_ulp/2, the tie included iff
//                                            max_finite's mantissa is odd: ties go to even)
//   near_max   iff |x| reaches `near_max` and not `overflow`
//   nonzero    iff |x| reaches `nonzero`    (above min_subnormal/2; the tie rounds to even zero)
//   normal     iff |x| reaches `normal`     (the tie between the largest subnormal, odd, and the
//                                            smallest normal, even, goes to the normal)
struct CastBounds {
  Bound overflow, near_max, nonzero, normal;
};

constexpr CastBounds cast_bounds(const FloatFormat& f) {
  const bool max_is_odd = (f.max_finite_mantissa & 1u) != 0;
  return CastBounds{
      Bound{f.max_finite() + f.top_ulp() / 2, max_is_odd},
      Bound{f.max_finite() / 2, true},
      Bound{f.min_subnormal() / 2, false},
      Bound{f.min_normal() - f.min_subnormal() / 2, true},
  };
}

// How a source format's magnitude bits are laid out (in 64 bits, for fp64 sources; the 32- and
// 16-bit formats' kernels narrow these constants to their own width).
struct SourceLayout {
  FloatFormat format;
  uint64_t abs_mask;  // all bits but the sign
  uint64_t inf_abs;   // abs bits of infinity; every abs at or above it is Inf or NaN
  uint64_t min_normal_abs;

  // The exact value of finite magnitude bits `a`.
  constexpr double magnitude(uint64_t a) const {
    const uint64_t field = a >> format.mantissa_bits;
    const uint64_t mant = a & ((uint64_t{1} << format.mantissa_bits) - 1);
    if (field == 0) return double(mant) * format.min_subnormal();
    return double((uint64_t{1} << format.mantissa_bits) + mant) *
           pow2(int(field) - format.bias - format.mantissa_bits);
  }
  // The smallest finite magnitude bits that satisfy `b`, or inf_abs when none does.
  constexpr uint64_t first_reaching(Bound b) const {
    uint64_t lo = 0, hi = inf_abs;  // answer in [lo, hi]
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      const double v = magnitude(mid);
      const bool reaches = b.inclusive ? v >= b.value : v > b.value;
      if (reaches)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }
};

constexpr SourceLayout make_layout(const FloatFormat& f) {
  const int width = 1 + f.exponent_bits + f.mantissa_bits;
  const uint64_t abs_mask = (uint64_t{1} << (width - 1)) - 1;
  const uint64_t inf_abs = ((uint64_t{1} << f.exponent_bits) - 1) << f.mantissa_bits;
  return SourceLayout{f, abs_mask, inf_abs, uint64_t{1} << f.mantissa_bits};
}

inline constexpr SourceLayout kLayoutF32 = make_layout(kF32);
inline constexpr SourceLayout kLayoutF16 = make_layout(kF16);
inline constexpr SourceLayout kLayoutBF16 = make_layout(kBF16);
inline constexpr SourceLayout kLayoutF64 = make_layout(kF64);

// Cast thresholds of one source format, deduplicated. For each cast format, each bound either is
// an index into `value` (count of finite |x| bits >= value[i]), or one of two trivial cases that
// need no compare: kNoneReach (no finite source value reaches it) and kAllNonzeroReach (every
// finite nonzero source value does).
inline constexpr int kMaxThresholds = 16;
inline constexpr int8_t kNoneReach = -1;
inline constexpr int8_t kAllNonzeroReach = -2;

struct CastRefs {
  int8_t overflow, near_max, nonzero, normal;
};

// floor(log2(v)) of a positive v, exact (constexpr, unlike std::ilogb).
constexpr int floor_log2(double v) {
  int e = 0;
  while (v >= 2.0) {
    v /= 2;
    ++e;
  }
  while (v < 1.0) {
    v *= 2;
    --e;
  }
  return e;
}

// The exponent field the fp32 representation of `v` (> 0) has; 0 below fp32's normal range.
constexpr int fp32_field_of(double v) { return v < pow2(-126) ? 0 : floor_log2(v) + 127; }

struct ThresholdTable {
  int count = 0;
  std::array<uint64_t, kMaxThresholds> value{};
  std::array<CastRefs, kCastFormatCount> refs{};
  // For the vector kernels, which know each block's histogram of fp32 exponent fields: the field
  // of each threshold's value, and whether the threshold is the smallest value of that binade
  // (then |x| >= threshold iff field >= that field, and no compare is needed), or the next value
  // above it (then |x| >= threshold iff field >= that field and |x| is not exactly the binade's
  // power of two: a block with no power of two among its values needs no compare either).
  std::array<int, kMaxThresholds> field{};
  std::array<bool, kMaxThresholds> starts_binade{};
  std::array<bool, kMaxThresholds> follows_binade_start{};

  constexpr int8_t add(const SourceLayout& s, Bound b) {
    const uint64_t t = s.first_reaching(b);
    if (t >= s.inf_abs) return kNoneReach;
    if (t <= 1) return kAllNonzeroReach;
    for (int i = 0; i < count; ++i)
      if (value[i] == t) return int8_t(i);
    value[count] = t;
    return int8_t(count++);
  }
};

constexpr ThresholdTable make_thresholds(const SourceLayout& s) {
  ThresholdTable t;
  for (int f = 0; f < kCastFormatCount; ++f) {
    const CastBounds b = cast_bounds(cast_format(f));
    t.refs[f].overflow = t.add(s, b.overflow);
    t.refs[f].near_max = t.add(s, b.near_max);
    t.refs[f].nonzero = t.add(s, b.nonzero);
    t.refs[f].normal = t.add(s, b.normal);
  }
  for (int i = 0; i < t.count; ++i) {
    const double v = s.magnitude(t.value[i]);
    t.field[i] = fp32_field_of(v);
    t.starts_binade[i] = t.field[i] > 0 && v == pow2(t.field[i] - 127);
    t.follows_binade_start[i] =
        t.field[i] > 0 && !t.starts_binade[i] &&
        s.magnitude(t.value[i] - 1) == pow2(t.field[i] - 127);
  }
  return t;
}

inline constexpr ThresholdTable kThresholdsF32 = make_thresholds(kLayoutF32);
inline constexpr ThresholdTable kThresholdsF16 = make_thresholds(kLayoutF16);
inline constexpr ThresholdTable kThresholdsBF16 = make_thresholds(kLayoutBF16);
inline constexpr ThresholdTable kThresholdsF64 = make_thresholds(kLayoutF64);

// The boundaries spelled out in docs/statistics.md, checked at compile time.
static_assert(kThresholdsF32.value[kThresholdsF32.refs[0].overflow] == 0x477FF000u);  // 65520
static_assert(kThresholdsF32.value[kThresholdsF32.refs[0].nonzero] == 0x33000001u);   // > 2^-25
static_assert(kThresholdsF32.value[kThresholdsF32.refs[2].overflow] == 0x43E80001u);  // > 464
static_assert(kThresholdsF32.value[kThresholdsF32.refs[3].overflow] == 0x47700000u);  // 61440
static_assert(kThresholdsF32.value[kThresholdsF32.refs[1].overflow] == 0x7F7F8000u);
static_assert(kThresholdsF16.refs[1].overflow == kNoneReach);
static_assert(kThresholdsF64.value[kThresholdsF64.refs[0].overflow] == 0x40EFFE0000000000u);  // 65520
static_assert(kThresholdsF64.value[kThresholdsF64.refs[0].nonzero] == 0x3E60000000000001u);   // > 2^-25
// A 32-bit kernel compares its own abs bits with these: they must fit.
static_assert(kLayoutF32.inf_abs <= UINT32_MAX && kThresholdsF32.value[kThresholdsF32.refs[1].overflow] <= UINT32_MAX);
static_assert(kThresholdsF16.refs[1].nonzero == kAllNonzeroReach);
// The fp16, e4m3 and e5m2 underflow bounds of fp32 values lie one step above a power of two.
static_assert(kThresholdsF32.follows_binade_start[kThresholdsF32.refs[0].nonzero]);
static_assert(kThresholdsF32.follows_binade_start[kThresholdsF32.refs[2].nonzero]);
static_assert(kThresholdsF32.follows_binade_start[kThresholdsF32.refs[3].nonzero]);
static_assert(!kThresholdsF32.follows_binade_start[kThresholdsF32.refs[0].normal]);

}  // namespace fpscope::stats
