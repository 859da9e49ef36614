// The AVX2 kernel (with F16C and FMA), for CPUs without AVX-512. Same structure as the AVX-512
// kernel (vector_common.h): groups of 64 elements, NaN and Inf lanes counted from compares and
// zeroed, groups with a subnormal at the Full level to the scalar routine, per-lane counters
// flushed per block, exponent fields counted per block. Without mask registers, compares
// yield all-ones lanes that are subtracted from counters; all compared magnitudes are below 2^31
// (2^15 for 16-bit formats), so signed compares order them correctly. avx2_parts.h holds the
// pieces both scans here use.
//
// Index: fp32 | fp16 and bf16 | entry point
#include "avx2_parts.h"
#include "kernels.h"

namespace fpscope::stats {
namespace {

using namespace avx2;

// [SECTION] fp32: 8 lanes of 32 bits, a group is 8 vectors.

// kMasked: the all-ones lanes of `nonfinite` held a NaN or an Inf and are zeroed in `v` and `a`;
// they stay out of the extremes and the sums (their zeros are taken back out by the caller).
template <bool kFull, bool kMasked>
FPSCOPE_AVX2 inline void f32_fast_group(const unsigned char* p, const __m256i v[8],
                                        const __m256i a[8], const __m256i nonfinite[8], State& st,
                                        uint8_t* field) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i min_normal = _mm256_set1_epi32(int(kLayoutF32.min_normal_abs));
  const __m256i probe_mask = _mm256_set1_epi32(int(kPowerOfTwoProbeMask));
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i key =
        _mm256_xor_si256(v[k], _mm256_and_si256(_mm256_srai_epi32(v[k], 31), abs_mask));
    add_keys<32, kMasked>(st, key, kMasked ? nonfinite[k] : _mm256_setzero_si256());
    const __m256i am1 = _mm256_sub_epi32(a[k], one);  // a zeroed lane's wraps: no smallest nonzero
    st.min_nz_m1 = _mm256_min_epu32(st.min_nz_m1, am1);
    const __m256i zero = _mm256_cmpeq_epi32(a[k], _mm256_setzero_si256());
    st.zero = _mm256_sub_epi32(st.zero, zero);
    if constexpr (kFull)
      st.power_of_two = _mm256_max_epi32(st.power_of_two, _mm256_and_si256(am1, probe_mask));
    if constexpr (!kFull) {  // at the Full level subnormal groups went scalar
      const __m256i sub = _mm256_andnot_si256(zero, _mm256_cmpgt_epi32(min_normal, a[k]));
      st.subnormal = _mm256_sub_epi32(st.subnormal, sub);
    }
  }
  if constexpr (kFull) {
    // Fields in any order (the histogram does not care): pack 64 dwords to 64 bytes.
    __m256i f[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) f[k] = _mm256_srli_epi32(a[k], 23);
    const __m256i w0 = _mm256_packus_epi32(f[0], f[1]), w1 = _mm256_packus_epi32(f[2], f[3]);
    const __m256i w2 = _mm256_packus_epi32(f[4], f[5]), w3 = _mm256_packus_epi32(f[6], f[7]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(field), _mm256_packus_epi16(w0, w1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(field + 32), _mm256_packus_epi16(w2, w3));
  }
  __m256d d[8];
  if constexpr (kMasked) {  // from the zeroed lanes, not from memory
    const __m256 f[8] = {_mm256_castsi256_ps(v[0]), _mm256_castsi256_ps(v[1]), _mm256_castsi256_ps(v[2]),
                         _mm256_castsi256_ps(v[3]), _mm256_castsi256_ps(v[4]), _mm256_castsi256_ps(v[5]),
                         _mm256_castsi256_ps(v[6]), _mm256_castsi256_ps(v[7])};
    float_doubles(f, d);
    add_sums(st.sum, st.squares, d);
    float_doubles(f + 4, d);
    add_sums(st.sum, st.squares, d);
  } else {
    f32_doubles(p, d);
    add_sums(st.sum, st.squares, d);
    f32_doubles(p + 128, d);
    add_sums(st.sum, st.squares, d);
  }
}

template <bool kFull>
FPSCOPE_AVX2 void scan_f32(const unsigned char* base, std::size_t n, Accumulator& acc) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf_m1 = _mm256_set1_epi32(int(kLayoutF32.inf_abs - 1));
  const __m256i min_normal = _mm256_set1_epi32(int(kLayoutF32.min_normal_abs));
  const __m256i zero = _mm256_setzero_si256();
  constexpr unsigned kParts = kFull ? kFullParts : 0;
  State st;
  init<32>(st);
  alignas(32) uint8_t field[kBlockElements];
  uint32_t h[256];  // per block: count_fields writes the bins fold_block_fields reads
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_begin = i;
    const std::size_t block_end =
        i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    std::size_t buffered = 0;
    uint64_t special_groups = 0;
    uint64_t nonfinite_zeroed = 0;  // NaN and Inf lanes of fast groups, zeroed there
    for (; i < block_end; i += kGroupElements) {
      __m256i v[8], a[8];
      __m256i special = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 4 * (i + 8 * k)));
        a[k] = _mm256_and_si256(v[k], abs_mask);
        special = _mm256_or_si256(special, _mm256_cmpgt_epi32(a[k], inf_m1));
        if constexpr (kFull) {  // subnormals need an exact histogram bin: scalar path
          const __m256i sub = _mm256_andnot_si256(_mm256_cmpeq_epi32(a[k], zero),
                                                  _mm256_cmpgt_epi32(min_normal, a[k]));
          special = _mm256_or_si256(special, sub);
        }
      }
      if (!_mm256_testz_si256(special, special)) {
        __m256i nonfinite[8], subnormal = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          nonfinite[k] = _mm256_cmpgt_epi32(a[k], inf_m1);
          if constexpr (kFull)
            subnormal = _mm256_or_si256(subnormal, _mm256_andnot_si256(_mm256_cmpeq_epi32(a[k], zero),
                                                                       _mm256_cmpgt_epi32(min_normal, a[k])));
        }
        if (kFull && !_mm256_testz_si256(subnormal, subnormal)) {
          add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, kGroupElements, kParts,
                                                             bits_to_double);
          special_groups |= uint64_t(1) << ((i - block_begin) / kGroupElements);
          continue;
        }
        const __m256i inf = _mm256_set1_epi32(int(kLayoutF32.inf_abs));
        __m256i nan[8], pos_inf[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          nan[k] = _mm256_cmpgt_epi32(a[k], inf);
          pos_inf[k] = _mm256_cmpeq_epi32(v[k], inf);
          v[k] = _mm256_andnot_si256(nonfinite[k], v[k]);
          a[k] = _mm256_andnot_si256(nonfinite[k], a[k]);
        }
        const uint64_t all = group_mask_32(nonfinite), nans = group_mask_32(nan), pos = group_mask_32(pos_inf);
        add_nonfinite<uint32_t>(acc, nans, pos, all & ~nans & ~pos, base, i);
        nonfinite_zeroed += uint64_t(__builtin_popcountll(all));
        f32_fast_group<kFull, true>(base + 4 * i, v, a, nonfinite, st, field + buffered);
      } else {
        f32_fast_group<kFull, false>(base + 4 * i, v, a, nullptr, st, field + buffered);
      }
      if constexpr (kFull) buffered += kGroupElements;
    }
    acc.zero += lane_total_u32(st.zero) - nonfinite_zeroed;
    acc.subnormal += lane_total_u32(st.subnormal);
    st.zero = st.subnormal = _mm256_setzero_si256();
    if constexpr (kFull) {
      alignas(32) int32_t probe[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(probe), st.power_of_two);
      const bool powers_of_two = *std::max_element(probe, probe + 8) == kPowerOfTwoProbeHit;
      st.power_of_two = _mm256_setzero_si256();
      finish_block<kThresholdsF32, false>(field, buffered, base + 4 * block_begin,
                                          (block_end - block_begin) / kGroupElements,
                                          special_groups, powers_of_two, nonfinite_zeroed, h, acc);
    }
  }
  alignas(32) int32_t mins[8], maxs[8];
  alignas(32) uint32_t nz[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(mins), st.min_key);
  _mm256_store_si256(reinterpret_cast<__m256i*>(maxs), st.max_key);
  _mm256_store_si256(reinterpret_cast<__m256i*>(nz), st.min_nz_m1);
  const uint32_t min_nz_m1 = *std::min_element(nz, nz + 8);
  acc.merge_extremes(*std::min_element(mins, mins + 8), *std::max_element(maxs, maxs + 8),
                     min_nz_m1 == UINT32_MAX ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<kLayoutF32, kThresholdsF32, uint32_t>(acc, base, i, n - i, kParts, bits_to_double);
}

