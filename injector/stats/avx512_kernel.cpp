// The AVX-512 kernel (F, BW, VL, DQ, CD; plus F16C), optionally counting exponent fields with
// GFNI, BITALG and VBMI (Kernel::Avx512Gfni). Compiled with per-function target attributes and
// run only where kernel_supported() holds. fp32 arrays are classified in 16 lanes of 32 bits;
// fp16 and bf16 arrays in 32 lanes of 16 bits, converted to wider types only for the sums and, for
// bf16 and for groups holding an fp16 subnormal, the Full level's exponent fields.
// vector_common.h describes the structure shared with the AVX2 kernel; avx512_parts.h holds the
// pieces both scans here use (sums, threshold compares, exponent fields, extremes).
//
// Index: fp32 | fp16 and bf16 | entry point
#include "avx512_parts.h"
#include "kernels.h"

namespace fpscope::stats {
namespace {

using namespace avx512;

// [SECTION] fp32: 16 lanes of 32 bits.

// Vector members are set by init functions: a default member initializer would be compiled
// without the AVX-512 target.
struct F32State {
  RawExtremes ext;
  __m512i min_nz_m1;  // min over (|x| bits - 1); zero wraps to the largest value
  SumLanes sum, squares;
};

FPSCOPE_AVX512 inline void init(F32State& st) {
  st.ext = RawExtremes{_mm512_setzero_si512(), _mm512_set1_epi32(-1), _mm512_set1_epi32(INT32_MIN)};
  st.min_nz_m1 = _mm512_set1_epi32(-1);
  st.sum = st.squares = SumLanes{_mm512_setzero_pd(), _mm512_setzero_pd()};
}

struct F32Counters {
  __m512i zero, subnormal;
  __m512i power_of_two;  // Full: the block's power-of-two probe (vector_common.h)
};

// VFPCLASSPS categories: QNaN 0x01, +Inf 0x08, -Inf 0x10, denormal 0x20, SNaN 0x80.
inline constexpr int kSpecial = 0x01 | 0x08 | 0x10 | 0x80;
inline constexpr int kSpecialFull = kSpecial | 0x20;

// kMasked: the lanes outside `finite` held a NaN or an Inf and are zeroed in `v` and `a`; they stay
// out of the extremes and the sums (their zeros are taken back out of the counts by the caller).
template <bool kFull, bool kMasked>
FPSCOPE_AVX512 inline void f32_fast_group(const unsigned char* p, const __m512i v[4],
                                          const __m512i a[4], const __mmask16 finite[4],
                                          F32State& st, F32Counters& c, uint8_t* field) {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i min_normal_m1 = _mm512_set1_epi32(int(kLayoutF32.min_normal_abs - 1));
  const __m512i probe_mask = _mm512_set1_epi32(int(kPowerOfTwoProbeMask));
#pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    add_extremes_32<kMasked>(st.ext, v[k], kMasked ? finite[k] : __mmask16(0));
    // A zeroed lane's wraps to the largest value: it changes neither the smallest nonzero
    // magnitude nor the subnormal count, and its field is a zero's.
    const __m512i am1 = _mm512_sub_epi32(a[k], one);
    st.min_nz_m1 = _mm512_min_epu32(st.min_nz_m1, am1);
    if constexpr (kFull) {
      // Zeros are the fields of 0 (subnormals took the scalar path): counted from the fields.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(field + 16 * k),
                       _mm512_cvtepi32_epi8(_mm512_srli_epi32(a[k], 23)));
      c.power_of_two = _mm512_max_epi32(c.power_of_two, _mm512_and_si512(am1, probe_mask));
    } else {
      const __mmask16 zero = _mm512_cmpeq_epi32_mask(a[k], _mm512_setzero_si512());
      c.zero = _mm512_mask_add_epi32(c.zero, zero, c.zero, one);
      const __mmask16 sub = _mm512_cmplt_epu32_mask(am1, min_normal_m1);
      c.subnormal = _mm512_mask_add_epi32(c.subnormal, sub, c.subnormal, one);
    }
  }
  __m512d d[8];
  if constexpr (kMasked) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      d[2 * k] = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(v[k])));
      d[2 * k + 1] = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(v[k], 1)));
    }
  } else {
    f32_doubles(p, d);
  }
  add_sums(st.sum, st.squares, d);
}

