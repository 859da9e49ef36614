// gemm_f32 hands the product to OpenBLAS. gemm_f16_partials emulates an fp16 accumulator: it
// keeps each C element's running sum and rounds it to fp16 after every multiply-add, in k order.
// The vector paths keep 4 rows x 32 columns (AVX-512) or 1 row x 32 columns (AVX2) of C in
// registers; every element still sums its terms in k order, so they are bit-identical to the
// scalar recurrence.
#include "gemm.h"

#include <cblas.h>
#include <immintrin.h>

// GCC 12 reports its own AVX-512 intrinsic headers ("'__Y' may be used uninitialized"): a known
// false positive of the compiler's headers, not of this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>

#include "mpt/numerics.h"
#include "parallel.h"
#include "scratch.h"

namespace mpt {

void gemm_f32(const GemmShape& s, const float* a, const float* b, float* c) {
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    if (!s.accumulate) for (int64_t i = 0; i < s.m * s.n; ++i) c[i] = 0.0f;
    return;
  }
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(s.m), static_cast<blasint>(s.n), static_cast<blasint>(s.k), 1.0f, a,
              static_cast<blasint>(s.trans_a ? s.m : s.k), b, static_cast<blasint>(s.trans_b ? s.k : s.n),
              s.accumulate ? 1.0f : 0.0f, c, static_cast<blasint>(s.n));
}

namespace {

// Computes rows [r0, r1) x columns [c0, c1) of C = A[M,K] x B[K,N] (row-major, N = n columns,
// C holding the initial accumulators) with the fp16-accumulator recurrence.
using BlockKernel = void (*)(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t r0, int64_t r1,
                             int64_t c0, int64_t c1);

// The reference recurrence, one element at a time.
void f16_block_scalar(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1) {
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = c0; j < c1; ++j) {
      float acc = c[i * n + j];
      for (int64_t p = 0; p < k; ++p) acc = round_to_f16(std::fma(a[i * k + p], b[p * n + j], acc));
      c[i * n + j] = acc;
    }
}

#define MPT_AVX2 __attribute__((target("avx2,f16c,fma")))
#define MPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

MPT_AVX2 inline __m256 f16_round8(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// One row, 32 columns from j, 4 accumulators of 8 lanes.
MPT_AVX2 void f16_tile_avx2(const float* a_row, const float* b, float* c_row, int64_t n, int64_t k, int64_t j) {
  __m256 acc[4];
  for (int v = 0; v < 4; ++v) acc[v] = _mm256_loadu_ps(c_row + j + 8 * v);
  for (int64_t p = 0; p < k; ++p) {
    __m256 av = _mm256_set1_ps(a_row[p]);
    for (int v = 0; v < 4; ++v) acc[v] = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(b + p * n + j + 8 * v), acc[v]));
  }
  for (int v = 0; v < 4; ++v) _mm256_storeu_ps(c_row + j + 8 * v, acc[v]);
}

MPT_AVX2 void f16_block_avx2(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t r0, int64_t r1,
                             int64_t c0, int64_t c1) {
  for (int64_t i = r0; i < r1; ++i) {
    int64_t j = c0;
    for (; j + 32 <= c1; j += 32) f16_tile_avx2(a + i * k, b, c + i * n, n, k, j);
    f16_block_scalar(a, b, c, n, k, i, i + 1, j, c1);  // the last < 32 columns
  }
}

MPT_AVX512 inline __m512 f16_round16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// ROWS rows x 32 columns of C from column j (masks cut the last block): ROWS*2 accumulators,
// enough independent chains to hide the latency of a multiply-add and two conversions.
template <int ROWS>
MPT_AVX512 void f16_tile_avx512(const float* a_rows, const float* b, float* c_rows, int64_t n, int64_t k, int64_t j,
                                __mmask16 m0, __mmask16 m1) {
  __m512 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) {
    acc[r][0] = _mm512_maskz_loadu_ps(m0, c_rows + r * n + j);
    acc[r][1] = _mm512_maskz_loadu_ps(m1, c_rows + r * n + j + 16);
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * n + j), b1 = _mm512_maskz_loadu_ps(m1, b + p * n + j + 16);
    for (int r = 0; r < ROWS; ++r) {
      __m512 av = _mm512_set1_ps(a_rows[r * k + p]);
      acc[r][0] = f16_round16(_mm512_fmadd_ps(av, b0, acc[r][0]));
      acc[r][1] = f16_round16(_mm512_fmadd_ps(av, b1, acc[r][1]));
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    _mm512_mask_storeu_ps(c_rows + r * n + j, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c_rows + r * n + j + 16, m1, acc[r][1]);
  }
}

inline __mmask16 lane_mask(int64_t lanes) {
  return lanes >= 16 ? __mmask16(0xffff) : lanes <= 0 ? __mmask16(0) : __mmask16((1u << lanes) - 1);
}

MPT_AVX512 void f16_block_avx512(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t r0,
                                 int64_t r1, int64_t c0, int64_t c1) {
  for (int64_t j = c0; j < c1; j += 32) {
    __mmask16 m0 = lane_mask(c1 - j), m1 = lane_mask(c1 - j - 16);
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) f16_tile_avx512<4>(a + i * k, b, c + i * n, n, k, j, m0, m1);
    for (; i < r1; ++i) f16_tile_avx512<1>(a + i * k, b, c + i * n, n, k, j, m0, m1);
  }
}

BlockKernel pick_block_kernel() {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return f16_block_avx512;
  return avx2 ? f16_block_avx2 : f16_block_scalar;
}

// Copies a stored [rows, cols] matrix transposed into [cols, rows].
// Cache-blocked, so neither side is walked with a large stride for long.
ScratchFloats transposed(const float* src, int64_t rows, int64_t cols) {
  ScratchFloats out(static_cast<size_t>(rows * cols));
  const int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) out[static_cast<size_t>(c * rows + r)] = src[r * cols + c];
  return out;
}

}  // namespace

void gemm_f16_partials(const GemmShape& s, const float* a, const float* b, float* c) {
  static const BlockKernel block_kernel = pick_block_kernel();
  ScratchFloats a_rows, b_rows;
  if (s.trans_a) { a_rows = transposed(a, s.k, s.m); a = a_rows.data(); }
  if (s.trans_b) { b_rows = transposed(b, s.n, s.k); b = b_rows.data(); }
  if (!s.accumulate) std::fill(c, c + s.m * s.n, 0.0f);
  // Tasks of 4 rows x 256 columns; every element's recurrence stays inside one task, so the split
  // never changes a result. Each chunk gets enough multiply-adds to pay for waking a thread.
  const int64_t kRows = 4, kCols = 256;
  int64_t row_blocks = (s.m + kRows - 1) / kRows, col_blocks = (s.n + kCols - 1) / kCols;
  int64_t min_tasks = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, kRows * kCols * s.k));
  parallel_for(row_blocks * col_blocks, min_tasks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t r0 = (t % row_blocks) * kRows, c0 = (t / row_blocks) * kCols;
      block_kernel(a, b, c, s.n, s.k, r0, std::min(s.m, r0 + kRows), c0, std::min(s.n, c0 + kCols));
    }
  });
}

}  // namespace mpt