// [SECTION] fp16 and bf16: 16 lanes of 16 bits, a group is 4 vectors.

template <ElementType kType>
FPSCOPE_AVX2 inline void widen(__m256i v, __m256& lo, __m256& hi) {
  if constexpr (kType == ElementType::F16) {
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(v));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1));
  } else {
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
  }
}

// fp32 exponent fields of 16 values as 16-bit lanes (fp16: from the widened floats).
template <ElementType kType>
FPSCOPE_AVX2 inline __m256i half_fields(__m256i v, __m256 lo, __m256 hi) {
  if constexpr (kType == ElementType::BF16) {
    return _mm256_srli_epi16(_mm256_slli_epi16(v, 1), 8);
  } else {
    const __m256i flo = _mm256_srli_epi32(_mm256_slli_epi32(_mm256_castps_si256(lo), 1), 24);
    const __m256i fhi = _mm256_srli_epi32(_mm256_slli_epi32(_mm256_castps_si256(hi), 1), 24);
    return _mm256_packus_epi32(flo, fhi);
  }
}

// kMasked as for f32_fast_group.
template <ElementType kType, const SourceLayout& S, bool kFull, bool kMasked>
FPSCOPE_AVX2 inline void half_fast_group(const __m256i v[4], const __m256i a[4],
                                         const __m256i nonfinite[4], State& st, uint8_t* field) {
  const __m256i one = _mm256_set1_epi16(1);
  const __m256i abs_mask = _mm256_set1_epi16(0x7FFF);
  const __m256i min_normal = _mm256_set1_epi16(int16_t(S.min_normal_abs));
  __m256 f[8];
  __m256i fields[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i key =
        _mm256_xor_si256(v[k], _mm256_and_si256(_mm256_srai_epi16(v[k], 15), abs_mask));
    add_keys<16, kMasked>(st, key, kMasked ? nonfinite[k] : _mm256_setzero_si256());
    st.min_nz_m1 = _mm256_min_epu16(st.min_nz_m1, _mm256_sub_epi16(a[k], one));
    const __m256i zero = _mm256_cmpeq_epi16(a[k], _mm256_setzero_si256());
    st.zero = _mm256_sub_epi16(st.zero, zero);
    if constexpr (!(kFull && kType == ElementType::BF16)) {
      const __m256i sub = _mm256_andnot_si256(zero, _mm256_cmpgt_epi16(min_normal, a[k]));
      st.subnormal = _mm256_sub_epi16(st.subnormal, sub);
    }
    widen<kType>(v[k], f[2 * k], f[2 * k + 1]);
    if constexpr (kFull) fields[k] = half_fields<kType>(v[k], f[2 * k], f[2 * k + 1]);
  }
  if constexpr (kFull) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(field),
                        _mm256_packus_epi16(fields[0], fields[1]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(field + 32),
                        _mm256_packus_epi16(fields[2], fields[3]));
  }
  __m256d d[8];
  for (int half = 0; half < 2; ++half) {
    float_doubles(f + 4 * half, d);
    if constexpr (kType == ElementType::F16)
      add_sums_f16(st.exact, st.squares, d);
    else
      add_sums(st.sum, st.squares, d);
  }
}

