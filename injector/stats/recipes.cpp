// compute_recipes(): each scaling recipe replayed over a tensor (fpscope/fp8_recipes.h).
//
// Every value is decoded to fp32 (exact for fp32, fp16 and bf16) and scaled in fp32, as fp8
// training does; the product is rounded to the element format by exact integer and power-of-two
// arithmetic; docs/statistics.md ("Scaling recipes") states the rules this follows, operation by
// operation, so that an independent quantizer gets the same counts.
//
// How it is fast: the tensor's amax comes from its statistics, the per-tensor recipes quantize
// the whole tensor in one run each, and the block recipes share one pass of block amaxes per row
// (16-value blocks, from which 32- and 128-value blocks and the row follow). The quantizing run is
// branch-free over eight lanes, so that the compiler vectorizes it; it is built twice, for AVX2
// and for the baseline, and chosen once.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <vector>

#include "accumulator.h"
#include "fp_mode.h"
#include "fpscope/fp8_recipes.h"
#include "kernels.h"

namespace fpscope {
namespace {

using contract::ElementFormat;
using contract::RecipeInfo;

// An element format's facts, as the quantizing run uses them.
struct Element {
  const contract::FloatFormat* format;
  float max, min_normal;
  float magic;          // min_subnormal * 2^23: (a + magic) - magic rounds a to the subnormal grid
  uint32_t drop;        // fp32 mantissa bits the format does not have
  uint32_t keep_mask;   // ~((1 << drop) - 1)
};
Element element_of(ElementFormat f) {
  const contract::FloatFormat& b = contract::element_bits(f);
  const uint32_t drop = uint32_t(23 - b.mantissa_bits);
  return {&b, float(b.max_finite()), float(b.min_normal()), float(b.min_subnormal() * 0x1p23), drop,
          ~((uint32_t{1} << drop) - 1)};
}

// What one recipe did to a run of values.
struct Tally {
  uint64_t values = 0, underflow = 0, subnormal = 0, saturated = 0;
  double sse = 0, signal = 0;
  void add_to(RecipeOutcome& o) const {
    o.values += values;
    o.underflow += underflow;
    o.subnormal += subnormal;
    o.saturated += saturated;
    o.sse += sse;
    o.signal += signal;
  }
};

// Quantizes the n values at x (non-finite ones are skipped) at scale s, recovering q * inv (inv
// = 1/s in double; 0 with s = 0, which loses every value); |x*s| (fp32) is rounded by the
// contract's round_to_format (an fp32 overflow to Inf stays Inf and saturates), which the vector
// kernels below restate lane-wise with Element's constants. Eight independent lanes, combined at
// the end.
constexpr int kLanes = 8;
template <bool kCountValues>
__attribute__((always_inline)) inline void quantize_run_lanes(const float* x, std::size_t n, float s, double inv, const Element& e, Tally& t) {
  uint32_t values[kLanes] = {}, under[kLanes] = {}, sub[kLanes] = {}, sat[kLanes] = {};
  double sse[kLanes] = {}, sig[kLanes] = {};
  const auto lane = [&](int l, float v) __attribute__((always_inline)) {
    const float ax = std::fabs(v);
    const bool finite = ax <= std::numeric_limits<float>::max();
    const float m = finite ? ax : 0.0f;
    const float q = contract::round_to_format(m * s, *e.format);
    const bool nz = m != 0.0f;
    values[l] += finite;
    sat[l] += q > e.max;
    under[l] += nz & (q == 0.0f);
    sub[l] += (q > 0.0f) & (q < e.min_normal);
    const double err = double(m) - double(std::min(q, e.max)) * inv;
    sse[l] += err * err;
    sig[l] += double(m) * double(m);
  };
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane(l, x[i + std::size_t(l)]);
  for (int l = 0; i < n; ++i, ++l) lane(l, x[i]);
  for (int l = 0; l < kLanes; ++l) {
    if constexpr (kCountValues) {
      t.values += values[l];
      t.signal += sig[l];
    }
    t.underflow += under[l];
    t.subnormal += sub[l];
    t.saturated += sat[l];
    t.sse += sse[l];
  }
}

// The finite values of a run and the sum of their squares (a Tally's values and signal), which
// every recipe that keeps all its blocks shares.
void finite_values_base(const float* x, std::size_t n, Tally& t) {
  uint32_t values[kLanes] = {};
  double sig[kLanes] = {};
  const auto lane = [&](int l, float v) __attribute__((always_inline)) {
    const float ax = std::fabs(v);
    const bool finite = ax <= std::numeric_limits<float>::max();
    const double m = finite ? ax : 0.0f;
    values[l] += finite;
    sig[l] += m * m;
  };
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane(l, x[i + std::size_t(l)]);
  for (int l = 0; i < n; ++i, ++l) lane(l, x[i]);
  for (int l = 0; l < kLanes; ++l) {
    t.values += values[l];
    t.signal += sig[l];
  }
}

// How a recipe cuts the tensor (rows x cols, row-major) into blocks: `width` values along a row
// (the last block of a row may be shorter), over `height` rows (a weight's 2D tiles; the last band
// may be lower). Block (band, b) is number band * blocks_per_row + b.
struct Geometry {
  std::size_t rows, cols, width, height;
  std::size_t blocks_per_row() const { return (cols + width - 1) / width; }
  std::size_t count() const { return (rows + height - 1) / height * blocks_per_row(); }
};

// One block as a recipe quantizes it: its scale, 1/s in double, or skipped (a block a NaN or Inf
// made non-finite).
struct BlockPlan {
  float s = 1;
  bool skip = false;
  double inv = 1;
  bool exact_f32 = false;  // s is a power of two from the amax: quantize_blocks_avx512 errors in fp32
};

// The largest |x| of finite values and whether a NaN or Inf was among them.
struct Amax {
  float amax = 0;
  bool nonfinite = false;
  void merge(const Amax& o) {
    amax = std::max(amax, o.amax);
    nonfinite |= o.nonfinite;
  }
};

// Portable: every block's amax (merged into `out`, count() entries), and every block quantized
// with its plan into `t`.
void amax_blocks_base(const float* x, const Geometry& g, Amax* out) {
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    Amax* band = out + row / g.height * per_row;
    const float* r = x + row * g.cols;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width) {
      Amax a;
      for (std::size_t c = c0; c < std::min(g.cols, c0 + g.width); ++c) {
        const float v = std::fabs(r[c]);
        const bool finite = v <= std::numeric_limits<float>::max();
        a.nonfinite |= !finite;
        a.amax = std::max(a.amax, finite ? v : 0.0f);
      }
      band[b].merge(a);
    }
  }
}

