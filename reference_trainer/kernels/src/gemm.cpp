// gemm_f32 hands the product to OpenBLAS. gemm_f16_partials emulates an fp16 accumulator: it
// keeps each C element's running sum and rounds it to fp16 after every multiply-add, in k order.
// The vector paths keep 4 rows x 32 columns or 1 row x 128 columns (AVX-512), or 1 row x 32
// columns (AVX2) of C in registers; every element still sums its terms in k order, so they are
// bit-identical to the scalar recurrence.
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

// OpenBLAS runs single-threaded: the library's own pool splits the product by columns (or rows)
// of C, one sgemm per chunk. Left to itself, OpenBLAS keeps its worker threads spinning in
// sched_yield after each call, taking the second core from the elementwise kernels that follow on
// the pool, and from any tool running beside the program.
void gemm_f32(const GemmShape& s, const float* a, const float* b, float* c) {
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded_blas;
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    if (!s.accumulate) for (int64_t i = 0; i < s.m * s.n; ++i) c[i] = 0.0f;
    return;
  }
  // Split the longer side of C: columns, or rows when C is tall and narrow (the weight gradient of
  // a convolution is K x CRS, summed over N*P*Q). A chunk holds at least ~256K multiply-adds, so
  // that it pays for handing it to a thread; every element still sums its k terms in one sgemm.
  auto chunk_of = [&](int64_t other_side) {
    return std::max<int64_t>(4, (int64_t{1} << 18) / std::max<int64_t>(1, other_side * s.k));
  };
  const blasint lda = static_cast<blasint>(s.trans_a ? s.m : s.k), ldb = static_cast<blasint>(s.trans_b ? s.k : s.n);
  auto sgemm = [&](int64_t rows, int64_t cols, const float* a_part, const float* b_part, float* c_part) {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(rows), static_cast<blasint>(cols), static_cast<blasint>(s.k), 1.0f, a_part, lda,
                b_part, ldb, s.accumulate ? 1.0f : 0.0f, c_part, static_cast<blasint>(s.n));
  };
  if (s.n >= s.m) {
    parallel_for(s.n, chunk_of(s.m), [&](int64_t c0, int64_t c1) {
      // Columns c0..c1 of op(B): B[:, c0:c1] stored [K,N], or rows c0..c1 of B stored [N,K].
      sgemm(s.m, c1 - c0, a, s.trans_b ? b + c0 * s.k : b + c0, c + c0);
    });
  } else {
    parallel_for(s.m, chunk_of(s.n), [&](int64_t r0, int64_t r1) {
      // Rows r0..r1 of op(A): A[r0:r1, :] stored [M,K], or columns r0..r1 of A stored [K,M].
      sgemm(r1 - r0, s.n, s.trans_a ? a + r0 : a + r0 * s.k, b, c + r0 * s.n);
    });
  }
}

namespace {

// The part of C = A[M,K] x B[K,N] (row-major, n columns) that one call of a block kernel advances:
// rows [r0, r1), columns [c0, c1), and the terms p in [k0, k1) of the recurrence. C holds each
// element's accumulator before and after, so a product can be advanced one k-chunk at a time.
struct Block {
  int64_t r0, r1, c0, c1, k0, k1;
};
using BlockKernel = void (*)(const float* a, const float* b, float* c, int64_t n, int64_t k, const Block& blk);

// The reference recurrence, one element at a time.
void f16_block_scalar(const float* a, const float* b, float* c, int64_t n, int64_t k, const Block& blk) {
  for (int64_t i = blk.r0; i < blk.r1; ++i)
    for (int64_t j = blk.c0; j < blk.c1; ++j) {
      float acc = c[i * n + j];
      for (int64_t p = blk.k0; p < blk.k1; ++p) acc = round_to_f16(std::fma(a[i * k + p], b[p * n + j], acc));
      c[i * n + j] = acc;
    }
}

#define MPT_AVX2 __attribute__((target("avx2,f16c,fma")))
#define MPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

MPT_AVX2 inline __m256 f16_round8(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// One row, 32 columns from j, 4 accumulators of 8 lanes.
MPT_AVX2 void f16_tile_avx2(const float* a_row, const float* b, float* c_row, int64_t n, int64_t j, int64_t k0,
                            int64_t k1) {
  __m256 acc[4];
  for (int v = 0; v < 4; ++v) acc[v] = _mm256_loadu_ps(c_row + j + 8 * v);
  for (int64_t p = k0; p < k1; ++p) {
    __m256 av = _mm256_set1_ps(a_row[p]);
    for (int v = 0; v < 4; ++v) acc[v] = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(b + p * n + j + 8 * v), acc[v]));
  }
  for (int v = 0; v < 4; ++v) _mm256_storeu_ps(c_row + j + 8 * v, acc[v]);
}

MPT_AVX2 void f16_block_avx2(const float* a, const float* b, float* c, int64_t n, int64_t k, const Block& blk) {
  for (int64_t i = blk.r0; i < blk.r1; ++i) {
    int64_t j = blk.c0;
    for (; j + 32 <= blk.c1; j += 32) f16_tile_avx2(a + i * k, b, c + i * n, n, j, blk.k0, blk.k1);
    f16_block_scalar(a, b, c, n, k, Block{i, i + 1, j, blk.c1, blk.k0, blk.k1});  // last < 32 columns
  }
}

MPT_AVX512 inline __m512 f16_round16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __mmask16 lane_mask(int64_t lanes) {
  return lanes >= 16 ? __mmask16(0xffff) : lanes <= 0 ? __mmask16(0) : __mmask16((1u << lanes) - 1);
}

