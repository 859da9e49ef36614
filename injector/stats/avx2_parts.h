// The AVX2 kernel's building blocks (avx2_kernel.cpp scans with them): lane totals and group masks,
// the sums of a group as doubles, the counting of a block's exponent fields and the compares of
// cast thresholds inside a populated binade, and the state a scan carries. Internal to
// fpscope_stats and included by the AVX2 kernel alone: every function carries its own target
// attribute.
//
// Index: Helpers | Sums | Exponent fields | State
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "vector_common.h"

#define FPSCOPE_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace fpscope::stats::avx2 {

// [SECTION] Helpers

// The sum of a vector's unsigned lanes of type Lane (uint32_t or uint16_t).
template <typename Lane>
FPSCOPE_AVX2 inline uint64_t lane_total(__m256i counts) {
  alignas(32) Lane lanes[32 / sizeof(Lane)];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), counts);
  uint64_t total = 0;
  for (Lane c : lanes) total += c;
  return total;
}
FPSCOPE_AVX2 inline uint64_t lane_total_u32(__m256i counts) { return lane_total<uint32_t>(counts); }
FPSCOPE_AVX2 inline uint64_t lane_total_u16(__m256i counts) { return lane_total<uint16_t>(counts); }

// A group's lane masks (all-ones lanes) as one 64-bit mask, bit j for element j of the group: eight
// vectors of 32-bit lanes, or four of 16-bit lanes (packed to bytes pairwise; the pack interleaves
// the two vectors' 128-bit halves, which the permute puts back in order).
FPSCOPE_AVX2 inline uint64_t group_mask_32(const __m256i m[8]) {
  uint64_t bits = 0;
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    bits |= uint64_t(uint32_t(_mm256_movemask_ps(_mm256_castsi256_ps(m[k])))) << (8 * k);
  return bits;
}

FPSCOPE_AVX2 inline uint64_t pair_mask_16(__m256i x, __m256i y) {
  return uint64_t(uint32_t(_mm256_movemask_epi8(_mm256_permute4x64_epi64(_mm256_packs_epi16(x, y), 0xD8))));
}

FPSCOPE_AVX2 inline uint64_t group_mask_16(const __m256i m[4]) {
  return pair_mask_16(m[0], m[1]) | pair_mask_16(m[2], m[3]) << 32;
}

// a >= t for magnitudes below 2^31, as all-ones lanes.
FPSCOPE_AVX2 inline __m256i at_least_32(__m256i a, __m256i t_minus_1) {
  return _mm256_cmpgt_epi32(a, t_minus_1);
}

// [SECTION] Sums: 32 floats (four vectors of 8) per call, a depth-3 tree of double additions
// (squares exact, combined with FMA), then one TwoSum per accumulator, as in the AVX-512 kernel.

struct SumLanes {
  __m256d hi, lo;
};

FPSCOPE_AVX2 inline void two_sum(SumLanes& s, __m256d x) {
  const __m256d sum = _mm256_add_pd(s.hi, x);
  const __m256d bp = _mm256_sub_pd(sum, s.hi);
  const __m256d err =
      _mm256_add_pd(_mm256_sub_pd(s.hi, _mm256_sub_pd(sum, bp)), _mm256_sub_pd(x, bp));
  s.hi = sum;
  s.lo = _mm256_add_pd(s.lo, err);
}

FPSCOPE_AVX2 inline void float_doubles(const __m256 f[4], __m256d d[8]) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = _mm256_cvtps_pd(_mm256_castps256_ps128(f[k]));
    d[2 * k + 1] = _mm256_cvtps_pd(_mm256_extractf128_ps(f[k], 1));
  }
}

// fp32 straight from memory (the group is in L1): no lane extracts.
FPSCOPE_AVX2 inline void f32_doubles(const unsigned char* p, __m256d d[8]) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    d[k] = _mm256_cvtps_pd(_mm_loadu_ps(reinterpret_cast<const float*>(p + 16 * k)));
}

FPSCOPE_AVX2 inline __m256d tree_sum(const __m256d d[8]) {
  __m256d s[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) s[k] = _mm256_add_pd(d[2 * k], d[2 * k + 1]);
  return _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3]));
}

