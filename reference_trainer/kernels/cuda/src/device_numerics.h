/* The conversions of mpt/numerics.h, written once for both the host and the device.
 *
 * The GPU kernels must round exactly as the CPU library does, NaN payloads and stochastic
 * rounding included. CUDA's own __float2half_rn agrees with the CPU on finite values but not
 * necessarily on NaN payloads, so the kernels use these bit-level versions instead. Compiled as
 * plain C++ (no nvcc) the same functions let the tests check them against the CPU library on every
 * bit pattern without a GPU.
 */
#ifndef MPT_CUDA_DEVICE_NUMERICS_H
#define MPT_CUDA_DEVICE_NUMERICS_H

#include <cstdint>

#if defined(__CUDACC__)
#define MPT_HD __host__ __device__ __forceinline__
#else
#define MPT_HD inline
#endif

namespace mpt::dev {

MPT_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return __builtin_bit_cast(uint32_t, x);
#endif
}
MPT_HD float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return __builtin_bit_cast(float, b);
#endif
}

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF16MinNormalAsF32 = 0x38800000u;   // 2^-14
constexpr uint32_t kF16RoundsToInfAsF32 = 0x477ff000u;  // 65520, halfway from 65504 to 2^16
constexpr uint32_t kF16RebiasAsF32 = 0x38000000u;       // (127 - 15) << 23

/* m * 2^-shift rounded to an integer, nearest with ties to even (shift in 1..63). */
MPT_HD uint32_t shift_right_nearest_even(uint64_t m, unsigned shift) {
  uint64_t q = m >> shift;
  uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return static_cast<uint32_t>(q);
}

/* fp32 magnitude bits `a` below 2^-14 as significand * 2^-shift fp16 subnormal units (2^-24). */
MPT_HD void f16_subnormal_split(uint32_t a, uint64_t* significand, unsigned* shift) {
  uint32_t exponent = a >> 23;
  if (exponent == 0) {
    *significand = a & 0x7fffffu;
    *shift = 125;
  } else {
    *significand = (a & 0x7fffffu) | 0x800000u;
    *shift = 126 - exponent;
  }
}

/* A NaN becomes a quiet fp16 NaN keeping the top 10 bits of its payload (F16C's behaviour). */
MPT_HD uint16_t f32_nan_to_f16(uint32_t b) {
  return static_cast<uint16_t>(((b >> 16) & 0x8000u) | 0x7e00u | ((b >> 13) & 0x3ffu));
}

MPT_HD uint16_t f32_to_f16(float x) {
  uint32_t b = float_bits(x);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  uint32_t a = b & kAbsMask;
  if (a > kF32Inf) return f32_nan_to_f16(b);
  if (a >= kF16RoundsToInfAsF32) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= kF16MinNormalAsF32) {
    uint32_t lsb = (a >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((a + 0xfffu + lsb - kF16RebiasAsF32) >> 13));
  }
  uint64_t significand;
  unsigned shift;
  f16_subnormal_split(a, &significand, &shift);
  if (shift > 40) return sign;
  return static_cast<uint16_t>(sign | shift_right_nearest_even(significand, shift));
}

MPT_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | kF32Inf | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // exact
  return bits_float(sign | float_bits(magnitude));
}

MPT_HD uint16_t f32_to_bf16(float x) {
  uint32_t b = float_bits(x);
  if ((b & kAbsMask) > kF32Inf) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  uint32_t lsb = (b >> 16) & 1u;
  return static_cast<uint16_t>((b + 0x7fffu + lsb) >> 16);
}

MPT_HD float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

MPT_HD uint16_t f32_to_f16_stochastic(float x, uint32_t random) {
  uint32_t b = float_bits(x);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  uint32_t a = b & kAbsMask;
  if (a >= kF32Inf) return f32_to_f16(x);
  if (a >= kF16MinNormalAsF32) {
    a += random & 0x1fffu;
    if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | ((a - kF16RebiasAsF32) >> 13));
  }
  uint64_t significand;
  unsigned shift;
  f16_subnormal_split(a, &significand, &shift);
  if (shift >= 64) return sign;
  uint64_t noise = shift <= 32 ? (random >> (32 - shift))
                               : (static_cast<uint64_t>(random) << (shift - 32));
  return static_cast<uint16_t>(sign | ((significand + noise) >> shift));
}

MPT_HD uint16_t f32_to_bf16_stochastic(float x, uint32_t random) {
  uint32_t b = float_bits(x);
  if ((b & kAbsMask) >= kF32Inf) return f32_to_bf16(x);
  return static_cast<uint16_t>((b + (random & 0xffffu)) >> 16);
}

/* The counter-based generator of mpt/numerics.h: same constants, same order. */
MPT_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
MPT_HD uint64_t random_stream_key(uint64_t seed, uint64_t step) {
  return splitmix64(seed ^ splitmix64(step));
}
MPT_HD uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
MPT_HD uint32_t counter_random(uint64_t stream_key, uint64_t index) {
  uint32_t x = mix32(static_cast<uint32_t>(index) ^ static_cast<uint32_t>(stream_key));
  return mix32(x ^ static_cast<uint32_t>(stream_key >> 32) ^
               (static_cast<uint32_t>(index >> 32) * 0x9e3779b9u));
}

/* Element access by mpt_dtype: floating tensors are read exactly into fp32 and written back with
 * round-to-nearest-even (or stochastically, given 32 random bits). */
enum DType : int { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, U8 = 5, F64 = 6 };

MPT_HD float load_float(const void* p, int dtype, int64_t i) {
  if (dtype == F32) return static_cast<const float*>(p)[i];
  uint16_t h = static_cast<const uint16_t*>(p)[i];
  return dtype == F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

MPT_HD void store_float(void* p, int dtype, int64_t i, float v) {
  if (dtype == F32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<uint16_t*>(p)[i] = dtype == F16 ? f32_to_f16(v) : f32_to_bf16(v);
  }
}

MPT_HD void store_float_stochastic(void* p, int dtype, int64_t i, float v, uint32_t random) {
  if (dtype == F32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<uint16_t*>(p)[i] =
        dtype == F16 ? f32_to_f16_stochastic(v, random) : f32_to_bf16_stochastic(v, random);
  }
}

/* fp32 value rounded to fp16 precision and back: an fp16 accumulator's running sum. */
MPT_HD float round_through_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

}  // namespace mpt::dev

#endif /* MPT_CUDA_DEVICE_NUMERICS_H */
