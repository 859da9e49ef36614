// The AVX-512 kernel (F, BW, VL, DQ; plus F16C). Compiled with per-function target attributes and
// run only where kernel_supported(Kernel::Avx512) holds. fp32 arrays are classified in 16 lanes of
// 32 bits; fp16 and bf16 arrays in 32 lanes of 16 bits, widened only for the sums and (fp16) the
// histogram index. vector_common.h describes the structure shared with the AVX2 kernel.
#include <immintrin.h>

#include <algorithm>

#include "kernels.h"
#include "vector_common.h"

#define FPSCOPE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx2")))

namespace fpscope::stats {
namespace {

// [SECTION] Sums: 64 values as four vectors of 16 floats, added as doubles.

struct SumLanes {
  __m512d hi, lo;
};

// TwoSum per lane: hi + lo absorbs x with lo taking the exact rounding error of hi + x.
FPSCOPE_AVX512 inline void two_sum(SumLanes& s, __m512d x) {
  const __m512d sum = _mm512_add_pd(s.hi, x);
  const __m512d bp = _mm512_sub_pd(sum, s.hi);
  const __m512d err = _mm512_add_pd(_mm512_sub_pd(s.hi, _mm512_sub_pd(sum, bp)),
                                    _mm512_sub_pd(x, bp));
  s.hi = sum;
  s.lo = _mm512_add_pd(s.lo, err);
}

// Adds 64 finite floats: a depth-3 tree of double additions (squares exact, combined with FMA),
// then one TwoSum per accumulator. Every value passes through at most three roundings.
FPSCOPE_AVX512 inline void add_sums(SumLanes& sum, SumLanes& squares, const __m512 f[4]) {
  __m512d d[8];
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = _mm512_cvtps_pd(_mm512_castps512_ps256(f[k]));
    d[2 * k + 1] = _mm512_cvtps_pd(
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f[k]), 1)));
  }
  __m512d s[4], q[4];
  for (int k = 0; k < 4; ++k) {
    s[k] = _mm512_add_pd(d[2 * k], d[2 * k + 1]);
    q[k] = _mm512_fmadd_pd(d[2 * k], d[2 * k], _mm512_mul_pd(d[2 * k + 1], d[2 * k + 1]));
  }
  two_sum(sum, _mm512_add_pd(_mm512_add_pd(s[0], s[1]), _mm512_add_pd(s[2], s[3])));
  two_sum(squares, _mm512_add_pd(_mm512_add_pd(q[0], q[1]), _mm512_add_pd(q[2], q[3])));
}

