// gemm_f32 hands the product to OpenBLAS. gemm_f16_partials emulates an fp16 accumulator: it
// keeps each C element's running sum and rounds it to fp16 after every multiply-add, in k order.
// The vector paths do 64 (AVX-512) or 32 (AVX2) columns of one C row at a time, so the
// summation order per element is exactly the scalar one and the results are bit-identical.
#include "gemm.h"

#include <cblas.h>
#include <immintrin.h>

// GCC 12 reports its own AVX-512 intrinsic headers ("'__Y' may be used uninitialized"): a known
// false positive of the compiler's headers, not of this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <vector>

#include "mpt/numerics.h"
#include "parallel.h"

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

// One row of C: c[j] for j in [0, n), with a_row[k] and b (row-major [K,N]).
using RowKernel = void (*)(const float* a_row, const float* b, float* c_row, int64_t n, int64_t k);

void f16_row_scalar(const float* a_row, const float* b, float* c, int64_t n, int64_t k) {
  for (int64_t j = 0; j < n; ++j) {
    float acc = c[j];
    for (int64_t p = 0; p < k; ++p) acc = round_to_f16(std::fma(a_row[p], b[p * n + j], acc));
    c[j] = acc;
  }
}

#define MPT_AVX2 __attribute__((target("avx2,f16c,fma")))
#define MPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

MPT_AVX2 inline __m256 f16_round8(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

MPT_AVX2 void f16_row_avx2(const float* a_row, const float* b, float* c, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 c0 = _mm256_loadu_ps(c + j), c1 = _mm256_loadu_ps(c + j + 8);
    __m256 c2 = _mm256_loadu_ps(c + j + 16), c3 = _mm256_loadu_ps(c + j + 24);
    for (int64_t p = 0; p < k; ++p) {
      __m256 av = _mm256_set1_ps(a_row[p]);
      const float* bp = b + p * n + j;
      c0 = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(bp), c0));
      c1 = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(bp + 8), c1));
      c2 = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(bp + 16), c2));
      c3 = f16_round8(_mm256_fmadd_ps(av, _mm256_loadu_ps(bp + 24), c3));
    }
    _mm256_storeu_ps(c + j, c0); _mm256_storeu_ps(c + j + 8, c1);
    _mm256_storeu_ps(c + j + 16, c2); _mm256_storeu_ps(c + j + 24, c3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 c0 = _mm256_loadu_ps(c + j);
    for (int64_t p = 0; p < k; ++p)
      c0 = f16_round8(_mm256_fmadd_ps(_mm256_set1_ps(a_row[p]), _mm256_loadu_ps(b + p * n + j), c0));
    _mm256_storeu_ps(c + j, c0);
  }
  // Remaining columns: same recurrence, scalar (b keeps its row stride n).
  for (; j < n; ++j) {
    float acc = c[j];
    for (int64_t p = 0; p < k; ++p) acc = round_to_f16(std::fma(a_row[p], b[p * n + j], acc));
    c[j] = acc;
  }
}

MPT_AVX512 inline __m512 f16_round16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

MPT_AVX512 void f16_row_avx512(const float* a_row, const float* b, float* c, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    __m512 c0 = _mm512_loadu_ps(c + j), c1 = _mm512_loadu_ps(c + j + 16);
    __m512 c2 = _mm512_loadu_ps(c + j + 32), c3 = _mm512_loadu_ps(c + j + 48);
    for (int64_t p = 0; p < k; ++p) {
      __m512 av = _mm512_set1_ps(a_row[p]);
      const float* bp = b + p * n + j;
      c0 = f16_round16(_mm512_fmadd_ps(av, _mm512_loadu_ps(bp), c0));
      c1 = f16_round16(_mm512_fmadd_ps(av, _mm512_loadu_ps(bp + 16), c1));
      c2 = f16_round16(_mm512_fmadd_ps(av, _mm512_loadu_ps(bp + 32), c2));
      c3 = f16_round16(_mm512_fmadd_ps(av, _mm512_loadu_ps(bp + 48), c3));
    }
    _mm512_storeu_ps(c + j, c0); _mm512_storeu_ps(c + j + 16, c1);
    _mm512_storeu_ps(c + j + 32, c2); _mm512_storeu_ps(c + j + 48, c3);
  }
  for (; j < n; j += 16) {  // masked tail blocks of up to 16 columns
    __mmask16 mask = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    __m512 c0 = _mm512_maskz_loadu_ps(mask, c + j);
    for (int64_t p = 0; p < k; ++p)
      c0 = f16_round16(_mm512_fmadd_ps(_mm512_set1_ps(a_row[p]), _mm512_maskz_loadu_ps(mask, b + p * n + j), c0));
    _mm512_mask_storeu_ps(c + j, mask, c0);
  }
}

RowKernel pick_row_kernel() {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return f16_row_avx512;
  return avx2 ? f16_row_avx2 : f16_row_scalar;
}

// Copies a stored [rows, cols] matrix transposed into [cols, rows].
std::vector<float> transposed(const float* src, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = src[r * cols + c];
  return out;
}

}  // namespace

void gemm_f16_partials(const GemmShape& s, const float* a, const float* b, float* c) {
  static const RowKernel row_kernel = pick_row_kernel();
  std::vector<float> a_rows, b_rows;
  if (s.trans_a) { a_rows = transposed(a, s.k, s.m); a = a_rows.data(); }
  if (s.trans_b) { b_rows = transposed(b, s.n, s.k); b = b_rows.data(); }
  if (!s.accumulate) for (int64_t i = 0; i < s.m * s.n; ++i) c[i] = 0.0f;
  parallel_for(s.m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) row_kernel(a + i * s.k, b, c + i * s.n, s.n, s.k);
  });
}

}  // namespace mpt
