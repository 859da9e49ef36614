// The number formats fpscope reasons about, and the facts every part derives from them: the
// element types a tensor may hold, the narrower formats whose cast outcome is counted (in the one
// order used by wire records, trace tables and the analyzer's API), each format's bit layout and
// limits, and the range of the exponent histogram.
//
// Part of the trace contract (see contract.h): the injector's statistics kernels, the collector's
// tables, the analyzer's reports and the GUI all read these constants instead of restating them.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string_view>

namespace fpscope::contract {

// 2^e as a double, exact (0 below double's subnormals, +Inf above its range); constexpr unlike
// std::ldexp. A normal power of two is its exponent field alone; the rest come from halving or
// doubling 1.0 step by step.
constexpr double pow2(int e) {
  if (e >= -1022 && e <= 1023) return std::bit_cast<double>(uint64_t(e + 1023) << 52);
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
  // log2 of the unit roundoff u = 2^-(mantissa_bits + 1), the format's relative spacing: half the
  // spacing of the values at the bottom of a binade is u times them, so a change smaller than u
  // times a value there rounds away (2^-8 bf16, 2^-11 fp16, 2^-24 fp32).
  constexpr int unit_roundoff_log2() const { return -(mantissa_bits + 1); }
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
static_assert(kBF16.unit_roundoff_log2() == -8 && kF16.unit_roundoff_log2() == -11 && kF32.unit_roundoff_log2() == -24);

// Element types of a traced tensor. The values are the kernel ABI's mpt_dtype and are stored in
// traces (tensors.dtype); the injector asserts that they agree. The 8-bit floating types are
// PyTorch's float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz and float8_e8m0fnu, and
// e2m1 is OCP FP4 stored one value per byte (kByteFormats below says how each decodes); e4m3 and
// e5m2 are named as the cast formats are.
enum class Dtype : uint8_t {
  F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, U8 = 5, F64 = 6,
  E4M3 = 7, E5M2 = 8, E4M3FNUZ = 9, E5M2FNUZ = 10, E8M0 = 11, E2M1 = 12
};
inline constexpr int kDtypeCount = 13;
inline constexpr std::array<const char*, kDtypeCount> kDtypeNames = {
    "f32", "f16", "bf16", "i32", "i64", "u8", "f64", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0", "e2m1"};
// The floating types of one byte a value: the 8-bit formats and e2m1.
constexpr bool is_byte_float(Dtype d) { return d >= Dtype::E4M3 && d <= Dtype::E2M1; }
// Whether fpscope measures values of this type (the floating types a tensor statistic covers).
constexpr bool is_measured(Dtype d) {
  return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16 || d == Dtype::F64 || is_byte_float(d);
}

// The 8-bit floating formats, whose special values do not follow IEEE 754's pattern:
//   e4m3 (E4M3FN)   sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; NaN is
//                   S.1111.111 (both signs), so the top binade ends at 448; -0 exists.
//   e5m2            IEEE-like: bias 15, exponent 11111 is Inf (mantissa 0) or NaN; -0 exists.
//   e4m3fnuz        bias 8, no infinities, no -0: the pattern 1000.0000 is the one NaN; 240 at most.
//   e5m2fnuz        bias 16, likewise: 1000.0000 the one NaN, no -0; 57344 at most.
//   e8m0 (E8M0FNU)  no sign, no mantissa, no zero: 2^(field - 127) for fields 0 to 254, and
//                   11111111 the one NaN (OCP microscaling's shared scale).
//   e2m1            OCP FP4 in the low four bits of its byte: sign (bit 3), 2 exponent bits (bias
//                   1), 1 mantissa bit; 6 at most, 0.5 the one subnormal; no NaN or Inf. The high
//                   four bits are zero when written; a reader ignores them.
enum class ByteNans : uint8_t {
  TopMantissa,   // every bit but the sign set: NaN (e4m3)
  Ieee,          // exponent all ones: Inf with mantissa 0, else NaN (e5m2)
  NegativeZero,  // the sign alone set: the one NaN; no -0 (the fnuz formats)
  AllOnes,       // all eight bits set: the one NaN (e8m0)
  None,          // no NaN and no Inf (e2m1)
};
struct ByteFormat {
  Dtype dtype;
  FloatFormat bits;  // exponent, mantissa, bias and largest finite value as for the wider formats
  bool has_sign;     // false for e8m0: the top bit is the exponent's
  ByteNans nans;
  uint8_t sign_bit = 0x80;  // e2m1's is 0x08; the bits below it hold the magnitude

  constexpr uint8_t magnitude_bits(uint8_t b) const { return uint8_t(b & (sign_bit - 1)); }
  constexpr bool is_nan(uint8_t b) const {
    switch (nans) {
      case ByteNans::TopMantissa: return (b & 0x7F) == 0x7F;
      case ByteNans::Ieee: return (b & 0x7C) == 0x7C && (b & 0x03) != 0;
      case ByteNans::NegativeZero: return b == 0x80;
      case ByteNans::AllOnes: return b == 0xFF;
      case ByteNans::None: return false;
    }
    return false;
  }
  constexpr bool is_inf(uint8_t b) const { return nans == ByteNans::Ieee && (b & 0x7F) == 0x7C; }
  constexpr bool negative(uint8_t b) const { return has_sign && (b & sign_bit) != 0; }
  // The magnitude of a pattern that is neither NaN nor Inf (exact in double).
  constexpr double magnitude(uint8_t b) const {
    if (!has_sign) return pow2(int(b) - bits.bias);
    const int field = magnitude_bits(b) >> bits.mantissa_bits;
    const int mant = b & ((1 << bits.mantissa_bits) - 1);
    if (field == 0) return double(mant) * bits.min_subnormal();
    return double((1 << bits.mantissa_bits) + mant) * pow2(field - bits.bias - bits.mantissa_bits);
  }
  // A nonzero finite pattern below the smallest normal value (e8m0 has none).
  constexpr bool is_subnormal(uint8_t b) const {
    return has_sign && !is_nan(b) && magnitude_bits(b) != 0 && (magnitude_bits(b) >> bits.mantissa_bits) == 0;
  }
};

inline constexpr FloatFormat kE4M3FNUZ{4, 3, 8, 15, 0x7};
inline constexpr FloatFormat kE5M2FNUZ{5, 2, 16, 31, 0x3};
inline constexpr FloatFormat kE8M0{8, 0, 127, 254, 0};
// OCP FP4 E2M1: 2 exponent bits (bias 1), 1 mantissa bit, no Inf or NaN; 6 at most, 0.5 the
// smallest subnormal.
inline constexpr FloatFormat kE2M1{2, 1, 1, 3, 0x1};
static_assert(kE2M1.max_finite() == 6.0 && kE2M1.min_subnormal() == 0.5 && kE2M1.min_normal() == 1.0);
inline constexpr std::array<ByteFormat, 6> kByteFormats = {{
    {Dtype::E4M3, kE4M3, true, ByteNans::TopMantissa},
    {Dtype::E5M2, kE5M2, true, ByteNans::Ieee},
    {Dtype::E4M3FNUZ, kE4M3FNUZ, true, ByteNans::NegativeZero},
    {Dtype::E5M2FNUZ, kE5M2FNUZ, true, ByteNans::NegativeZero},
    {Dtype::E8M0, kE8M0, false, ByteNans::AllOnes},
    {Dtype::E2M1, kE2M1, true, ByteNans::None, 0x08},
}};
constexpr const ByteFormat& byte_format(Dtype d) {
  return kByteFormats[static_cast<int>(d) - static_cast<int>(Dtype::E4M3)];
}
static_assert([] {
  for (int i = 0; i < int(kByteFormats.size()); ++i)
    if (static_cast<int>(kByteFormats[i].dtype) != static_cast<int>(Dtype::E4M3) + i) return false;
  return true;
}(), "kByteFormats must list the 8-bit formats in Dtype order");
static_assert(byte_format(Dtype::E4M3).magnitude(0x7E) == 448.0 && byte_format(Dtype::E4M3).is_nan(0xFF));
static_assert(byte_format(Dtype::E4M3FNUZ).magnitude(0x7F) == 240.0 && kE4M3FNUZ.max_finite() == 240.0);
static_assert(byte_format(Dtype::E5M2FNUZ).magnitude(0x7F) == 57344.0 && kE5M2FNUZ.max_finite() == 57344.0);
static_assert(byte_format(Dtype::E5M2).is_inf(0xFC) && byte_format(Dtype::E5M2).magnitude(0x7B) == 57344.0);
static_assert(byte_format(Dtype::E8M0).magnitude(0) == pow2(-127) && byte_format(Dtype::E8M0).magnitude(254) == pow2(127));
static_assert(byte_format(Dtype::E2M1).magnitude(0x7) == 6.0 && byte_format(Dtype::E2M1).negative(0xF) &&
              byte_format(Dtype::E2M1).is_subnormal(0x9) && !byte_format(Dtype::E2M1).is_nan(0xF));

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