template <bool kFull>
FPSCOPE_AVX512 void scan_f32(const unsigned char* base, std::size_t n, bool gfni,
                             Accumulator& acc) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  F32State st;
  init(st);
  alignas(64) uint8_t field[kBlockElements];
  uint32_t h[256];  // per block: count_fields writes the bins fold_block_fields reads
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_begin = i;
    const std::size_t block_end =
        i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    F32Counters c{_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    std::size_t buffered = 0;
    uint64_t special_groups = 0;
    uint64_t nonfinite_zeroed = 0;  // NaN and Inf lanes of fast groups, zeroed there
    for (; i < block_end; i += kGroupElements) {
      __m512i v[4], a[4];
      __mmask16 special = 0;
#pragma GCC unroll 16
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm512_loadu_si512(base + 4 * (i + 16 * k));
        a[k] = _mm512_and_si512(v[k], abs_mask);
        // NaN and Inf; at the Full level also subnormals, which need an exact histogram bin.
        special |=
            _mm512_fpclass_ps_mask(_mm512_castsi512_ps(v[k]), kFull ? kSpecialFull : kSpecial);
      }
      if (special) {
        __mmask16 nonfinite[4], subnormal = 0;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          nonfinite[k] = _mm512_fpclass_ps_mask(_mm512_castsi512_ps(v[k]), kSpecial);
          if constexpr (kFull) subnormal |= _mm512_fpclass_ps_mask(_mm512_castsi512_ps(v[k]), 0x20);
        }
        if (subnormal) {
          add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, kGroupElements,
                                                             kFull ? kFullParts : 0, bits_to_double);
          special_groups |= uint64_t(1) << ((i - block_begin) / kGroupElements);
          continue;
        }
        const uint64_t any = group_mask(nonfinite);
        __mmask16 nan[4], pos_inf[4], finite[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          nan[k] = _mm512_fpclass_ps_mask(_mm512_castsi512_ps(v[k]), 0x01 | 0x80);
          pos_inf[k] = _mm512_fpclass_ps_mask(_mm512_castsi512_ps(v[k]), 0x08);
          finite[k] = __mmask16(~nonfinite[k]);
          v[k] = _mm512_maskz_mov_epi32(finite[k], v[k]);
          a[k] = _mm512_maskz_mov_epi32(finite[k], a[k]);
        }
        const uint64_t nans = group_mask(nan), pos = group_mask(pos_inf);
        add_nonfinite<uint32_t>(acc, nans, pos, any & ~nans & ~pos, base, i);
        nonfinite_zeroed += uint64_t(__builtin_popcountll(any));
        f32_fast_group<kFull, true>(base + 4 * i, v, a, finite, st, c, field + buffered);
      } else {
        f32_fast_group<kFull, false>(base + 4 * i, v, a, nullptr, st, c, field + buffered);
      }
      if constexpr (kFull) buffered += kGroupElements;
    }
    acc.zero += lane_total_u32(c.zero) - (kFull ? 0 : nonfinite_zeroed);
    acc.subnormal += lane_total_u32(c.subnormal);
    if constexpr (kFull) {
      int first, last;
      count_fields(field, buffered, gfni, h, first, last);
      const unsigned char* block = base + 4 * block_begin;
      const std::size_t groups = (block_end - block_begin) / kGroupElements;
      const bool powers_of_two =
          _mm512_reduce_max_epi32(c.power_of_two) == kPowerOfTwoProbeHit;
      const uint64_t nonzero = fold_block_fields<kThresholdsF32>(
          h, first, last, powers_of_two, acc, [&](const uint32_t* t, int k, uint64_t* counts) {
            count_at_least<false>(block, groups, special_groups, t, k, counts);
            for (int j = 0; j < k; ++j) counts[j] -= nonfinite_zeroed;  // at or above every threshold
          });
      acc.zero += buffered - nonzero - nonfinite_zeroed;
    }
  }
  const uint32_t min_nz_m1 = uint32_t(_mm512_reduce_min_epu32(st.min_nz_m1));
  merge_raw_extremes<uint32_t>(acc, uint32_t(_mm512_reduce_max_epu32(st.ext.top_unsigned)),
                              uint32_t(_mm512_reduce_min_epu32(st.ext.low_unsigned)),
                              uint32_t(_mm512_reduce_max_epi32(st.ext.top_signed)),
                              min_nz_m1 == UINT32_MAX ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, n - i, kFull ? kFullParts : 0,
                                                     bits_to_double);
}

