/* Floating-point formats of the reference trainer: exact conversions between fp32 and the 16-bit
 * formats (IEEE binary16 "fp16" and bfloat16 "bf16", both stored as uint16_t bits), stochastic
 * rounding, and the counter-based random generator that makes stochastic rounding reproducible.
 *
 * Rules, identical for the scalar functions and the vectorised array functions:
 *   - fp32 -> fp16/bf16 rounds to nearest, ties to even; overflow gives +-Inf; subnormal results
 *     are exact roundings; a NaN stays a NaN, is made quiet, and keeps the top bits of its payload
 *     (the F16C instruction's behaviour for fp16).
 *   - fp16/bf16 -> fp32 is exact for every one of the 65536 bit patterns (a NaN keeps its payload).
 *   - Stochastic rounding adds random bits below the cut of the target format and truncates: the
 *     result is one of the two neighbours of x, the upper one with probability equal to the
 *     distance to the lower one in units of their gap, so the rounding is unbiased.
 */
#ifndef MPT_NUMERICS_H
#define MPT_NUMERICS_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mpt {

inline uint32_t float_bits(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
inline float bits_float(uint32_t b) { float x; std::memcpy(&x, &b, 4); return x; }

/* Scalar conversions (the reference for the array versions below). */
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
inline float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/* fp32 rounded to the format and back: the value a 16-bit tensor would hold. Inline: the common
 * case (a result in fp16's normal range) is a few integer operations on the fp32 bits. */
inline float round_to_f16(float x) {
  uint32_t b = float_bits(x), a = b & 0x7fffffffu;
  if (a >= 0x38800000u && a < 0x477ff000u)  // normal fp16 result: round the 13 low bits away
    return bits_float((b + 0xfffu + ((b >> 13) & 1u)) & ~0x1fffu);
  return f16_to_f32(f32_to_f16(x));
}
inline float round_to_bf16(float x) {
  uint32_t b = float_bits(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return bf16_to_f32(f32_to_bf16(x));  // NaN
  return bits_float((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}

/* Stochastic rounding of x using the 32 random bits `random` (uniform). */
uint16_t f32_to_f16_stochastic(float x, uint32_t random);
uint16_t f32_to_bf16_stochastic(float x, uint32_t random);

/* Counter-based generator: a stream is keyed by (seed, step); element `index` of the stream gets
 * 32 random bits that depend only on (stream key, index), so any element can be drawn in any
 * order, by any thread, with the same result. */
uint64_t random_stream_key(uint64_t seed, uint64_t step);
inline uint32_t mix32(uint32_t x) {
  // A well-mixing 32-bit permutation (xorshift-multiply rounds with low measured bias).
  x ^= x >> 16; x *= 0x7feb352du;
  x ^= x >> 15; x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
inline uint32_t counter_random(uint64_t stream_key, uint64_t index) {
  uint32_t x = mix32(static_cast<uint32_t>(index) ^ static_cast<uint32_t>(stream_key));
  return mix32(x ^ static_cast<uint32_t>(stream_key >> 32) ^
               (static_cast<uint32_t>(index >> 32) * 0x9e3779b9u));
}

/* Array conversions, vectorised with AVX-512 or AVX2/F16C when the CPU has them (chosen at run
 * time), bit-identical to the scalar functions. `n` elements, no alignment required. */
void convert_f32_to_f16(const float* src, uint16_t* dst, size_t n);
void convert_f16_to_f32(const uint16_t* src, float* dst, size_t n);
void convert_f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void convert_bf16_to_f32(const uint16_t* src, float* dst, size_t n);
/* Rounds in place to fp16 / bf16 precision (the fp32 value the 16-bit format would hold). */
void round_f32_through_f16(float* values, size_t n);
void round_f32_through_bf16(float* values, size_t n);
/* Stochastic rounding of src[i] with counter_random(stream_key, first_index + i). */
void convert_f32_to_f16_stochastic(const float* src, uint16_t* dst, size_t n,
                                   uint64_t stream_key, uint64_t first_index);
void convert_f32_to_bf16_stochastic(const float* src, uint16_t* dst, size_t n,
                                    uint64_t stream_key, uint64_t first_index);

/* Which vector path the array conversions use on this CPU: "avx512", "avx2" or "scalar". */
const char* conversion_isa();
/* Forces the scalar path (tests compare it with the vector path); false restores the default. */
void force_scalar_conversions(bool force);

}  // namespace mpt

#endif /* MPT_NUMERICS_H */
