// The number formats fpscope reasons about, and the facts every part derives from them: the
// element types a tensor may hold, the narrower formats whose cast outcome is counted (in the one
// order used by wire records, trace tables and the analyzer's API), each format's bit layout and
// limits, and the range of the exponent histogram.
//
// Part of the trace contract (see contract.h): the injector's statistics kernels, the collector's
// tables, the analyzer's reports and the GUI all read these constants instead of restating them.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace fpscope::contract {

// 2^e as a double, exact over the range used here; constexpr unlike std::ldexp.
constexpr double pow2(int e) {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}

// A binary floating-point format. `max_finite_mantissa` is the mantissa field of the largest
// finite value at the top exponent field `max_finite_field` (E4M3FN keeps field 15, mantissa 111
// for NaN, so its largest value is field 15, mantissa 110 = 448).
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  int max_finite_field;
  uint64_t max_finite_mantissa;

  constexpr double min_subnormal() const { return pow2(1 - bias - mantissa_bits); }
  constexpr double min_normal() const { return pow2(1 - bias); }
  constexpr double max_finite() const {
    return (1.0 + double(max_finite_mantissa) * pow2(-mantissa_bits)) * pow2(max_finite_field - bias);
  }
  // Distance between max_finite and the next value the format would have with unbounded exponent.
  constexpr double top_ulp() const { return pow2(max_finite_field - bias - mantissa_bits); }
  // Exponents e of 2^e <= |x| < 2^(e+1) that finite nonzero values of this format reach.
  constexpr int min_exponent() const { return 1 - bias - mantissa_bits; }
  constexpr int max_exponent() const { return max_finite_field - bias; }
};

inline constexpr FloatFormat kF32{8, 23, 127, 254, 0x7FFFFF};
inline constexpr FloatFormat kF16{5, 10, 15, 30, 0x3FF};
inline constexpr FloatFormat kF64{11, 52, 1023, 2046, 0xFFFFFFFFFFFFF};
inline constexpr FloatFormat kBF16{8, 7, 127, 254, 0x7F};
inline constexpr FloatFormat kE4M3{4, 3, 7, 15, 0x6};  // OCP 8-bit "E4M3FN": no infinities
inline constexpr FloatFormat kE5M2{5, 2, 15, 30, 0x3};

static_assert(kF16.max_finite() == 65504.0 && kF16.min_normal() == pow2(-14) && kF16.min_subnormal() == pow2(-24));
static_assert(kBF16.max_finite() == 255.0 * pow2(120) && kBF16.min_subnormal() == pow2(-133));
static_assert(kE4M3.max_finite() == 448.0 && kE5M2.max_finite() == 57344.0);
static_assert(kF64.min_exponent() == -1074 && kF64.max_exponent() == 1023);

// Element types of a traced tensor. The values are the kernel ABI's mpt_dtype and are stored in
// traces (tensors.dtype); the injector asserts that they agree.
enum class Dtype : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, U8 = 5, F64 = 6 };
inline constexpr int kDtypeCount = 7;
inline constexpr std::array<const char*, kDtypeCount> kDtypeNames = {"f32", "f16", "bf16", "i32",
                                                                    "i64", "u8",  "f64"};
// Whether fpscope measures values of this type (the floating types a tensor statistic covers).
constexpr bool is_measured(Dtype d) {
  return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16 || d == Dtype::F64;
}

// The narrower formats whose cast outcome is counted for every measured tensor, in this order in
// wire records, in the trace's format columns and in the analyzer's arrays.
enum class CastFormat : uint8_t { F16 = 0, BF16 = 1, E4M3 = 2, E5M2 = 3 };
inline constexpr int kCastFormatCount = 4;

struct CastFormatInfo {
  CastFormat id;
  const char* name;        // as users write it: "fp16", "fp8-e4m3"
  const char* short_name;  // as trace columns and dtype names spell it: "f16", "e4m3"
  FloatFormat bits;
};
inline constexpr std::array<CastFormatInfo, kCastFormatCount> kCastFormats = {{
    {CastFormat::F16, "fp16", "f16", kF16},
    {CastFormat::BF16, "bf16", "bf16", kBF16},
    {CastFormat::E4M3, "fp8-e4m3", "e4m3", kE4M3},
    {CastFormat::E5M2, "fp8-e5m2", "e5m2", kE5M2},
}};
constexpr const CastFormatInfo& cast_format(CastFormat f) { return kCastFormats[static_cast<int>(f)]; }
static_assert([] {
  for (int i = 0; i < kCastFormatCount; ++i)
    if (static_cast<int>(kCastFormats[i].id) != i) return false;
  return true;
}(), "kCastFormats must list the formats in CastFormat order");

// Exponent histogram of finite nonzero values: bin e counts 2^e <= |x| < 2^(e+1), over fp32's
// whole range, subnormals included (fp32, fp16 and bf16 values convert to fp32 exactly). An fp64
// value beyond that range is counted apart, as below or above it (TensorStats::hist_below/above).
inline constexpr int kHistMinExponent = kF32.min_exponent();
inline constexpr int kHistMaxExponent = kF32.max_exponent();
inline constexpr int kHistBins = kHistMaxExponent - kHistMinExponent + 1;
static_assert(kHistMinExponent == -149 && kHistMaxExponent == 127 && kHistBins == 277);
static_assert(kBF16.min_exponent() >= kHistMinExponent && kF16.min_exponent() >= kHistMinExponent);

}  // namespace fpscope::contract