template <bool kCountValues>
void quantize_blocks_base(const float* x, const Geometry& g, const BlockPlan* plans, const Element& e, Tally& t) {
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    const BlockPlan* band = plans + row / g.height * per_row;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width)
      if (!band[b].skip)
        quantize_run_lanes<kCountValues>(x + row * g.cols + c0, std::min(g.width, g.cols - c0), band[b].s,
                                         band[b].inv, e, t);
  }
}

__attribute__((target("avx2"))) uint64_t total(__m256i v) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  uint64_t sum = 0;
  for (uint32_t l : lanes) sum += l;
  return sum;
}

// The lanes of a block's last partial group of eight: the first `n` (0 to 7) lanes set.
__attribute__((target("avx2"))) __m256i first_lanes(std::size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The AVX2 kernels: eight fp32 lanes, a block's last partial group through masked loads.
__attribute__((target("avx2"))) void amax_blocks_avx2(const float* x, const Geometry& g, Amax* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 flt_max = _mm256_set1_ps(std::numeric_limits<float>::max());
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    Amax* band = out + row / g.height * per_row;
    const float* r = x + row * g.cols;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width) {
      const std::size_t c1 = std::min(g.cols, c0 + g.width);
      __m256 m = _mm256_setzero_ps(), bad = m;
      for (std::size_t i = c0; i < c1; i += 8) {
        const __m256i lanes = first_lanes(std::min<std::size_t>(8, c1 - i));
        const __m256 ax = _mm256_and_ps(_mm256_maskload_ps(r + i, lanes), abs_mask);  // masked lanes read 0
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(ax, flt_max, _CMP_NLE_UQ));
        m = _mm256_max_ps(m, _mm256_and_ps(ax, _mm256_cmp_ps(ax, flt_max, _CMP_LE_OQ)));
      }
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
      band[b].merge({_mm_cvtss_f32(h), _mm256_movemask_ps(bad) != 0});
    }
  }
}