FPSCOPE_AVX2 inline void add_squares(SumLanes& squares, const __m256d d[8]) {
  __m256d q[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    q[k] = _mm256_fmadd_pd(d[2 * k], d[2 * k], _mm256_mul_pd(d[2 * k + 1], d[2 * k + 1]));
  two_sum(squares, _mm256_add_pd(_mm256_add_pd(q[0], q[1]), _mm256_add_pd(q[2], q[3])));
}

FPSCOPE_AVX2 inline void add_sums(SumLanes& sum, SumLanes& squares, const __m256d d[8]) {
  two_sum(sum, tree_sum(d));
  add_squares(squares, d);
}

// fp16 values as exact running sums, as in the AVX-512 kernel (add_sums_f16 there): a block gives
// each of the four lanes at most 1024 values below 2^16, multiples of 2^-24, so plain additions
// stay exact (below 2^29); the block's lanes join the (hi, lo) pair with one TwoSum.
static_assert(kBlockElements / 4 <= (std::size_t{1} << 13),
              "a lane's exact fp16 sum over a block must stay below 2^29");
FPSCOPE_AVX2 inline void add_sums_f16(__m256d& exact, SumLanes& squares, const __m256d d[8]) {
  exact = _mm256_add_pd(exact, tree_sum(d));
  add_squares(squares, d);
}

FPSCOPE_AVX2 inline void flush_sums(const SumLanes& sum, const SumLanes& squares,
                                    Accumulator& acc) {
  alignas(32) double lanes[4][4];
  _mm256_store_pd(lanes[0], sum.hi);
  _mm256_store_pd(lanes[1], sum.lo);
  _mm256_store_pd(lanes[2], squares.hi);
  _mm256_store_pd(lanes[3], squares.lo);
  for (int i = 0; i < 4; ++i) {
    acc.sum.add(lanes[0][i]);
    acc.sum.add(lanes[1][i]);
    acc.sum_squares.add(lanes[2][i]);
    acc.sum_squares.add(lanes[3][i]);
  }
}

// [SECTION] Exponent fields of a block (avx512_parts.h describes the method).

inline constexpr int kMaxVectorFieldRange = 48;

// The smallest of 32 unsigned bytes: fold to 16, widen to words, PHMINPOSUW.
FPSCOPE_AVX2 inline int min_byte(__m256i v) {
  __m128i x = _mm_min_epu8(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 8));
  return _mm_extract_epi16(_mm_minpos_epu16(_mm_cvtepu8_epi16(x)), 0);
}

// Counts the fields into `h` (writing every bin in [first, last]; others may keep what they held)
// and returns the range of nonzero fields in [first, last].
FPSCOPE_AVX2 inline void count_fields(const uint8_t* field, std::size_t n, uint32_t h[256],
                                      int& first, int& last) {
  first = 1;
  last = 0;
  if (n == 0) return;  // n is a multiple of 64
  const __m256i one = _mm256_set1_epi8(1);
  __m256i lo = _mm256_set1_epi8(-1), hi = _mm256_setzero_si256();
  for (std::size_t i = 0; i < n; i += 32) {
    const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(field + i));
    lo = _mm256_min_epu8(lo, _mm256_sub_epi8(f, one));  // zero wraps to 255
    hi = _mm256_max_epu8(hi, f);
  }
  first = min_byte(lo) + 1;
  last = 255 - min_byte(_mm256_xor_si256(hi, _mm256_set1_epi8(-1)));  // max = 255 - min(255 - x)
  if (first > last) return;
  if (last - first >= kMaxVectorFieldRange) {
    count_fields_scalar(field, n, h);
    return;
  }
  for (int b = first; b <= last; ++b) {
    const __m256i bin = _mm256_set1_epi8(char(b));
    __m256i c0 = _mm256_setzero_si256(), c1 = _mm256_setzero_si256();  // <= 64 per byte lane
    for (std::size_t i = 0; i < n; i += 64) {
      const auto* p = reinterpret_cast<const __m256i*>(field + i);
      c0 = _mm256_sub_epi8(c0, _mm256_cmpeq_epi8(_mm256_loadu_si256(p), bin));
      c1 = _mm256_sub_epi8(c1, _mm256_cmpeq_epi8(_mm256_loadu_si256(p + 1), bin));
    }
    const __m256i sums = _mm256_add_epi64(_mm256_sad_epu8(c0, _mm256_setzero_si256()),
                                          _mm256_sad_epu8(c1, _mm256_setzero_si256()));
    alignas(32) uint64_t q[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), sums);
    h[b] = uint32_t(q[0] + q[1] + q[2] + q[3]);
  }
}