FPSCOPE_AVX512 inline void flush_sums(const SumLanes& sum, const SumLanes& squares,
                                      Accumulator& acc) {
  alignas(64) double lanes[4][8];
  _mm512_store_pd(lanes[0], sum.hi);
  _mm512_store_pd(lanes[1], sum.lo);
  _mm512_store_pd(lanes[2], squares.hi);
  _mm512_store_pd(lanes[3], squares.lo);
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

// [SECTION] fp32: 16 lanes of 32 bits.

// Vector members are set by init functions: a default member initializer would be compiled
// without the AVX-512 target.
struct F32State {
  __m512i min_key, max_key;
  __m512i min_nz_m1;  // min over (|x| bits - 1); zero wraps to the largest value
  SumLanes sum, squares;
};

FPSCOPE_AVX512 inline void init(F32State& st) {
  st.min_key = _mm512_set1_epi32(INT32_MAX);
  st.max_key = _mm512_set1_epi32(INT32_MIN);
  st.min_nz_m1 = _mm512_set1_epi32(-1);
  st.sum = st.squares = SumLanes{_mm512_setzero_pd(), _mm512_setzero_pd()};
}

struct F32Counters {
  __m512i zero, subnormal;
  __m512i at_least[kMaxThresholds];
};

FPSCOPE_AVX512 inline void init(F32Counters& c) {
  c.zero = c.subnormal = _mm512_setzero_si512();
  for (__m512i& t : c.at_least) t = _mm512_setzero_si512();
}

template <bool kFull>
FPSCOPE_AVX512 inline void f32_fast_group(const __m512i v[4], const __m512i a[4], F32State& st,
                                          F32Counters& c, uint16_t* hist_index) {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i min_normal_m1 = _mm512_set1_epi32(int(kLayoutF32.min_normal_abs - 1));
  __m512 f[4];
  for (int k = 0; k < 4; ++k) {
    const __m512i key = _mm512_xor_si512(v[k], _mm512_srli_epi32(_mm512_srai_epi32(v[k], 31), 1));
    st.min_key = _mm512_min_epi32(st.min_key, key);
    st.max_key = _mm512_max_epi32(st.max_key, key);
    const __m512i am1 = _mm512_sub_epi32(a[k], one);
    st.min_nz_m1 = _mm512_min_epu32(st.min_nz_m1, am1);
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(a[k], _mm512_setzero_si512());
    c.zero = _mm512_mask_add_epi32(c.zero, zero, c.zero, one);
    if constexpr (kFull) {
      for (int t = 0; t < kThresholdsF32.count; ++t) {
        const __mmask16 m =
            _mm512_cmpge_epu32_mask(a[k], _mm512_set1_epi32(int(kThresholdsF32.value[t])));
        c.at_least[t] = _mm512_mask_add_epi32(c.at_least[t], m, c.at_least[t], one);
      }
      // Normal or zero here: index = exponent field + 23, or 0 for zero (min picks |x| bits).
      const __m512i idx = _mm512_min_epu32(
          _mm512_add_epi32(_mm512_srli_epi32(a[k], 23), _mm512_set1_epi32(23)), a[k]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(hist_index + 16 * k),
                          _mm512_cvtepi32_epi16(idx));
    } else {
      const __mmask16 sub = _mm512_cmplt_epu32_mask(am1, min_normal_m1);
      c.subnormal = _mm512_mask_add_epi32(c.subnormal, sub, c.subnormal, one);
    }
    f[k] = _mm512_castsi512_ps(v[k]);
  }
  add_sums(st.sum, st.squares, f);
}

template <bool kFull>
FPSCOPE_AVX512 void scan_f32(const unsigned char* base, std::size_t n, Accumulator& acc) {
  constexpr int K = kThresholdsF32.count;
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i inf = _mm512_set1_epi32(int(kLayoutF32.inf_abs));
  const __m512i min_normal = _mm512_set1_epi32(int(kLayoutF32.min_normal_abs));
  F32State st;
  init(st);
  SubHistograms hist;
  alignas(64) uint16_t hist_index[kBlockElements];
  if constexpr (kFull) hist.clear();
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_end = i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    F32Counters c;
    init(c);
    std::size_t buffered = 0;
    for (; i < block_end; i += kGroupElements) {
      __m512i v[4], a[4];
      __mmask16 special = 0;
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm512_loadu_si512(base + 4 * (i + 16 * k));
        a[k] = _mm512_and_si512(v[k], abs_mask);
        special |= _mm512_cmpge_epu32_mask(a[k], inf);
        // At the Full level subnormals need an exact histogram bin: take the scalar path.
        if constexpr (kFull)
          special |= _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(a[k], a[k]), a[k], min_normal);
      }
      if (special) {
        add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, kGroupElements, kFull,
                                                            bits_to_double);
        continue;
      }
      f32_fast_group<kFull>(v, a, st, c, hist_index + buffered);
      if constexpr (kFull) buffered += kGroupElements;
    }
    acc.zero += lane_total_u32(c.zero);
    acc.subnormal += lane_total_u32(c.subnormal);
    if constexpr (kFull) {
      for (int t = 0; t < K; ++t) acc.at_least[t] += lane_total_u32(c.at_least[t]);
      hist.count(hist_index, buffered, acc);
    }
  }
  if constexpr (kFull) hist.flush(acc);
  const uint32_t min_nz_m1 = uint32_t(_mm512_reduce_min_epu32(st.min_nz_m1));
  acc.merge_extremes(_mm512_reduce_min_epi32(st.min_key), _mm512_reduce_max_epi32(st.max_key),
                     min_nz_m1 == UINT32_MAX ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, n - i, kFull, bits_to_double);
}

// [SECTION] fp16 and bf16: 32 lanes of 16 bits.

struct HalfState {
  __m512i min_key, max_key, min_nz_m1;
  SumLanes sum, squares;
};

