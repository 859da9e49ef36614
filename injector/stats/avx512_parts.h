// The AVX-512 kernel's building blocks (avx512_kernel.cpp scans with them): the sums of a group as
// doubles, the compares of cast thresholds inside a populated binade, the counting of a block's
// exponent fields (with GFNI, BITALG and VBMI where the CPU has them), and the extremes from the raw
// bits. Internal to fpscope_stats and included by the AVX-512 kernel alone: every function carries
// its own target attribute, so the header compiles in a translation unit without AVX-512 flags.
//
// Index: Sums | Cast thresholds | Exponent histogram | Extremes
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "vector_common.h"

#define FPSCOPE_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,f16c,fma,avx2,popcnt")))

namespace fpscope::stats::avx512 {

// [SECTION] Sums: 64 values as four vectors of 16 floats, added as doubles.

struct SumLanes {
  __m512d hi, lo;
};

// TwoSum per lane: hi + lo absorbs x with lo taking the exact rounding error of hi + x.
FPSCOPE_AVX512 inline void two_sum(SumLanes& s, __m512d x) {
  const __m512d sum = _mm512_add_pd(s.hi, x);
  const __m512d bp = _mm512_sub_pd(sum, s.hi);
  const __m512d err =
      _mm512_add_pd(_mm512_sub_pd(s.hi, _mm512_sub_pd(sum, bp)), _mm512_sub_pd(x, bp));
  s.hi = sum;
  s.lo = _mm512_add_pd(s.lo, err);
}

// 64 finite values as eight vectors of doubles (exact conversions). fp32 and fp16 are converted
// straight from memory (the group is in L1), bf16 from its widened floats.
FPSCOPE_AVX512 inline void f32_doubles(const unsigned char* p, __m512d d[8]) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    d[k] = _mm512_cvtps_pd(_mm256_loadu_ps(reinterpret_cast<const float*>(p + 32 * k)));
}

FPSCOPE_AVX512 inline void f16_doubles(const unsigned char* p, __m512d d[8]) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    d[k] = _mm512_cvtps_pd(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k))));
}

FPSCOPE_AVX512 inline void float_doubles(const __m512 f[4], __m512d d[8]) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = _mm512_cvtps_pd(_mm512_castps512_ps256(f[k]));
    d[2 * k + 1] =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f[k]), 1)));
  }
}

// Adds 64 finite values: a depth-3 tree of double additions (squares exact, combined with FMA),
// then one TwoSum per accumulator. Every value passes through at most three roundings.
FPSCOPE_AVX512 inline void add_squares(SumLanes& squares, const __m512d d[8]) {
  __m512d q[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    q[k] = _mm512_fmadd_pd(d[2 * k], d[2 * k], _mm512_mul_pd(d[2 * k + 1], d[2 * k + 1]));
  two_sum(squares, _mm512_add_pd(_mm512_add_pd(q[0], q[1]), _mm512_add_pd(q[2], q[3])));
}

FPSCOPE_AVX512 inline __m512d tree_sum(const __m512d d[8]) {
  __m512d s[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) s[k] = _mm512_add_pd(d[2 * k], d[2 * k + 1]);
  return _mm512_add_pd(_mm512_add_pd(s[0], s[1]), _mm512_add_pd(s[2], s[3]));
}

FPSCOPE_AVX512 inline void add_sums(SumLanes& sum, SumLanes& squares, const __m512d d[8]) {
  two_sum(sum, tree_sum(d));
  add_squares(squares, d);
}

// fp16 values are whole multiples of 2^-24 below 2^16 in magnitude: as doubles their sums are
// exact while they stay below 2^53 * 2^-24 = 2^29. A block's 4096 values give each of the eight
// lanes at most 512 of them (below 2^25), so the block's values are added to `exact` with plain
// additions and no rounding, and `exact` joins the (hi, lo) pair with one TwoSum per block
// (flush_exact_sum). Squares need more bits (up to 2^32 in magnitude, multiples of 2^-48): they
// take the general path.
static_assert(kBlockElements / 8 <= (std::size_t{1} << 13),
              "a lane's exact fp16 sum over a block must stay below 2^29");
FPSCOPE_AVX512 inline void add_sums_f16(__m512d& exact, SumLanes& squares, const __m512d d[8]) {
  exact = _mm512_add_pd(exact, tree_sum(d));
  add_squares(squares, d);
}

FPSCOPE_AVX512 inline void flush_exact_sum(SumLanes& sum, __m512d& exact) {
  two_sum(sum, exact);
  exact = _mm512_setzero_pd();
}

FPSCOPE_AVX512 inline void flush_sums(const SumLanes& sum, const SumLanes& squares,
                                      Accumulator& acc) {
  alignas(64) double lanes[4][8];
  _mm512_store_pd(lanes[0], sum.hi);
  _mm512_store_pd(lanes[1], sum.lo);
  _mm512_store_pd(lanes[2], squares.hi);
  _mm512_store_pd(lanes[3], squares.lo);
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    acc.sum.add(lanes[0][i]);
    acc.sum.add(lanes[1][i]);
    acc.sum_squares.add(lanes[2][i]);
    acc.sum_squares.add(lanes[3][i]);
  }
}