template <bool kCountValues>
__attribute__((target("avx2"))) void quantize_blocks_avx2(const float* x, const Geometry& g, const BlockPlan* plans,
                                                           const Element& e, Tally& t) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 flt_max = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m256 vmax = _mm256_set1_ps(e.max), vmin_normal = _mm256_set1_ps(e.min_normal);
  const __m256 vmagic = _mm256_set1_ps(e.magic), zero = _mm256_setzero_ps();
  const __m256i half = _mm256_set1_epi32(int((uint32_t{1} << (e.drop - 1)) - 1));
  const __m256i keep = _mm256_set1_epi32(int(e.keep_mask)), one = _mm256_set1_epi32(1);
  const __m128i drop = _mm_cvtsi32_si128(int(e.drop));
  __m256i values = _mm256_setzero_si256(), under = values, sub = values, sat = values;
  __m256d sse = _mm256_setzero_pd(), sig = sse;
  uint64_t groups = 0;  // since the lanes were last emptied: each counts at most one per group
  const auto empty_lanes = [&]() __attribute__((target("avx2"))) {
    if constexpr (kCountValues) t.values += total(values);
    t.underflow += total(under);
    t.subnormal += total(sub);
    t.saturated += total(sat);
    values = under = sub = sat = _mm256_setzero_si256();
    groups = 0;
  };
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    const BlockPlan* band = plans + row / g.height * per_row;
    const float* r = x + row * g.cols;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width) {
      const BlockPlan& p = band[b];
      if (p.skip) continue;
      const std::size_t c1 = std::min(g.cols, c0 + g.width);
      if (groups + (c1 - c0) / 8 + 1 >= (uint64_t{1} << 31)) empty_lanes();
      groups += (c1 - c0 + 7) / 8;
      const __m256 vs = _mm256_set1_ps(p.s);
      const __m256d vinv = _mm256_set1_pd(p.inv);
      for (std::size_t i = c0; i < c1; i += 8) {
        const __m256i lanes = first_lanes(std::min<std::size_t>(8, c1 - i));
        const __m256 ax = _mm256_and_ps(_mm256_maskload_ps(r + i, lanes), abs_mask);
        const __m256 finite = _mm256_and_ps(_mm256_cmp_ps(ax, flt_max, _CMP_LE_OQ), _mm256_castsi256_ps(lanes));
        const __m256 m = _mm256_and_ps(ax, finite);
        const __m256 a = _mm256_mul_ps(m, vs);
        const __m256i bits = _mm256_castps_si256(a);
        const __m256i odd = _mm256_and_si256(_mm256_srl_epi32(bits, drop), one);
        const __m256 qn = _mm256_castsi256_ps(_mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(bits, half), odd), keep));
        const __m256 qs = _mm256_sub_ps(_mm256_add_ps(a, vmagic), vmagic);
        const __m256 q = _mm256_blendv_ps(qs, qn, _mm256_cmp_ps(a, vmin_normal, _CMP_GE_OQ));
        const __m256 nz = _mm256_cmp_ps(m, zero, _CMP_NEQ_OQ);
        values = _mm256_sub_epi32(values, _mm256_castps_si256(finite));
        sat = _mm256_sub_epi32(sat, _mm256_castps_si256(_mm256_cmp_ps(q, vmax, _CMP_GT_OQ)));
        under = _mm256_sub_epi32(under, _mm256_castps_si256(_mm256_and_ps(nz, _mm256_cmp_ps(q, zero, _CMP_EQ_OQ))));
        sub = _mm256_sub_epi32(sub, _mm256_castps_si256(_mm256_and_ps(_mm256_cmp_ps(q, zero, _CMP_GT_OQ),
                                                                       _mm256_cmp_ps(q, vmin_normal, _CMP_LT_OQ))));
        const __m256 qc = _mm256_min_ps(q, vmax);
        const __m256d m0 = _mm256_cvtps_pd(_mm256_castps256_ps128(m)), m1 = _mm256_cvtps_pd(_mm256_extractf128_ps(m, 1));
        const __m256d e0 = _mm256_sub_pd(m0, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(qc)), vinv));
        const __m256d e1 = _mm256_sub_pd(m1, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(qc, 1)), vinv));
        sse = _mm256_add_pd(sse, _mm256_add_pd(_mm256_mul_pd(e0, e0), _mm256_mul_pd(e1, e1)));
        if constexpr (kCountValues) sig = _mm256_add_pd(sig, _mm256_add_pd(_mm256_mul_pd(m0, m0), _mm256_mul_pd(m1, m1)));
      }
    }
  }
  empty_lanes();
  alignas(32) double d[4];
  _mm256_store_pd(d, sse);
  t.sse += (d[0] + d[1]) + (d[2] + d[3]);
  if constexpr (kCountValues) {
    _mm256_store_pd(d, sig);
    t.signal += (d[0] + d[1]) + (d[2] + d[3]);
  }
}