FPSCOPE_AVX512 inline void init(HalfState& st) {
  st.min_key = _mm512_set1_epi16(INT16_MAX);
  st.max_key = _mm512_set1_epi16(INT16_MIN);
  st.min_nz_m1 = _mm512_set1_epi16(-1);
  st.sum = st.squares = SumLanes{_mm512_setzero_pd(), _mm512_setzero_pd()};
}

// The 32 lanes of `v` as two vectors of 16 floats (lane order is irrelevant to sums).
template <ElementType kType>
FPSCOPE_AVX512 inline void widen(__m512i v, __m512& lo, __m512& hi) {
  if constexpr (kType == ElementType::F16) {
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
  } else {
    lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
    hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
  }
}

// Histogram indices of 32 finite values (no bf16 subnormals) into `out`.
template <ElementType kType>
FPSCOPE_AVX512 inline void half_hist_index(__m512i a, __mmask32 nonzero, __m512 lo, __m512 hi,
                                           uint16_t* out) {
  if constexpr (kType == ElementType::BF16) {
    const __m512i idx = _mm512_maskz_add_epi16(nonzero, _mm512_srli_epi16(a, 7),
                                               _mm512_set1_epi16(23));
    _mm512_storeu_si512(out, idx);
  } else {
    // fp16 values (subnormals included) are normal fp32 values: index from the fp32 exponent.
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i bias = _mm512_set1_epi32(23);
    const __m512i alo = _mm512_and_si512(_mm512_castps_si512(lo), abs_mask);
    const __m512i ahi = _mm512_and_si512(_mm512_castps_si512(hi), abs_mask);
    const __m512i ilo = _mm512_min_epu32(_mm512_add_epi32(_mm512_srli_epi32(alo, 23), bias), alo);
    const __m512i ihi = _mm512_min_epu32(_mm512_add_epi32(_mm512_srli_epi32(ahi, 23), bias), ahi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(ilo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm512_cvtepi32_epi16(ihi));
  }
  (void)a;
  (void)nonzero;
}

template <ElementType kType, const SourceLayout& S, const ThresholdTable& T, bool kFull>
FPSCOPE_AVX512 inline void half_fast_group(const __m512i v[2], const __m512i a[2], HalfState& st,
                                           __m512i& zero_count, __m512i& sub_count,
                                           __m512i* at_least, uint16_t* hist_index) {
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i min_normal_m1 = _mm512_set1_epi16(int16_t(S.min_normal_abs - 1));
  __m512 f[4];
  for (int k = 0; k < 2; ++k) {
    const __m512i key = _mm512_xor_si512(v[k], _mm512_srli_epi16(_mm512_srai_epi16(v[k], 15), 1));
    st.min_key = _mm512_min_epi16(st.min_key, key);
    st.max_key = _mm512_max_epi16(st.max_key, key);
    const __m512i am1 = _mm512_sub_epi16(a[k], one);
    st.min_nz_m1 = _mm512_min_epu16(st.min_nz_m1, am1);
    const __mmask32 zero = _mm512_cmpeq_epi16_mask(a[k], _mm512_setzero_si512());
    zero_count = _mm512_mask_add_epi16(zero_count, zero, zero_count, one);
    if constexpr (!(kFull && kType == ElementType::BF16)) {  // else no subnormal gets here
      const __mmask32 sub = _mm512_cmplt_epu16_mask(am1, min_normal_m1);
      sub_count = _mm512_mask_add_epi16(sub_count, sub, sub_count, one);
    }
    widen<kType>(v[k], f[2 * k], f[2 * k + 1]);
    if constexpr (kFull) {
      for (int t = 0; t < T.count; ++t) {
        const __mmask32 m = _mm512_cmpge_epu16_mask(a[k], _mm512_set1_epi16(int16_t(T.value[t])));
        at_least[t] = _mm512_mask_add_epi16(at_least[t], m, at_least[t], one);
      }
      half_hist_index<kType>(a[k], __mmask32(~zero), f[2 * k], f[2 * k + 1], hist_index + 32 * k);
    }
  }
  add_sums(st.sum, st.squares, f);
}

template <ElementType kType, const SourceLayout& S, const ThresholdTable& T, bool kFull>
FPSCOPE_AVX512 void scan_half(const unsigned char* base, std::size_t n, Accumulator& acc) {
  const auto to_double = kType == ElementType::F16 ? f16_bits_to_double : bf16_bits_to_double;
  const __m512i abs_mask = _mm512_set1_epi16(0x7FFF);
  const __m512i inf = _mm512_set1_epi16(int16_t(S.inf_abs));
  const __m512i min_normal = _mm512_set1_epi16(int16_t(S.min_normal_abs));
  // bf16 subnormals are fp32 subnormals: at the Full level they take the scalar path.
  constexpr bool kSubnormalIsSpecial = kFull && kType == ElementType::BF16;
  HalfState st;
  init(st);
  SubHistograms hist;
  alignas(64) uint16_t hist_index[kBlockElements];
  if constexpr (kFull) hist.clear();
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_end = i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    __m512i zero_count = _mm512_setzero_si512(), sub_count = _mm512_setzero_si512();
    __m512i at_least[kMaxThresholds];
    for (int t = 0; t < T.count; ++t) at_least[t] = _mm512_setzero_si512();
    std::size_t buffered = 0;
    for (; i < block_end; i += kGroupElements) {
      __m512i v[2], a[2];
      __mmask32 special = 0;
      for (int k = 0; k < 2; ++k) {
        v[k] = _mm512_loadu_si512(base + 2 * (i + 32 * k));
        a[k] = _mm512_and_si512(v[k], abs_mask);
        special |= _mm512_cmpge_epu16_mask(a[k], inf);
        if constexpr (kSubnormalIsSpecial)
          special |= _mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(a[k], a[k]), a[k], min_normal);
      }
      if (special) {
        add_elements<S, T, uint16_t>(acc, base, i, kGroupElements, kFull, to_double);
        continue;
      }
      half_fast_group<kType, S, T, kFull>(v, a, st, zero_count, sub_count, at_least,
                                          hist_index + buffered);
      if constexpr (kFull) buffered += kGroupElements;
    }
    acc.zero += lane_total_u16(zero_count);
    acc.subnormal += lane_total_u16(sub_count);
    if constexpr (kFull) {
      for (int t = 0; t < T.count; ++t) acc.at_least[t] += lane_total_u16(at_least[t]);
      hist.count(hist_index, buffered, acc);
    }
  }
  if constexpr (kFull) hist.flush(acc);
  const __m512i min_lo = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(st.min_key));
  const __m512i min_hi = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(st.min_key, 1));
  const __m512i max_lo = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(st.max_key));
  const __m512i max_hi = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(st.max_key, 1));
  const __m512i nz_lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(st.min_nz_m1));
  const __m512i nz_hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(st.min_nz_m1, 1));
  const uint32_t min_nz_m1 = uint32_t(_mm512_reduce_min_epu32(_mm512_min_epu32(nz_lo, nz_hi)));
  acc.merge_extremes(_mm512_reduce_min_epi32(_mm512_min_epi32(min_lo, min_hi)),
                     _mm512_reduce_max_epi32(_mm512_max_epi32(max_lo, max_hi)),
                     min_nz_m1 == 0xFFFF ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<S, T, uint16_t>(acc, base, i, n - i, kFull, to_double);
}

}  // namespace

void scan_avx512(const void* data, ElementType type, std::size_t n, StatsLevel level,
                 Accumulator& acc) {
  const auto* base = static_cast<const unsigned char*>(data);
  const bool full = level == StatsLevel::Full;
  switch (type) {
    case ElementType::F32:
      full ? scan_f32<true>(base, n, acc) : scan_f32<false>(base, n, acc);
      break;
    case ElementType::F16:
      full ? scan_half<ElementType::F16, kLayoutF16, kThresholdsF16, true>(base, n, acc)
           : scan_half<ElementType::F16, kLayoutF16, kThresholdsF16, false>(base, n, acc);
      break;
    case ElementType::BF16:
      full ? scan_half<ElementType::BF16, kLayoutBF16, kThresholdsBF16, true>(base, n, acc)
           : scan_half<ElementType::BF16, kLayoutBF16, kThresholdsBF16, false>(base, n, acc);
      break;
  }
}

}  // namespace fpscope::stats