FPSCOPE_AVX512 inline uint64_t lane_total_u32(__m512i counts) {
  const __m512i lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(counts));
  const __m512i hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(counts, 1));
  return uint64_t(_mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi)));
}

FPSCOPE_AVX512 inline uint64_t lane_total_u16(__m512i counts) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(counts));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(counts, 1));
  return lane_total_u32(_mm512_add_epi32(lo, hi));
}

// A group's 64 lane masks as one, bit j for element j of the group.
inline uint64_t group_mask(const __mmask16 m[4]) {
  return uint64_t(m[0]) | uint64_t(m[1]) << 16 | uint64_t(m[2]) << 32 | uint64_t(m[3]) << 48;
}
inline uint64_t group_mask(const __mmask32 m[2]) { return uint64_t(m[0]) | uint64_t(m[1]) << 32; }

// [SECTION] Cast thresholds that fall inside a populated binade (see fold_block_fields): one
// compare per fast element of the block, read again while it is in L1. `special` has bit g set
// for each group g of the block that took the scalar path (already counted there).

// Counts, for P thresholds at once, the fast elements of a block with |x| bits >= each: in lanes
// of 32 bits (fp32) or of 16 (kHalf: fp16 and bf16; at most 128 per lane per block).
template <int P, bool kHalf>
FPSCOPE_AVX512 inline void count_at_least_p(const unsigned char* block, std::size_t groups,
                                            uint64_t special, const uint32_t* thresholds,
                                            uint64_t* counts) {
  const __m512i abs_mask = kHalf ? _mm512_set1_epi16(0x7FFF) : _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i one = kHalf ? _mm512_set1_epi16(1) : _mm512_set1_epi32(1);
  __m512i t[P], c[P];
#pragma GCC unroll 8
  for (int j = 0; j < P; ++j) {
    t[j] = kHalf ? _mm512_set1_epi16(int16_t(thresholds[j])) : _mm512_set1_epi32(int(thresholds[j]));
    c[j] = _mm512_setzero_si512();
  }
  constexpr int kVectors = kHalf ? 2 : 4;  // a group's
  for (std::size_t g = 0; g < groups; ++g) {
    if ((special >> g) & 1) continue;
    const unsigned char* p = block + 64 * kVectors * g;
#pragma GCC unroll 4
    for (int k = 0; k < kVectors; ++k) {
      const __m512i a = _mm512_and_si512(_mm512_loadu_si512(p + 64 * k), abs_mask);
#pragma GCC unroll 8
      for (int j = 0; j < P; ++j) {
        if constexpr (kHalf)
          c[j] = _mm512_mask_add_epi16(c[j], _mm512_cmpge_epu16_mask(a, t[j]), c[j], one);
        else
          c[j] = _mm512_mask_add_epi32(c[j], _mm512_cmpge_epu32_mask(a, t[j]), c[j], one);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < P; ++j) counts[j] = kHalf ? lane_total_u16(c[j]) : lane_total_u32(c[j]);
}

// Up to eight thresholds per pass over the block (a threshold and a counter each take a register).
template <bool kHalf>
FPSCOPE_AVX512 void count_at_least(const unsigned char* block, std::size_t groups, uint64_t special,
                                   const uint32_t* thresholds, int k, uint64_t* counts) {
  constexpr int kPerPass = 8;
  for (int i = 0; i < k; i += kPerPass) {
    const auto run = [&]<int P>() { count_at_least_p<P, kHalf>(block, groups, special, thresholds + i, counts + i); };
    [&]<int... P>(std::integer_sequence<int, P...>) {
      const int p = std::min(k - i, kPerPass);
      ((p == P + 1 ? run.template operator()<P + 1>() : void()), ...);
    }(std::make_integer_sequence<int, kPerPass>{});
  }
}

// [SECTION] Exponent histogram: counts a block's buffer of exponent fields (vector_common.h).
// A block's values usually span a few dozen binades at most: with GFNI, BITALG and VBMI, all of
// them in one pass (count_windows); without, one compare and a mask popcount per 64 fields and
// binade between the block's smallest field and its largest. A block spanning more than
// kMaxVectorFieldRange binades, where neither would pay, goes to the scalar counter.

// The windowed count maps the span's fields to 1..63 (zero to 0), so it takes at most 63 binades
// (the compare-per-binade path keeps the same limit).
inline constexpr int kMaxVectorFieldRange = 63;

// With GFNI, BITALG and VBMI, every binade of the span in one pass over the fields, eight per
// window of counters: a field becomes its place in the span, 1..63 (a saturating subtract makes
// zero, and zero alone, 0); for each window a byte permute (VPERMB, a 64-entry table) turns that
// place into a one-hot byte (bit j for the window's bin j, nothing outside the window), an affine
// transform over GF(2) transposes each 8x8 bit matrix of eight such bytes, so that byte j of a
// quadword holds bin j's bits for those eight fields, and a byte popcount counts them.
#define FPSCOPE_AVX512_GFNI                                                                       \
  __attribute__((target(                                                                          \
      "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512bitalg,avx512vbmi,gfni,avx2")))

// kOneHot[64 + j] = 1 << j for j < 8, every other byte 0: window w's table starts at 63 - 8w, so
// that its entry p is 1 << (p - 1 - 8w) for the places p of the window, 8w + 1 .. 8w + 8.
alignas(64) inline constexpr uint8_t kOneHot[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 128};

template <int W>
FPSCOPE_AVX512_GFNI void count_windows(const uint8_t* field, std::size_t n, int first, int last,
                                       uint32_t h[256]) {
  const __m512i transpose = _mm512_set1_epi64(0x8040201008040201);
  const __m512i below_first = _mm512_set1_epi8(char(first - 1));
  __m512i table[W], count[W], wide[W];  // wide: 16-bit lanes, lane 8q + j adds up bin j
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) {
    table[w] = _mm512_loadu_si512(kOneHot + 63 - 8 * w);
    wide[w] = _mm512_setzero_si512();
  }
  std::size_t i = 0;
  while (i < n) {
    // At most 8 per byte per step: 31 steps stay below 256.
    const std::size_t end = std::min(n, i + 31 * 64);
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) count[w] = _mm512_setzero_si512();
    for (; i < end; i += 64) {
      const __m512i place = _mm512_subs_epu8(_mm512_loadu_si512(field + i), below_first);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) {
        const __m512i bits = _mm512_permutexvar_epi8(place, table[w]);
        const __m512i by_bin = _mm512_gf2p8affine_epi64_epi8(transpose, bits, 0);
        count[w] = _mm512_add_epi8(count[w], _mm512_popcnt_epi8(by_bin));
      }
    }
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w)
      wide[w] = _mm512_add_epi16(
          wide[w], _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(count[w])),
                                    _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(count[w], 1))));
  }
  // A block has at most kBlockElements fields: each bin's total fits 16 bits.
  static_assert(kBlockElements <= 0xFFFF);
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) {
    const __m256i half = _mm256_add_epi16(_mm512_castsi512_si256(wide[w]),
                                          _mm512_extracti64x4_epi64(wide[w], 1));
    alignas(16) uint16_t bins[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(bins),
                    _mm_add_epi16(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1)));
    for (int j = 0; j < 8 && first + 8 * w + j <= last; ++j) h[first + 8 * w + j] = bins[j];
  }
}