__attribute__((target("avx2"))) void finite_values_avx2(const float* x, std::size_t n, Tally& t) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 flt_max = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256i values = _mm256_setzero_si256();
  __m256d sig = _mm256_setzero_pd();
  for (std::size_t i = 0; i < n; i += 8) {
    const __m256i lanes = first_lanes(std::min<std::size_t>(8, n - i));
    const __m256 ax = _mm256_and_ps(_mm256_maskload_ps(x + i, lanes), abs_mask);
    const __m256 finite = _mm256_and_ps(_mm256_cmp_ps(ax, flt_max, _CMP_LE_OQ), _mm256_castsi256_ps(lanes));
    const __m256 m = _mm256_and_ps(ax, finite);
    values = _mm256_sub_epi32(values, _mm256_castps_si256(finite));
    const __m256d m0 = _mm256_cvtps_pd(_mm256_castps256_ps128(m)), m1 = _mm256_cvtps_pd(_mm256_extractf128_ps(m, 1));
    sig = _mm256_add_pd(sig, _mm256_add_pd(_mm256_mul_pd(m0, m0), _mm256_mul_pd(m1, m1)));
  }
  t.values += total(values);  // a band holds far fewer than 2^32 values a lane
  alignas(32) double d[4];
  _mm256_store_pd(d, sig);
  t.signal += (d[0] + d[1]) + (d[2] + d[3]);
}

// The AVX-512 kernels: sixteen fp32 lanes, the lanes' outcomes as masks counted with popcount.
#define FPSCOPE_RECIPES_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,popcnt")))

FPSCOPE_RECIPES_AVX512 void amax_blocks_avx512(const float* x, const Geometry& g, Amax* out) {
  const __m512 flt_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    Amax* band = out + row / g.height * per_row;
    const float* r = x + row * g.cols;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width) {
      const std::size_t c1 = std::min(g.cols, c0 + g.width);
      __m512 m = _mm512_setzero_ps();
      __mmask16 bad = 0;
      for (std::size_t i = c0; i < c1; i += 16) {
        const __mmask16 lanes = c1 - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c1 - i)) - 1);
        const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, r + i));
        bad |= _mm512_cmp_ps_mask(ax, flt_max, _CMP_NLE_UQ);
        m = _mm512_max_ps(m, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(ax, flt_max, _CMP_LE_OQ), ax));
      }
      band[b].merge({_mm512_reduce_max_ps(m), bad != 0});
    }
  }
}

