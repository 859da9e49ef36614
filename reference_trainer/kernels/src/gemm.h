// Matrix product of the layer kernels: OpenBLAS sgemm for fp32 partials, and an honest fp16
// accumulator emulation for partials_fp16 (see docs/kernels.md, "Partials").
#ifndef MPT_KERNELS_GEMM_H
#define MPT_KERNELS_GEMM_H

#include <cstdint>

namespace mpt {

// C[M,N] = op(A)[M,K] x op(B)[K,N] (+ C when `accumulate`), all row-major fp32.
// op(A) = A stored [M,K], or A stored [K,M] when trans_a; op(B) likewise with [K,N] / [N,K].
struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;
};

// fp32 partials: OpenBLAS sgemm.
void gemm_f32(const GemmShape& shape, const float* a, const float* b, float* c);

// fp16 partials: for every C element, acc starts at 0 (or C when accumulating) and for
// k = 0, 1, ... becomes fp16(fmaf(a, b, acc)): one fp32 multiply-add, then rounded to fp16
// (nearest even). C holds the final accumulator value, an fp16 value stored in fp32.
void gemm_f16_partials(const GemmShape& shape, const float* a, const float* b, float* c);

inline void gemm(const GemmShape& shape, const float* a, const float* b, float* c, bool partials_fp16) {
  if (partials_fp16) gemm_f16_partials(shape, a, b, c);
  else gemm_f32(shape, a, b, c);
}

}  // namespace mpt

#endif