// [SECTION] fp16 and bf16: 32 lanes of 16 bits.

// The larger (`top`) or smaller of each pair of a vector's 32 unsigned 16-bit lanes, as 16 lanes
// of 32 bits; widen_i16_max the larger of each pair as signed.
FPSCOPE_AVX512 inline __m512i widen_u16(__m512i x, bool top) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(x));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(x, 1));
  return top ? _mm512_max_epu32(lo, hi) : _mm512_min_epu32(lo, hi);
}

FPSCOPE_AVX512 inline __m512i widen_i16_max(__m512i x) {
  return _mm512_max_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(x)),
                          _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(x, 1)));
}

struct HalfState {
  RawExtremes ext;
  __m512i min_nz_m1;
  SumLanes sum, squares;
  __m512d exact;  // fp16: the block's sum so far, exact (add_sums_f16)
};

FPSCOPE_AVX512 inline void init(HalfState& st) {
  st.ext = RawExtremes{_mm512_setzero_si512(), _mm512_set1_epi16(-1), _mm512_set1_epi16(INT16_MIN)};
  st.min_nz_m1 = _mm512_set1_epi16(-1);
  st.sum = st.squares = SumLanes{_mm512_setzero_pd(), _mm512_setzero_pd()};
  st.exact = _mm512_setzero_pd();
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

// Exponent fields (as fp32) of 64 finite values, no bf16 subnormals among them, into `out`, in an
// order of the packing's choosing (the histogram does not care). bf16 has fp32's exponent field;
// a normal fp16 value's field is its own rebiased. An fp16 subnormal's field depends on its
// leading bit: a group holding one takes its fields from the widened floats `f`.
template <ElementType kType>
FPSCOPE_AVX512 inline void half_fields(const __m512i v[2], const __m512i a[2], bool has_subnormal,
                                       const __m512 f[4], uint8_t* out) {
  __m512i w[2];
  if constexpr (kType == ElementType::BF16) {
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) w[k] = _mm512_srli_epi16(_mm512_slli_epi16(v[k], 1), 8);
  } else if (!has_subnormal) {
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k)  // zero keeps field 0
      w[k] = _mm512_maskz_add_epi16(_mm512_test_epi16_mask(a[k], a[k]),
                                    _mm512_srli_epi16(a[k], 10), _mm512_set1_epi16(127 - 15));
  } else {
    __m512i d[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      d[j] = _mm512_srli_epi32(_mm512_slli_epi32(_mm512_castps_si512(f[j]), 1), 24);
    w[0] = _mm512_packus_epi32(d[0], d[1]);
    w[1] = _mm512_packus_epi32(d[2], d[3]);
  }
  _mm512_storeu_si512(out, _mm512_packus_epi16(w[0], w[1]));
}

