// Vectorised array conversions of include/mpt/numerics.h. Each ISA gets its own functions compiled
// with __attribute__((target)), chosen once at run time with __builtin_cpu_supports, so the library
// runs on any x86-64 and never needs -march=native. Every path is bit-identical to the scalar
// functions in numerics.cpp; lanes a vector path cannot do exactly fall back to them.
#include <immintrin.h>

// GCC 12 reports its own AVX-512 intrinsic headers ("'__Y' may be used uninitialized"): a known
// false positive of the compiler's headers, not of this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <atomic>

#include "mpt/numerics.h"

namespace mpt {
namespace {

// [SECTION] Scalar loops (the fallback and the tail of every vector loop)

void f32_to_f16_scalar(const float* s, uint16_t* d, size_t n) { for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(s[i]); }
void f16_to_f32_scalar(const uint16_t* s, float* d, size_t n) { for (size_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]); }
void f32_to_bf16_scalar(const float* s, uint16_t* d, size_t n) { for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]); }
void bf16_to_f32_scalar(const uint16_t* s, float* d, size_t n) { for (size_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]); }
void round_f16_scalar(float* v, size_t n) { for (size_t i = 0; i < n; ++i) v[i] = round_to_f16(v[i]); }
void round_bf16_scalar(float* v, size_t n) { for (size_t i = 0; i < n; ++i) v[i] = round_to_bf16(v[i]); }
void sr_f16_scalar(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16_stochastic(s[i], counter_random(key, first + i));
}
void sr_bf16_scalar(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16_stochastic(s[i], counter_random(key, first + i));
}

// [SECTION] AVX2 + F16C: 8 lanes

#define MPT_AVX2 __attribute__((target("avx2,f16c,fma")))

MPT_AVX2 void f32_to_f16_avx2(const float* s, uint16_t* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  f32_to_f16_scalar(s + i, d + i, n - i);
}

MPT_AVX2 void f16_to_f32_avx2(const uint16_t* s, float* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  f16_to_f32_scalar(s + i, d + i, n - i);
}

// Round-to-nearest-even to bf16 on 8 lanes, results in the low 16 bits of each 32-bit lane.
MPT_AVX2 inline __m256i bf16_round_avx2(__m256i b) {
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
  __m256i magnitude = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));
  __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

// Packs the low 16 bits of 8 lanes into 8 consecutive uint16.
MPT_AVX2 inline __m128i pack_low16_avx2(__m256i v) {
  __m256i packed = _mm256_packus_epi32(v, v);  // values are <= 0xffff: no saturation
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

MPT_AVX2 void f32_to_bf16_avx2(const float* s, uint16_t* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16_avx2(bf16_round_avx2(b)));
  }
  f32_to_bf16_scalar(s + i, d + i, n - i);
}

MPT_AVX2 void bf16_to_f32_avx2(const uint16_t* s, float* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  bf16_to_f32_scalar(s + i, d + i, n - i);
}

MPT_AVX2 void round_f16_avx2(float* v, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(v + i, _mm256_cvtph_ps(h));
  }
  round_f16_scalar(v + i, n - i);
}

MPT_AVX2 void round_bf16_avx2(float* v, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), _mm256_slli_epi32(bf16_round_avx2(b), 16));
  }
  round_bf16_scalar(v + i, n - i);
}

MPT_AVX2 inline __m256i mix32_avx2(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// counter_random(key, index + lane) for 8 lanes whose indices share their upper 32 bits.
MPT_AVX2 inline __m256i counter_random_avx2(uint64_t key, uint64_t index) {
  __m256i lanes = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(index))),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i x = mix32_avx2(_mm256_xor_si256(lanes, _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key)))));
  uint32_t high = static_cast<uint32_t>(key >> 32) ^ (static_cast<uint32_t>(index >> 32) * 0x9e3779b9u);
  return mix32_avx2(_mm256_xor_si256(x, _mm256_set1_epi32(static_cast<int>(high))));
}

// True when the 8 indices from `index` share their upper 32 bits (the vector hash assumes it).
inline bool same_high_word(uint64_t index) { return (index >> 32) == ((index + 7) >> 32); }

MPT_AVX2 void sr_f16_avx2(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  const __m256i min_normal = _mm256_set1_epi32(0x38800000), inf = _mm256_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i a = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));
    __m256i special = _mm256_or_si256(_mm256_cmpgt_epi32(min_normal, a),
                                      _mm256_cmpgt_epi32(a, _mm256_sub_epi32(inf, _mm256_set1_epi32(1))));
    if (!_mm256_testz_si256(special, special) || !same_high_word(first + i)) {
      sr_f16_scalar(s + i, d + i, 8, key, first + i);  // fp16 subnormals, Inf, NaN: scalar
      continue;
    }
    __m256i noise = _mm256_and_si256(counter_random_avx2(key, first + i), _mm256_set1_epi32(0x1fff));
    a = _mm256_add_epi32(a, noise);
    __m256i overflow = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x47800000 - 1));
    __m256i h = _mm256_srli_epi32(_mm256_sub_epi32(a, _mm256_set1_epi32(0x38000000)), 13);
    h = _mm256_blendv_epi8(h, _mm256_set1_epi32(0x7c00), overflow);
    h = _mm256_or_si256(h, _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x8000)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16_avx2(h));
  }
  sr_f16_scalar(s + i, d + i, n - i, key, first + i);
}