// In a block whose plan is exact_f32 (a power-of-two scale its rule took from the amax:
// pow2_scales, not the s = 1 a NaN or Inf falls back to), a value's error m - q / s is worked out
// in fp32, exactly, as (m * s - q) / s, or m where q is 0: m * s is exact where q is not 0 (a
// product below fp32's normal range rounds to 0 in every element format), the saturated q lies
// within a factor of two of it as a rounded one does (Sterbenz), and the difference, a multiple of
// m's last place no larger than m, divides exactly. (q / s itself may leave fp32: m near fp32's
// largest value rounds up to 2^128.) Other blocks' errors are worked out in double.
template <bool kCountValues>
FPSCOPE_RECIPES_AVX512 void quantize_blocks_avx512(const float* x, const Geometry& g,
                                                                   const BlockPlan* plans, const Element& e, Tally& t) {
  const __m512 flt_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  const __m512 vmax = _mm512_set1_ps(e.max), vmin_normal = _mm512_set1_ps(e.min_normal);
  const __m512 vmagic = _mm512_set1_ps(e.magic), zero = _mm512_setzero_ps();
  const __m512i half = _mm512_set1_epi32(int((uint32_t{1} << (e.drop - 1)) - 1));
  const __m512i keep = _mm512_set1_epi32(int(e.keep_mask)), one = _mm512_set1_epi32(1);
  const __m128i drop = _mm_cvtsi32_si128(int(e.drop));
  uint64_t values = 0, under = 0, sub = 0, sat = 0;
  __m512d sse = _mm512_setzero_pd(), sse_hi = sse, sig = sse;
  const std::size_t per_row = g.blocks_per_row();
  for (std::size_t row = 0; row < g.rows; ++row) {
    const BlockPlan* band = plans + row / g.height * per_row;
    const float* r = x + row * g.cols;
    for (std::size_t b = 0, c0 = 0; c0 < g.cols; ++b, c0 += g.width) {
      const BlockPlan& p = band[b];
      if (p.skip) continue;
      const std::size_t c1 = std::min(g.cols, c0 + g.width);
      const __m512 vs = _mm512_set1_ps(p.s);
      const __m512d vinv = _mm512_set1_pd(p.inv);
      const __m512 vinv_f = _mm512_set1_ps(float(p.inv));
      const bool f32_errors = p.exact_f32;
      for (std::size_t i = c0; i < c1; i += 16) {
        const __mmask16 lanes = c1 - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c1 - i)) - 1);
        const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, r + i));
        const __mmask16 finite = _mm512_mask_cmp_ps_mask(lanes, ax, flt_max, _CMP_LE_OQ);
        const __m512 m = _mm512_maskz_mov_ps(finite, ax);
        const __m512 a = _mm512_mul_ps(m, vs);
        const __m512i bits = _mm512_castps_si512(a);
        const __m512i odd = _mm512_and_si512(_mm512_srl_epi32(bits, drop), one);
        const __m512 qn = _mm512_castsi512_ps(_mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(bits, half), odd), keep));
        const __m512 qs = _mm512_sub_ps(_mm512_add_ps(a, vmagic), vmagic);
        const __m512 q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vmin_normal, _CMP_GE_OQ), qs, qn);
        const __mmask16 nz = _mm512_cmp_ps_mask(m, zero, _CMP_NEQ_OQ);
        if constexpr (kCountValues) values += unsigned(__builtin_popcount(finite));
        sat += unsigned(__builtin_popcount(_mm512_cmp_ps_mask(q, vmax, _CMP_GT_OQ)));
        const __mmask16 q_zero = _mm512_cmp_ps_mask(q, zero, _CMP_EQ_OQ);
        under += unsigned(__builtin_popcount(nz & q_zero));
        sub += unsigned(__builtin_popcount(_mm512_cmp_ps_mask(q, zero, _CMP_GT_OQ) &
                                           _mm512_cmp_ps_mask(q, vmin_normal, _CMP_LT_OQ)));
        const __m512 qc = _mm512_min_ps(q, vmax);
        if (f32_errors) {
          const __m512 err = _mm512_mask_blend_ps(q_zero, _mm512_mul_ps(_mm512_sub_ps(a, qc), vinv_f), m);
          const __m512d e0 = _mm512_cvtps_pd(_mm512_castps512_ps256(err));
          const __m512d e1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(err, 1));
          sse = _mm512_fmadd_pd(e0, e0, sse);
          sse_hi = _mm512_fmadd_pd(e1, e1, sse_hi);
        }
        if (!f32_errors || kCountValues) {
          const __m512d m0 = _mm512_cvtps_pd(_mm512_castps512_ps256(m));
          const __m512d m1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(m, 1));
          if (!f32_errors) {
            const __m512d e0 = _mm512_sub_pd(m0, _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(qc)), vinv));
            const __m512d e1 = _mm512_sub_pd(m1, _mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(qc, 1)), vinv));
            sse = _mm512_add_pd(sse, _mm512_add_pd(_mm512_mul_pd(e0, e0), _mm512_mul_pd(e1, e1)));
          }
          if constexpr (kCountValues)
            sig = _mm512_add_pd(sig, _mm512_add_pd(_mm512_mul_pd(m0, m0), _mm512_mul_pd(m1, m1)));
        }
      }
    }
  }
  t.values += values;
  t.underflow += under;
  t.subnormal += sub;
  t.saturated += sat;
  alignas(64) double d[8];
  _mm512_store_pd(d, _mm512_add_pd(sse, sse_hi));
  t.sse += ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
  _mm512_store_pd(d, sig);
  t.signal += ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