// kMasked as for f32_fast_group.
template <ElementType kType, const SourceLayout& S, const ThresholdTable& T, bool kFull, bool kMasked>
FPSCOPE_AVX512 inline void half_fast_group(const unsigned char* p, const __m512i v[2],
                                           const __m512i a[2], const __mmask32 finite[2],
                                           HalfState& st, __m512i& zero_count, __m512i& sub_count,
                                           uint8_t* field) {
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i min_normal_m1 = _mm512_set1_epi16(int16_t(S.min_normal_abs - 1));
  __m512 f[4];
  __mmask32 any_sub = 0;
#pragma GCC unroll 16
  for (int k = 0; k < 2; ++k) {
    add_extremes_16<kMasked>(st.ext, v[k], kMasked ? finite[k] : __mmask32(0));
    const __m512i am1 = _mm512_sub_epi16(a[k], one);  // a zeroed lane's wraps, as for fp32
    st.min_nz_m1 = _mm512_min_epu16(st.min_nz_m1, am1);
    if constexpr (!kFull) {  // at the Full level zeros are the fields of 0, counted from them
      const __mmask32 zero = _mm512_cmpeq_epi16_mask(a[k], _mm512_setzero_si512());
      zero_count = _mm512_mask_add_epi16(zero_count, zero, zero_count, one);
    }
    if constexpr (!(kFull && kType == ElementType::BF16)) {  // else no subnormal gets here
      const __mmask32 sub = _mm512_cmplt_epu16_mask(am1, min_normal_m1);
      sub_count = _mm512_mask_add_epi16(sub_count, sub, sub_count, one);
      any_sub |= sub;
    }
  }
  // bf16 needs floats for the sums; fp16 only for the fields of a group with a subnormal, and for
  // the sums of a group whose memory still holds the lanes zeroed here.
  const bool widened = kType == ElementType::BF16 || kMasked || (kFull && any_sub != 0);
  if (widened) {
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) widen<kType>(v[k], f[2 * k], f[2 * k + 1]);
  }
  if constexpr (kFull) half_fields<kType>(v, a, any_sub != 0, f, field);
  __m512d d[8];
  if constexpr (kType == ElementType::F16) {
    if constexpr (kMasked)
      float_doubles(f, d);
    else
      f16_doubles(p, d);
    add_sums_f16(st.exact, st.squares, d);
  } else {
    float_doubles(f, d);
    add_sums(st.sum, st.squares, d);
  }
}

