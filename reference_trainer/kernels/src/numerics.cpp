// Scalar reference conversions between fp32 and the 16-bit formats, stochastic rounding and the
// counter-based generator (see include/mpt/numerics.h for the rules). The vectorised array
// versions live in numerics_simd.cpp and must agree with these bit for bit.
#include "mpt/numerics.h"

namespace mpt {
namespace {

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF16MinNormalAsF32 = 0x38800000u;  // 2^-14
constexpr uint32_t kF16RoundsToInfAsF32 = 0x477ff000u; // 65520: halfway from 65504 to 2^16
constexpr uint32_t kF16RebiasAsF32 = 0x38000000u;      // (127 - 15) << 23

// Rounds m * 2^-shift to an integer, nearest with ties to even (shift in 1..63).
uint32_t shift_right_nearest_even(uint64_t m, unsigned shift) {
  uint64_t q = m >> shift;
  uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return static_cast<uint32_t>(q);
}

// fp32 magnitude `a` (below 2^-14) as a count of fp16 subnormal units 2^-24, before rounding:
// value = significand * 2^-shift units.
void f16_subnormal_split(uint32_t a, uint64_t* significand, unsigned* shift) {
  uint32_t exponent = a >> 23;
  if (exponent == 0) {  // fp32 subnormal: m * 2^-149 = m * 2^-125 units
    *significand = a & 0x7fffffu;
    *shift = 125;
  } else {
    *significand = (a & 0x7fffffu) | 0x800000u;
    *shift = 126 - exponent;
  }
}

uint16_t f32_nan_to_f16(uint32_t b) {
  return static_cast<uint16_t>(((b >> 16) & 0x8000u) | 0x7e00u | ((b >> 13) & 0x3ffu));
}

}  // namespace

uint16_t f32_to_f16(float x) {
  uint32_t b = float_bits(x);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  uint32_t a = b & kAbsMask;
  if (a > kF32Inf) return f32_nan_to_f16(b);
  if (a >= kF16RoundsToInfAsF32) return sign | 0x7c00u;
  if (a >= kF16MinNormalAsF32) {
    uint32_t lsb = (a >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((a + 0xfffu + lsb - kF16RebiasAsF32) >> 13));
  }
  uint64_t significand;
  unsigned shift;
  f16_subnormal_split(a, &significand, &shift);
  if (shift > 40) return sign;  // below 2^-40 units: far under half the smallest subnormal
  return static_cast<uint16_t>(sign | shift_right_nearest_even(significand, shift));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | kF32Inf | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal (or zero): mantissa * 2^-24, exact in fp32.
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
  return bits_float(sign | float_bits(magnitude));
}

uint16_t f32_to_bf16(float x) {
  uint32_t b = float_bits(x);
  if ((b & kAbsMask) > kF32Inf) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  uint32_t lsb = (b >> 16) & 1u;
  return static_cast<uint16_t>((b + 0x7fffu + lsb) >> 16);
}

uint16_t f32_to_f16_stochastic(float x, uint32_t random) {
  uint32_t b = float_bits(x);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  uint32_t a = b & kAbsMask;
  if (a >= kF32Inf) return f32_to_f16(x);  // Inf and NaN are not rounded
  if (a >= kF16MinNormalAsF32) {
    a += random & 0x1fffu;  // 13 random bits below the fp16 cut, then truncate
    if (a >= 0x47800000u) return sign | 0x7c00u;  // reached 2^16: beyond the largest fp16
    return static_cast<uint16_t>(sign | ((a - kF16RebiasAsF32) >> 13));
  }
  uint64_t significand;
  unsigned shift;
  f16_subnormal_split(a, &significand, &shift);
  if (shift >= 64) return sign;
  // `shift` random bits below the cut; beyond 32 bits the lowest ones are zero.
  uint64_t noise = shift <= 32 ? (random >> (32 - shift))
                               : (static_cast<uint64_t>(random) << (shift - 32));
  return static_cast<uint16_t>(sign | ((significand + noise) >> shift));
}

uint16_t f32_to_bf16_stochastic(float x, uint32_t random) {
  uint32_t b = float_bits(x);
  if ((b & kAbsMask) >= kF32Inf) return f32_to_bf16(x);
  // bf16 keeps fp32's exponent range, so the cut is 16 bits for every finite value,
  // subnormals included; a carry into the exponent past the largest value gives Inf.
  return static_cast<uint16_t>((b + (random & 0xffffu)) >> 16);
}

uint64_t random_stream_key(uint64_t seed, uint64_t step) {
  // splitmix64 finaliser applied twice: nearby (seed, step) pairs give unrelated keys.
  auto splitmix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return splitmix(seed ^ splitmix(step));
}

}  // namespace mpt