// The windowed count for a span of last - first + 1 <= 63 fields: one to eight windows.
FPSCOPE_AVX512_GFNI inline void count_field_windows(const uint8_t* field, std::size_t n, int first,
                                             int last, uint32_t h[256]) {
  const int windows = (last - first + 8) / 8;
  [&]<int... W>(std::integer_sequence<int, W...>) {
    ((windows == W + 1 ? count_windows<W + 1>(field, n, first, last, h) : void()), ...);
  }(std::make_integer_sequence<int, 8>{});
}

// The smallest of 64 unsigned bytes: fold to 16, widen to words, PHMINPOSUW.
FPSCOPE_AVX512 inline int min_byte(__m512i v) {
  __m256i m = _mm256_min_epu8(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i x = _mm_min_epu8(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 8));
  return _mm_extract_epi16(_mm_minpos_epu16(_mm_cvtepu8_epi16(x)), 0);
}

// Counts the fields into `h` (writing every bin in [first, last]; others may keep what they held)
// and returns the range of nonzero fields in [first, last].
FPSCOPE_AVX512 inline void count_fields(const uint8_t* field, std::size_t n, bool gfni,
                                        uint32_t h[256], int& first, int& last) {
  first = 1;
  last = 0;
  if (n == 0) return;
  // Smallest nonzero field via min(field - 1): zero wraps to 255.
  const __m512i one = _mm512_set1_epi8(1);
  __m512i lo = _mm512_set1_epi8(-1), hi = _mm512_setzero_si512();
  for (std::size_t i = 0; i < n; i += 64) {
    const __m512i f = _mm512_loadu_si512(field + i);
    lo = _mm512_min_epu8(lo, _mm512_sub_epi8(f, one));
    hi = _mm512_max_epu8(hi, f);
  }
  first = min_byte(lo) + 1;
  last = 255 - min_byte(_mm512_xor_si512(hi, _mm512_set1_epi8(-1)));  // max = 255 - min(255 - x)
  if (first > last) return;                                           // all zeros
  if (last - first >= kMaxVectorFieldRange) {
    count_fields_scalar(field, n, h);
    return;
  }
  if (gfni) {
    count_field_windows(field, n, first, last, h);
    return;
  }
  // The compare runs on the vector ports, the popcount and add on the scalar ones.
  for (int b = first; b <= last; ++b) {
    const __m512i bin = _mm512_set1_epi8(char(b));
    uint64_t c0 = 0, c1 = 0;
    std::size_t i = 0;
    for (; i + 128 <= n; i += 128) {
      c0 += uint64_t(
          __builtin_popcountll(_mm512_cmpeq_epi8_mask(_mm512_loadu_si512(field + i), bin)));
      c1 += uint64_t(
          __builtin_popcountll(_mm512_cmpeq_epi8_mask(_mm512_loadu_si512(field + i + 64), bin)));
    }
    if (i < n)
      c0 += uint64_t(
          __builtin_popcountll(_mm512_cmpeq_epi8_mask(_mm512_loadu_si512(field + i), bin)));
    h[b] = uint32_t(c0 + c1);
  }
}