FPSCOPE_RECIPES_AVX512 void finite_values_avx512(const float* x, std::size_t n, Tally& t) {
  const __m512 flt_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  uint64_t values = 0;
  __m512d sig = _mm512_setzero_pd(), sig_hi = sig;
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, x + i));
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(lanes, ax, flt_max, _CMP_LE_OQ);
    const __m512 m = _mm512_maskz_mov_ps(finite, ax);
    values += unsigned(__builtin_popcount(finite));
    const __m512d m0 = _mm512_cvtps_pd(_mm512_castps512_ps256(m));
    const __m512d m1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(m, 1));
    sig = _mm512_fmadd_pd(m0, m0, sig);
    sig_hi = _mm512_fmadd_pd(m1, m1, sig_hi);
  }
  t.values += values;
  alignas(64) double d[8];
  _mm512_store_pd(d, _mm512_add_pd(sig, sig_hi));
  t.signal += ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

// The kernels for this CPU (the best it runs), or the one a caller asks for.
thread_local std::optional<stats::RecipeKernel> forced_kernel;
stats::RecipeKernel recipe_kernel() {
  static const stats::RecipeKernel best = stats::recipe_kernel_supported(stats::RecipeKernel::Avx512)
                                              ? stats::RecipeKernel::Avx512
                                          : stats::recipe_kernel_supported(stats::RecipeKernel::Avx2)
                                              ? stats::RecipeKernel::Avx2
                                              : stats::RecipeKernel::Portable;
  return forced_kernel.value_or(best);
}
void amax_blocks(const float* x, const Geometry& g, Amax* out) {
  switch (recipe_kernel()) {
    case stats::RecipeKernel::Avx512: return amax_blocks_avx512(x, g, out);
    case stats::RecipeKernel::Avx2: return amax_blocks_avx2(x, g, out);
    case stats::RecipeKernel::Portable: break;
  }
  amax_blocks_base(x, g, out);
}
// Every block with its plan into `t`: its counts and squared errors, and with `count_values` also
// its finite values and their squares (else the caller has them from finite_values()).
void quantize_blocks(const float* x, const Geometry& g, const BlockPlan* plans, const Element& e, Tally& t,
                     bool count_values) {
  switch (recipe_kernel()) {
    case stats::RecipeKernel::Avx512:
      return count_values ? quantize_blocks_avx512<true>(x, g, plans, e, t)
                          : quantize_blocks_avx512<false>(x, g, plans, e, t);
    case stats::RecipeKernel::Avx2:
      return count_values ? quantize_blocks_avx2<true>(x, g, plans, e, t) : quantize_blocks_avx2<false>(x, g, plans, e, t);
    case stats::RecipeKernel::Portable: break;
  }
  count_values ? quantize_blocks_base<true>(x, g, plans, e, t) : quantize_blocks_base<false>(x, g, plans, e, t);
}
void finite_values(const float* x, std::size_t n, Tally& t) {
  switch (recipe_kernel()) {
    case stats::RecipeKernel::Avx512: return finite_values_avx512(x, n, t);
    case stats::RecipeKernel::Avx2: return finite_values_avx2(x, n, t);
    case stats::RecipeKernel::Portable: break;
  }
  finite_values_base(x, n, t);
}

// The replay goes through the tensor in bands of whole rows small enough to stay in the cache
// (a weight's bands are whole 128-row tiles), running every recipe over a band before the next.
constexpr std::size_t kBandValues = std::size_t{1} << 14;

class Replay {
 public:
  Replay(const float* x, const RecipeRequest& q, RecipeResult* out) : x_(x), q_(q), out_(out) {}