// ROWS rows x VECS*16 columns of C from column j (masks stop at col_end): ROWS*VECS
// accumulators, enough independent chains to hide the latency of a multiply-add and two
// conversions.
template <int ROWS, int VECS>
MPT_AVX512 void f16_tile_avx512(const float* a_rows, int64_t k, const float* b, float* c_rows, int64_t n, int64_t j,
                                int64_t col_end, int64_t k0, int64_t k1) {
  __mmask16 mask[VECS];
  for (int v = 0; v < VECS; ++v) mask[v] = lane_mask(col_end - j - 16 * v);
  __m512 acc[ROWS][VECS];
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < VECS; ++v) acc[r][v] = _mm512_maskz_loadu_ps(mask[v], c_rows + r * n + j + 16 * v);
  for (int64_t p = k0; p < k1; ++p) {
    __m512 bv[VECS];
    for (int v = 0; v < VECS; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * n + j + 16 * v);
    for (int r = 0; r < ROWS; ++r) {
      __m512 av = _mm512_set1_ps(a_rows[r * k + p]);
      for (int v = 0; v < VECS; ++v) acc[r][v] = f16_round16(_mm512_fmadd_ps(av, bv[v], acc[r][v]));
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < VECS; ++v) _mm512_mask_storeu_ps(c_rows + r * n + j + 16 * v, mask[v], acc[r][v]);
}

MPT_AVX512 void f16_block_avx512(const float* a, const float* b, float* c, int64_t n, int64_t k, const Block& blk) {
  int64_t i = blk.r0;
  for (; i + 4 <= blk.r1; i += 4)  // 4 rows x 32 columns
    for (int64_t j = blk.c0; j < blk.c1; j += 32)
      f16_tile_avx512<4, 2>(a + i * k, k, b, c + i * n, n, j, blk.c1, blk.k0, blk.k1);
  for (; i < blk.r1; ++i)  // a remaining row: 1 row x 128 columns
    for (int64_t j = blk.c0; j < blk.c1; j += 128)
      f16_tile_avx512<1, 8>(a + i * k, k, b, c + i * n, n, j, blk.c1, blk.k0, blk.k1);
}

BlockKernel pick_block_kernel() {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return f16_block_avx512;
  return avx2 ? f16_block_avx2 : f16_block_scalar;
}

// Copies a stored [rows, cols] matrix transposed into [cols, rows]; cache-blocked, so neither
// side is walked with a large stride for long.
void transpose_into(const float* src, int64_t rows, int64_t cols, float* out) {
  const int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) out[c * rows + r] = src[r * cols + c];
}

ScratchFloats transposed(const float* src, int64_t rows, int64_t cols) {
  ScratchFloats out(static_cast<size_t>(rows * cols));
  transpose_into(src, rows, cols, out.data());
  return out;
}

// C[M,N] (+)= A[M,K] x B[K,N], all stored row-major as written.
void f16_product(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  static const BlockKernel block_kernel = pick_block_kernel();
  // Tasks of 16 rows x 256 columns; inside a task the terms go in chunks of 256, so the chunk of
  // B in use (256 x 256 floats) stays in cache while every row tile of the task reads it. Each
  // element's recurrence stays in k order inside one task: the split never changes a result.
  const int64_t kRows = 16, kCols = 256, kChunk = 256;
  int64_t row_groups = (m + kRows - 1) / kRows, col_blocks = (n + kCols - 1) / kCols;
  int64_t min_tasks = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, kRows * kCols * k));
  parallel_for(row_groups * col_blocks, min_tasks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t r0 = (t % row_groups) * kRows, c0 = (t / row_groups) * kCols;
      for (int64_t k0 = 0; k0 < k; k0 += kChunk)
        block_kernel(a, b, c, n, k, Block{r0, std::min(m, r0 + kRows), c0, std::min(n, c0 + kCols), k0, std::min(k, k0 + kChunk)});
    }
  });
}

}  // namespace

void gemm_f16_partials(const GemmShape& s, const float* a, const float* b, float* c) {
  if (!s.accumulate) std::fill(c, c + s.m * s.n, 0.0f);
  if (s.m == 0 || s.n == 0 || s.k == 0) return;
  // The products need A as [M,K] and B as [K,N]. When B is the one to transpose and it is larger
  // than A, compute C^T = op(B)^T x op(A)^T instead: the same sums in the same order, with the
  // smaller matrix transposed (plus C, which is small for the shapes where this pays).
  int64_t direct_cost = (s.trans_a ? s.m * s.k : 0) + (s.trans_b ? s.n * s.k : 0);
  int64_t swapped_cost = (s.trans_a ? 0 : s.m * s.k) + (s.trans_b ? 0 : s.n * s.k) + 2 * s.m * s.n;
  if (swapped_cost < direct_cost) {
    ScratchFloats b_rows, a_cols, c_t(static_cast<size_t>(s.n * s.m));
    const float* bt = s.trans_b ? b : (b_rows = transposed(b, s.k, s.n)).data();  // [N,K]
    const float* at = s.trans_a ? a : (a_cols = transposed(a, s.m, s.k)).data();  // [K,M]
    transpose_into(c, s.m, s.n, c_t.data());
    f16_product(bt, at, c_t.data(), s.n, s.m, s.k);
    transpose_into(c_t.data(), s.n, s.m, c);
    return;
  }
  ScratchFloats a_rows, b_rows;
  if (s.trans_a) { a_rows = transposed(a, s.k, s.m); a = a_rows.data(); }
  if (s.trans_b) { b_rows = transposed(b, s.n, s.k); b = b_rows.data(); }
  f16_product(a, b, c, s.m, s.n, s.k);
}

}  // namespace mpt