MPT_AVX2 void sr_bf16_avx2(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i a = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));
    __m256i special = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000 - 1));
    if (!_mm256_testz_si256(special, special) || !same_high_word(first + i)) {
      sr_bf16_scalar(s + i, d + i, 8, key, first + i);
      continue;
    }
    __m256i noise = _mm256_and_si256(counter_random_avx2(key, first + i), _mm256_set1_epi32(0xffff));
    __m256i h = _mm256_srli_epi32(_mm256_add_epi32(b, noise), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16_avx2(h));
  }
  sr_bf16_scalar(s + i, d + i, n - i, key, first + i);
}

// [SECTION] AVX-512: 16 lanes for the plain conversions (stochastic rounding stays on AVX2)

#define MPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

MPT_AVX512 void f32_to_f16_avx512(const float* s, uint16_t* d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
  }
  f32_to_f16_avx2(s + i, d + i, n - i);
}

MPT_AVX512 void f16_to_f32_avx512(const uint16_t* s, float* d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  f16_to_f32_avx2(s + i, d + i, n - i);
}

MPT_AVX512 inline __m512i bf16_round_avx512(__m512i b) {
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
  __m512i magnitude = _mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff));
  __mmask16 is_nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
}

MPT_AVX512 void f32_to_bf16_avx512(const float* s, uint16_t* d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i b = _mm512_loadu_si512(s + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(bf16_round_avx512(b)));
  }
  f32_to_bf16_avx2(s + i, d + i, n - i);
}

MPT_AVX512 void bf16_to_f32_avx512(const uint16_t* s, float* d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm512_storeu_si512(d + i, _mm512_slli_epi32(w, 16));
  }
  bf16_to_f32_avx2(s + i, d + i, n - i);
}

MPT_AVX512 void round_f16_avx512(float* v, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(v + i, _mm512_cvtph_ps(h));
  }
  round_f16_avx2(v + i, n - i);
}

MPT_AVX512 void round_bf16_avx512(float* v, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i b = _mm512_loadu_si512(v + i);
    _mm512_storeu_si512(v + i, _mm512_slli_epi32(bf16_round_avx512(b), 16));
  }
  round_bf16_avx2(v + i, n - i);
}

// [SECTION] Run-time choice

struct ConversionTable {
  const char* isa;
  void (*f32_to_f16)(const float*, uint16_t*, size_t);
  void (*f16_to_f32)(const uint16_t*, float*, size_t);
  void (*f32_to_bf16)(const float*, uint16_t*, size_t);
  void (*bf16_to_f32)(const uint16_t*, float*, size_t);
  void (*round_f16)(float*, size_t);
  void (*round_bf16)(float*, size_t);
  void (*sr_f16)(const float*, uint16_t*, size_t, uint64_t, uint64_t);
  void (*sr_bf16)(const float*, uint16_t*, size_t, uint64_t, uint64_t);
};

constexpr ConversionTable kScalar{"scalar", f32_to_f16_scalar, f16_to_f32_scalar, f32_to_bf16_scalar,
                                  bf16_to_f32_scalar, round_f16_scalar, round_bf16_scalar,
                                  sr_f16_scalar, sr_bf16_scalar};
constexpr ConversionTable kAvx2{"avx2", f32_to_f16_avx2, f16_to_f32_avx2, f32_to_bf16_avx2,
                                bf16_to_f32_avx2, round_f16_avx2, round_bf16_avx2,
                                sr_f16_avx2, sr_bf16_avx2};
constexpr ConversionTable kAvx512{"avx512", f32_to_f16_avx512, f16_to_f32_avx512, f32_to_bf16_avx512,
                                  bf16_to_f32_avx512, round_f16_avx512, round_bf16_avx512,
                                  sr_f16_avx2, sr_bf16_avx2};

const ConversionTable* detect_best() {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
              __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return &kAvx512;
  return avx2 ? &kAvx2 : &kScalar;
}

std::atomic<bool> g_force_scalar{false};

const ConversionTable& table() {
  static const ConversionTable* best = detect_best();
  return g_force_scalar.load(std::memory_order_relaxed) ? kScalar : *best;
}

}  // namespace

void convert_f32_to_f16(const float* s, uint16_t* d, size_t n) { table().f32_to_f16(s, d, n); }
void convert_f16_to_f32(const uint16_t* s, float* d, size_t n) { table().f16_to_f32(s, d, n); }
void convert_f32_to_bf16(const float* s, uint16_t* d, size_t n) { table().f32_to_bf16(s, d, n); }
void convert_bf16_to_f32(const uint16_t* s, float* d, size_t n) { table().bf16_to_f32(s, d, n); }
void round_f32_through_f16(float* v, size_t n) { table().round_f16(v, n); }
void round_f32_through_bf16(float* v, size_t n) { table().round_bf16(v, n); }
void convert_f32_to_f16_stochastic(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  table().sr_f16(s, d, n, key, first);
}
void convert_f32_to_bf16_stochastic(const float* s, uint16_t* d, size_t n, uint64_t key, uint64_t first) {
  table().sr_bf16(s, d, n, key, first);
}
const char* conversion_isa() { return table().isa; }
void force_scalar_conversions(bool force) { g_force_scalar.store(force); }

}  // namespace mpt