// Threshold compares over the fast groups of a block (`special` bit g: group g went scalar), for P
// thresholds at once.
template <int P, bool kHalf>
FPSCOPE_AVX2 inline void count_at_least_p(const unsigned char* block, std::size_t groups,
                                          uint64_t special, const uint32_t* thresholds,
                                          uint64_t* counts) {
  const __m256i abs_mask = kHalf ? _mm256_set1_epi16(0x7FFF) : _mm256_set1_epi32(0x7FFFFFFF);
  __m256i t[P], c[P];  // 16-bit counters: at most 256 per lane per block
#pragma GCC unroll 4
  for (int j = 0; j < P; ++j) {
    t[j] = kHalf ? _mm256_set1_epi16(int16_t(thresholds[j] - 1))
                 : _mm256_set1_epi32(int(thresholds[j] - 1));
    c[j] = _mm256_setzero_si256();
  }
  const std::size_t group_bytes = (kHalf ? 2 : 4) * kGroupElements;
  for (std::size_t g = 0; g < groups; ++g) {
    if ((special >> g) & 1) continue;
    const auto* p = reinterpret_cast<const __m256i*>(block + group_bytes * g);
#pragma GCC unroll 8
    for (std::size_t k = 0; k < group_bytes / 32; ++k) {
      const __m256i a = _mm256_and_si256(_mm256_loadu_si256(p + k), abs_mask);
#pragma GCC unroll 4
      for (int j = 0; j < P; ++j)
        c[j] = kHalf ? _mm256_sub_epi16(c[j], _mm256_cmpgt_epi16(a, t[j]))
                     : _mm256_sub_epi32(c[j], at_least_32(a, t[j]));
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < P; ++j) counts[j] = kHalf ? lane_total_u16(c[j]) : lane_total_u32(c[j]);
}

// Folds a finished block's fields and thresholds into the accumulator.
// `nonfinite_zeroed`: NaN and Inf lanes of the block's fast groups, which lie at or above every
// threshold in memory.
template <const ThresholdTable& T, bool kHalf>
FPSCOPE_AVX2 inline void finish_block(const uint8_t* field, std::size_t buffered,
                                      const unsigned char* block, std::size_t groups,
                                      uint64_t special, bool powers_of_two, uint64_t nonfinite_zeroed,
                                      uint32_t h[256], Accumulator& acc) {
  int first, last;
  count_fields(field, buffered, h, first, last);
  fold_block_fields<T>(h, first, last, powers_of_two, acc, [&](const uint32_t* t, int k,
                                                               uint64_t* counts) {
    for (int i = 0; i < k; i += 4) {
      switch (std::min(k - i, 4)) {
        case 1:
          count_at_least_p<1, kHalf>(block, groups, special, t + i, counts + i);
          break;
        case 2:
          count_at_least_p<2, kHalf>(block, groups, special, t + i, counts + i);
          break;
        case 3:
          count_at_least_p<3, kHalf>(block, groups, special, t + i, counts + i);
          break;
        default:
          count_at_least_p<4, kHalf>(block, groups, special, t + i, counts + i);
          break;
      }
    }
    for (int j = 0; j < k; ++j) counts[j] -= nonfinite_zeroed;
  });
}

// [SECTION] Per-group state shared by both element widths.

struct State {
  __m256i min_key, max_key, min_nz_m1;  // keys and |x| - 1 in 32- or 16-bit lanes
  __m256i zero, subnormal;              // per-block counters
  __m256i power_of_two;                 // fp32, Full: the block's power-of-two probe
  SumLanes sum, squares;
  __m256d exact;  // fp16: the block's sum so far, exact (add_sums_f16)
};

template <int kBits>
FPSCOPE_AVX2 inline void init(State& st) {
  if constexpr (kBits == 32) {
    st.min_key = _mm256_set1_epi32(INT32_MAX);
    st.max_key = _mm256_set1_epi32(INT32_MIN);
  } else {
    st.min_key = _mm256_set1_epi16(INT16_MAX);
    st.max_key = _mm256_set1_epi16(INT16_MIN);
  }
  st.min_nz_m1 = _mm256_set1_epi32(-1);
  st.zero = st.subnormal = st.power_of_two = _mm256_setzero_si256();
  st.sum = st.squares = SumLanes{_mm256_setzero_pd(), _mm256_setzero_pd()};
  st.exact = _mm256_setzero_pd();
}

// Adds a vector's order keys (32- or 16-bit lanes) to the state's smallest and largest; kMasked:
// not the all-ones lanes of `nonfinite` (they held a NaN or an Inf and were zeroed,
// vector_common.h).
template <int kBits, bool kMasked>
FPSCOPE_AVX2 inline void add_keys(State& st, __m256i key, __m256i nonfinite) {
  if constexpr (kBits == 32) {
    if constexpr (kMasked) {
      st.min_key = _mm256_min_epi32(st.min_key, _mm256_blendv_epi8(key, _mm256_set1_epi32(INT32_MAX), nonfinite));
      st.max_key = _mm256_max_epi32(st.max_key, _mm256_blendv_epi8(key, _mm256_set1_epi32(INT32_MIN), nonfinite));
    } else {
      st.min_key = _mm256_min_epi32(st.min_key, key);
      st.max_key = _mm256_max_epi32(st.max_key, key);
    }
  } else if constexpr (kMasked) {
    st.min_key = _mm256_min_epi16(st.min_key, _mm256_blendv_epi8(key, _mm256_set1_epi16(INT16_MAX), nonfinite));
    st.max_key = _mm256_max_epi16(st.max_key, _mm256_blendv_epi8(key, _mm256_set1_epi16(INT16_MIN), nonfinite));
  } else {
    st.min_key = _mm256_min_epi16(st.min_key, key);
    st.max_key = _mm256_max_epi16(st.max_key, key);
  }
}

}  // namespace fpscope::stats::avx2