template <ElementType kType, const SourceLayout& S, const ThresholdTable& T, bool kFull>
FPSCOPE_AVX512 void scan_half(const unsigned char* base, std::size_t n, bool gfni,
                              Accumulator& acc) {
  const auto to_double = kType == ElementType::F16 ? f16_bits_to_double : bf16_bits_to_double;
  const __m512i abs_mask = _mm512_set1_epi16(0x7FFF);
  const __m512i inf = _mm512_set1_epi16(int16_t(S.inf_abs));
  const __m512i min_normal = _mm512_set1_epi16(int16_t(S.min_normal_abs));
  // bf16 subnormals are fp32 subnormals: at the Full level they take the scalar path.
  constexpr bool kSubnormalIsSpecial = kFull && kType == ElementType::BF16;
  HalfState st;
  init(st);
  alignas(64) uint8_t field[kBlockElements];
  uint32_t h[256];  // per block: count_fields writes the bins fold_block_fields reads
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_begin = i;
    const std::size_t block_end =
        i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    __m512i zero_count = _mm512_setzero_si512(), sub_count = _mm512_setzero_si512();
    std::size_t buffered = 0;
    uint64_t special_groups = 0;
    uint64_t nonfinite_zeroed = 0;  // NaN and Inf lanes of fast groups, zeroed there
    for (; i < block_end; i += kGroupElements) {
      __m512i v[2], a[2];
      __mmask32 special = 0;
#pragma GCC unroll 16
      for (int k = 0; k < 2; ++k) {
        v[k] = _mm512_loadu_si512(base + 2 * (i + 32 * k));
        a[k] = _mm512_and_si512(v[k], abs_mask);
        special |= _mm512_cmpge_epu16_mask(a[k], inf);
        if constexpr (kSubnormalIsSpecial)
          special |=
              _mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(a[k], a[k]), a[k], min_normal);
      }
      if (special) {
        __mmask32 nonfinite[2], subnormal = 0;
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          nonfinite[k] = _mm512_cmpge_epu16_mask(a[k], inf);
          if constexpr (kSubnormalIsSpecial)
            subnormal |=
                _mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(a[k], a[k]), a[k], min_normal);
        }
        if (subnormal) {
          add_elements<S, T, uint16_t>(acc, base, i, kGroupElements, kFull ? kFullParts : 0,
                                       to_double);
          special_groups |= uint64_t(1) << ((i - block_begin) / kGroupElements);
          continue;
        }
        const uint64_t any = group_mask(nonfinite);
        __mmask32 nan[2], pos_inf[2], finite[2];
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          nan[k] = _mm512_cmpgt_epu16_mask(a[k], inf);
          pos_inf[k] = _mm512_cmpeq_epi16_mask(v[k], inf);
          finite[k] = __mmask32(~nonfinite[k]);
          v[k] = _mm512_maskz_mov_epi16(finite[k], v[k]);
          a[k] = _mm512_maskz_mov_epi16(finite[k], a[k]);
        }
        const uint64_t nans = group_mask(nan), pos = group_mask(pos_inf);
        add_nonfinite<uint16_t>(acc, nans, pos, any & ~nans & ~pos, base, i);
        nonfinite_zeroed += uint64_t(__builtin_popcountll(any));
        half_fast_group<kType, S, T, kFull, true>(base + 2 * i, v, a, finite, st, zero_count,
                                                  sub_count, field + buffered);
      } else {
        half_fast_group<kType, S, T, kFull, false>(base + 2 * i, v, a, nullptr, st, zero_count,
                                                   sub_count, field + buffered);
      }
      if constexpr (kFull) buffered += kGroupElements;
    }
    if constexpr (kType == ElementType::F16) flush_exact_sum(st.sum, st.exact);
    acc.zero += lane_total_u16(zero_count) - (kFull ? 0 : nonfinite_zeroed);
    acc.subnormal += lane_total_u16(sub_count);
    if constexpr (kFull) {
      int first, last;
      count_fields(field, buffered, gfni, h, first, last);
      const unsigned char* block = base + 2 * block_begin;
      const std::size_t groups = (block_end - block_begin) / kGroupElements;
      // Taken to hold a power of two (vector_common.h).
      const uint64_t nonzero = fold_block_fields<T>(h, first, last, true, acc,
                                                    [&](const uint32_t* t, int k, uint64_t* counts) {
                                                      count_at_least<true>(block, groups, special_groups, t, k, counts);
                                                      for (int j = 0; j < k; ++j) counts[j] -= nonfinite_zeroed;
                                                    });
      acc.zero += buffered - nonzero - nonfinite_zeroed;
    }
  }
  const __m512i nz_lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(st.min_nz_m1));
  const __m512i nz_hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(st.min_nz_m1, 1));
  const uint32_t min_nz_m1 = uint32_t(_mm512_reduce_min_epu32(_mm512_min_epu32(nz_lo, nz_hi)));
  merge_raw_extremes<uint16_t>(
      acc, uint16_t(_mm512_reduce_max_epu32(widen_u16(st.ext.top_unsigned, true))),
      uint16_t(_mm512_reduce_min_epu32(widen_u16(st.ext.low_unsigned, false))),
      uint16_t(_mm512_reduce_max_epi32(widen_i16_max(st.ext.top_signed))),
      min_nz_m1 == 0xFFFF ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<S, T, uint16_t>(acc, base, i, n - i, kFull ? kFullParts : 0, to_double);
}

}  // namespace

void scan_avx512(const void* data, ElementType type, std::size_t n, StatsLevel level, bool gfni,
                 Accumulator& acc) {
  const auto* base = static_cast<const unsigned char*>(data);
  const bool full = level == StatsLevel::Full;
  switch (type) {
    case ElementType::F32:
      full ? scan_f32<true>(base, n, gfni, acc) : scan_f32<false>(base, n, gfni, acc);
      break;
    case ElementType::F16:
      full ? scan_half<ElementType::F16, kLayoutF16, kThresholdsF16, true>(base, n, gfni, acc)
           : scan_half<ElementType::F16, kLayoutF16, kThresholdsF16, false>(base, n, gfni, acc);
      break;
    case ElementType::BF16:
      full ? scan_half<ElementType::BF16, kLayoutBF16, kThresholdsBF16, true>(base, n, gfni, acc)
           : scan_half<ElementType::BF16, kLayoutBF16, kThresholdsBF16, false>(base, n, gfni, acc);
      break;
    case ElementType::F64:  // fp64 tensors are rare: the portable kernel scans them
      scan_scalar(data, type, n, level, acc);
      break;
    default:  // the 8-bit formats reach no kernel (kernels.h)
      break;
  }
}

}  // namespace fpscope::stats