  void run() {
    const std::size_t n = q_.rows * q_.cols;
    Amax tensor;
    amax_blocks(x_, {1, n, std::max<std::size_t>(n, 1), 1}, &tensor);
    out_->amax = tensor.nonfinite ? std::numeric_limits<double>::infinity() : double(tensor.amax);
    out_->outcomes = RecipeOutcomes{};
    if (n == 0) return;
    std::size_t tile_rows = 1;
    for (int i = 0; i < kRecipeCount; ++i) {
      const RecipeInfo& r = contract::kRecipes[std::size_t(i)];
      Rule& rule = rules_[i];
      rule = {&r, element_of(r.element),
              contract::tensor_scale(r, tensor.amax, tensor.nonfinite, q_.history_amax[std::size_t(i)]), 1, 1, -1, {}};
      RecipeOutcome& o = out_->outcomes[std::size_t(i)];
      if (r.block == contract::kTensorBlock) {
        o.scale = rule.tensor_s;
        rule.tensor_plan = plan(rule, tensor, o);
        // A recipe of the same element format and scale as an earlier one has its outcome.
        for (int j = 0; j < i && rule.same_as < 0; ++j)
          if (rules_[j].info->block == contract::kTensorBlock && rules_[j].info->element == r.element &&
              rules_[j].tensor_s == rule.tensor_s)
            rule.same_as = j;
        continue;
      }
      rule.width = r.block == contract::kRowBlock ? q_.cols : std::size_t(r.block);
      rule.height = q_.weight && r.weight_rows > 1 ? std::size_t(r.weight_rows) : 1;
      tile_rows = std::max(tile_rows, rule.height);
    }
    std::size_t band = std::max<std::size_t>(1, kBandValues / q_.cols);
    band = (band + tile_rows - 1) / tile_rows * tile_rows;  // whole tiles
    for (std::size_t r0 = 0; r0 < q_.rows; r0 += band) replay_band(r0, std::min(q_.rows, r0 + band));
    for (int i = 0; i < kRecipeCount; ++i)
      if (rules_[i].same_as >= 0) out_->outcomes[std::size_t(i)] = out_->outcomes[std::size_t(rules_[i].same_as)];
  }

 private:
  struct Rule {
    const RecipeInfo* info;
    Element e;
    float tensor_s;      // the per-tensor scale, NVFP4's global scale, else 1
    std::size_t width, height;  // a block recipe's blocks
    int same_as;         // a per-tensor recipe whose outcome this one has, -1 if none
    BlockPlan tensor_plan;
  };

  // Rows [r0, r1): every recipe. A block recipe whose plans for the band equal an earlier one's of
  // the same element format and blocks takes that one's outcome for the band.
  void replay_band(std::size_t r0, std::size_t r1) {
    const float* x = x_ + r0 * q_.cols;
    const std::size_t rows = r1 - r0;
    std::fill(std::begin(amax_valid_), std::end(amax_valid_), false);
    Tally band[kRecipeCount];
    Tally finite;  // what a recipe that keeps every block of the band counts as values and signal
    finite_values(x, rows * q_.cols, finite);
    // Runs recipe i over the band's blocks with `plans`.
    const auto quantize = [&](int i, const Geometry& g, const BlockPlan* plans, std::size_t count) {
      const Rule& r = rules_[i];
      const bool all_kept = std::none_of(plans, plans + count, [](const BlockPlan& p) { return p.skip; });
      quantize_blocks(x, g, plans, r.e, band[i], !all_kept);
      if (all_kept) {
        band[i].values += finite.values;
        band[i].signal += finite.signal;
      }
    };
    for (int i = 0; i < kRecipeCount; ++i) {
      const Rule& r = rules_[i];
      if (r.same_as >= 0) continue;
      if (r.info->block == contract::kTensorBlock) {
        quantize(i, {rows, q_.cols, q_.cols, rows}, &r.tensor_plan, 1);
        band[i].add_to(out_->outcomes[std::size_t(i)]);
        continue;
      }
      const Geometry g{rows, q_.cols, r.width, r.height};
      const std::vector<Amax>& a = amaxes(i, x, g);
      std::vector<BlockPlan>& plans = plans_[i];
      plans.resize(a.size());
      RecipeOutcome& o = out_->outcomes[std::size_t(i)];
      for (std::size_t b = 0; b < a.size(); ++b) plans[b] = plan(r, a[b], o);
      int same = -1;
      for (int j = 0; j < i && same < 0; ++j) {
        const Rule& other = rules_[j];
        if (other.info->block != contract::kTensorBlock && other.info->element == r.info->element &&
            other.width == r.width && other.height == r.height && same_plans(plans, plans_[j]))
          same = j;
      }
      if (same >= 0)
        band[i] = band[same];
      else
        quantize(i, g, plans.data(), plans.size());
      band[i].add_to(o);
    }
  }