// [SECTION] Extremes from the raw bits, three compares a vector.
//
// Ordered as integers, the bits of non-negative floats rise with their value, those of negative
// ones (sign set) with their magnitude, and as unsigned every negative lies above every
// non-negative. So over the fast elements (no NaN), with U the unsigned maximum and minimum and S
// the signed maximum of the bits: the smallest value is U-max if any element is negative (-0
// included, below +0), else U-min; the largest is S-max if any is non-negative, else U-min (the
// negative of least magnitude, -0 first). Three compares a vector instead of a key built with a
// shift and a ternary op before two.
struct RawExtremes {
  __m512i top_unsigned, low_unsigned, top_signed;
};

// Adds a vector's lanes to the extremes; kMasked: only the lanes set in `finite` (the others held
// a NaN or an Inf and were zeroed, vector_common.h).
template <bool kMasked>
FPSCOPE_AVX512 inline void add_extremes_32(RawExtremes& e, __m512i v, __mmask16 finite) {
  if constexpr (kMasked) {
    e.top_unsigned = _mm512_mask_max_epu32(e.top_unsigned, finite, e.top_unsigned, v);
    e.low_unsigned = _mm512_mask_min_epu32(e.low_unsigned, finite, e.low_unsigned, v);
    e.top_signed = _mm512_mask_max_epi32(e.top_signed, finite, e.top_signed, v);
  } else {
    e.top_unsigned = _mm512_max_epu32(e.top_unsigned, v);
    e.low_unsigned = _mm512_min_epu32(e.low_unsigned, v);
    e.top_signed = _mm512_max_epi32(e.top_signed, v);
  }
}

template <bool kMasked>
FPSCOPE_AVX512 inline void add_extremes_16(RawExtremes& e, __m512i v, __mmask32 finite) {
  if constexpr (kMasked) {
    e.top_unsigned = _mm512_mask_max_epu16(e.top_unsigned, finite, e.top_unsigned, v);
    e.low_unsigned = _mm512_mask_min_epu16(e.low_unsigned, finite, e.low_unsigned, v);
    e.top_signed = _mm512_mask_max_epi16(e.top_signed, finite, e.top_signed, v);
  } else {
    e.top_unsigned = _mm512_max_epu16(e.top_unsigned, v);
    e.low_unsigned = _mm512_min_epu16(e.low_unsigned, v);
    e.top_signed = _mm512_max_epi16(e.top_signed, v);
  }
}

// Folds the reduced raw extremes of `Bits` lanes into the accumulator's keys (order_key, as the
// scalar routine makes them). low_unsigned all ones (a NaN, never a fast element) means the
// kernel saw no fast element.
template <typename Bits>
inline void merge_raw_extremes(Accumulator& acc, Bits top_unsigned, Bits low_unsigned,
                               Bits top_signed, uint32_t min_nonzero) {
  constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  if (low_unsigned == Bits(~Bits(0))) {
    acc.merge_extremes(INT32_MAX, INT32_MIN, min_nonzero);
    return;
  }
  const Bits smallest = top_unsigned >= kSign ? top_unsigned : low_unsigned;
  const Bits largest = low_unsigned < kSign ? top_signed : low_unsigned;
  acc.merge_extremes(order_key(smallest), order_key(largest), min_nonzero);
}

}  // namespace fpscope::stats::avx512