template <ElementType kType, const SourceLayout& S, const ThresholdTable& T, bool kFull>
FPSCOPE_AVX2 void scan_half(const unsigned char* base, std::size_t n, Accumulator& acc) {
  const auto to_double = kType == ElementType::F16 ? f16_bits_to_double : bf16_bits_to_double;
  const __m256i abs_mask = _mm256_set1_epi16(0x7FFF);
  const __m256i inf_m1 = _mm256_set1_epi16(int16_t(S.inf_abs - 1));
  const __m256i min_normal = _mm256_set1_epi16(int16_t(S.min_normal_abs));
  const __m256i zero = _mm256_setzero_si256();
  constexpr bool kSubnormalIsSpecial = kFull && kType == ElementType::BF16;
  constexpr unsigned kParts = kFull ? kFullParts : 0;
  State st;
  init<16>(st);
  alignas(32) uint8_t field[kBlockElements];
  uint32_t h[256];  // per block: count_fields writes the bins fold_block_fields reads
  std::size_t i = 0;
  while (n - i >= kGroupElements) {
    const std::size_t block_begin = i;
    const std::size_t block_end =
        i + std::min(n - i, kBlockElements) / kGroupElements * kGroupElements;
    std::size_t buffered = 0;
    uint64_t special_groups = 0;
    uint64_t nonfinite_zeroed = 0;  // NaN and Inf lanes of fast groups, zeroed there
    for (; i < block_end; i += kGroupElements) {
      __m256i v[4], a[4];
      __m256i special = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 2 * (i + 16 * k)));
        a[k] = _mm256_and_si256(v[k], abs_mask);
        special = _mm256_or_si256(special, _mm256_cmpgt_epi16(a[k], inf_m1));
        if constexpr (kSubnormalIsSpecial) {
          const __m256i sub = _mm256_andnot_si256(_mm256_cmpeq_epi16(a[k], zero),
                                                  _mm256_cmpgt_epi16(min_normal, a[k]));
          special = _mm256_or_si256(special, sub);
        }
      }
      if (!_mm256_testz_si256(special, special)) {
        __m256i nonfinite[4], subnormal = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          nonfinite[k] = _mm256_cmpgt_epi16(a[k], inf_m1);
          if constexpr (kSubnormalIsSpecial)
            subnormal = _mm256_or_si256(subnormal, _mm256_andnot_si256(_mm256_cmpeq_epi16(a[k], zero),
                                                                       _mm256_cmpgt_epi16(min_normal, a[k])));
        }
        if (kSubnormalIsSpecial && !_mm256_testz_si256(subnormal, subnormal)) {
          add_elements<S, T, uint16_t>(acc, base, i, kGroupElements, kParts, to_double);
          special_groups |= uint64_t(1) << ((i - block_begin) / kGroupElements);
          continue;
        }
        const __m256i inf = _mm256_set1_epi16(int16_t(S.inf_abs));
        __m256i nan[4], pos_inf[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          nan[k] = _mm256_cmpgt_epi16(a[k], inf);
          pos_inf[k] = _mm256_cmpeq_epi16(v[k], inf);
          v[k] = _mm256_andnot_si256(nonfinite[k], v[k]);
          a[k] = _mm256_andnot_si256(nonfinite[k], a[k]);
        }
        const uint64_t all = group_mask_16(nonfinite), nans = group_mask_16(nan), pos = group_mask_16(pos_inf);
        add_nonfinite<uint16_t>(acc, nans, pos, all & ~nans & ~pos, base, i);
        nonfinite_zeroed += uint64_t(__builtin_popcountll(all));
        half_fast_group<kType, S, kFull, true>(v, a, nonfinite, st, field + buffered);
      } else {
        half_fast_group<kType, S, kFull, false>(v, a, nullptr, st, field + buffered);
      }
      if constexpr (kFull) buffered += kGroupElements;
    }
    if constexpr (kType == ElementType::F16) {
      two_sum(st.sum, st.exact);
      st.exact = _mm256_setzero_pd();
    }
    acc.zero += lane_total_u16(st.zero) - nonfinite_zeroed;  // <= 256 per lane per block
    acc.subnormal += lane_total_u16(st.subnormal);
    st.zero = st.subnormal = _mm256_setzero_si256();
    if constexpr (kFull)  // taken to hold a power of two (vector_common.h)
      finish_block<T, true>(field, buffered, base + 2 * block_begin,
                            (block_end - block_begin) / kGroupElements, special_groups, true,
                            nonfinite_zeroed, h, acc);
  }
  alignas(32) int16_t mins[16], maxs[16];
  alignas(32) uint16_t nz[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(mins), st.min_key);
  _mm256_store_si256(reinterpret_cast<__m256i*>(maxs), st.max_key);
  _mm256_store_si256(reinterpret_cast<__m256i*>(nz), st.min_nz_m1);
  const uint32_t min_nz_m1 = *std::min_element(nz, nz + 16);
  acc.merge_extremes(*std::min_element(mins, mins + 16), *std::max_element(maxs, maxs + 16),
                     min_nz_m1 == 0xFFFF ? UINT32_MAX : min_nz_m1 + 1);
  flush_sums(st.sum, st.squares, acc);
  add_elements<S, T, uint16_t>(acc, base, i, n - i, kParts, to_double);
}

}  // namespace

void scan_avx2(const void* data, ElementType type, std::size_t n, StatsLevel level,
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
    case ElementType::F64:  // fp64 tensors are rare: the portable kernel scans them
      scan_scalar(data, type, n, level, acc);
      break;
    default:  // the 8-bit formats reach no kernel (kernels.h)
      break;
  }
}

}  // namespace fpscope::stats