  // The blocks' amaxes of a band in recipe i's geometry, made once for the recipes that share it.
  const std::vector<Amax>& amaxes(int i, const float* x, const Geometry& g) {
    for (int j = 0; j < i; ++j) {
      const Rule& other = rules_[j];
      if (amax_valid_[j] && other.width == g.width && other.height == g.height) return amax_[j];
    }
    std::vector<Amax>& a = amax_[i];
    a.assign(g.count(), Amax{});
    amax_blocks(x, g, a.data());
    amax_valid_[i] = true;
    return a;
  }

  // A block's plan from its amax; counts the block, and whether it is non-finite or lost (rounding
  // is monotonic: every nonzero value of a block underflows exactly when its largest does).
  static BlockPlan plan(const Rule& r, const Amax& a, RecipeOutcome& o) {
    ++o.blocks;
    const float s = r.info->block == contract::kTensorBlock ? r.tensor_s
                                                             : contract::block_scale(*r.info, a.amax, a.nonfinite, r.tensor_s);
    if (std::isnan(s)) {
      ++o.blocks_nonfinite;
      return {0, true, 0};
    }
    if (a.amax > 0 && contract::round_to_format(a.amax * s, contract::element_bits(r.info->element)) == 0) ++o.blocks_lost;
    return {s, false, s == 0 ? 0.0 : 1.0 / double(s), contract::pow2_scales(r.info->rule) && !a.nonfinite};
  }

  static bool same_plans(const std::vector<BlockPlan>& a, const std::vector<BlockPlan>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (a[k].skip != b[k].skip || a[k].s != b[k].s) return false;
    return true;
  }

  const float* x_;
  const RecipeRequest& q_;
  RecipeResult* out_;
  Rule rules_[kRecipeCount];
  std::vector<Amax> amax_[kRecipeCount];
  bool amax_valid_[kRecipeCount] = {};
  std::vector<BlockPlan> plans_[kRecipeCount];
};

// fp16 to fp32 with F16C, eight at a time (exact, as every fp16 value is an fp32 value).
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const unsigned char* from, std::size_t n, float* to) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 2 * i))));
  for (; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, from + 2 * i, 2);
    to[i] = float(stats::f16_bits_to_double(b));
  }
}
bool use_f16c() {  // the CPUs of the AVX2 kernel have F16C
  return recipe_kernel() != stats::RecipeKernel::Portable;
}

}  // namespace

namespace stats {

bool recipe_kernel_supported(RecipeKernel k) {
  switch (k) {
    case RecipeKernel::Portable: return true;
    case RecipeKernel::Avx2: return kernel_supported(Kernel::Avx2);
    case RecipeKernel::Avx512: return kernel_supported(Kernel::Avx512);
  }
  return false;
}

const char* recipe_kernel_name(RecipeKernel k) {
  return k == RecipeKernel::Avx512 ? "avx512" : k == RecipeKernel::Avx2 ? "avx2" : "portable";
}

void compute_recipes_with(RecipeKernel k, const void* data, ElementType type, const RecipeRequest& request,
                          RecipeResult* out) {
  forced_kernel = k;
  compute_recipes(data, type, request, out);
  forced_kernel.reset();
}

}  // namespace stats

void compute_recipes(const void* data, ElementType type, const RecipeRequest& request, RecipeResult* out) {
  const stats::DefaultFloatingPointMode mode;
  *out = RecipeResult{};
  if (!recipes_read(type)) return;
  const std::size_t n = request.rows * request.cols;
  // The values as fp32, contiguous and aligned: an fp32 tensor as it is where it is aligned, any
  // other in a buffer of this thread's, kept for the next call.
  thread_local std::vector<float> buffer;
  const float* x = static_cast<const float*>(data);
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (type != ElementType::F32 || reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
    buffer.resize(n);
    float* to = buffer.data();
    if (type == ElementType::F32) {
      std::memcpy(to, bytes, 4 * n);
    } else if (type == ElementType::BF16) {
      for (std::size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        to[i] = std::bit_cast<float>(uint32_t(b) << 16);
      }
    } else if (use_f16c()) {
      f16_to_f32_f16c(bytes, n, to);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        to[i] = float(stats::f16_bits_to_double(b));
      }
    }
    x = to;
  }
  Replay(x, request, out).run();
}

}  // namespace fpscope
