/* Internal interface between the host dispatch (backend.cpp, gemm.cpp) and the device code
 * (elementwise.cu, layers.cu). Arguments here are already validated: shapes agree, dtypes are
 * supported, pointers are device pointers. Every function queues work on `stream` and returns the
 * launch's cudaError_t (cudaSuccess when queued).
 */
#ifndef MPT_CUDA_LAUNCHERS_H
#define MPT_CUDA_LAUNCHERS_H

#include <cstdint>

#include "mpt/abi.h"
#include "mpt/byte_formats.h"

#if defined(MPT_HOST_EMULATION)
/* Tests run the device code on the host through this shim (tests/reference_trainer/cuda/emulation). */
#include "host_emulation.h"
#define MPT_LAUNCH(kernel, blocks, threads, stream) ::mpt_emulation::launcher(kernel, blocks, threads, stream)
#else
#include <cuda_runtime.h>
/* kernel<<<blocks, threads, 0, stream>>>, written so the emulation can replace it. */
#define MPT_LAUNCH(kernel, blocks, threads, stream) kernel<<<(blocks), (threads), 0, (stream)>>>
#endif

#if defined(__CUDACC__)
#define MPT_CUDA_HD __host__ __device__
#else
#define MPT_CUDA_HD
#endif

namespace mpt::cuda::detail {

/* A flat device array of `n` elements of an mpt_dtype. */
struct Flat {
  void* data;
  int dtype;
  int64_t n;
};

/* Geometry of a 2-D convolution, NCHW input [N,C,H,W], weights [K,C,R,S], output [N,K,P,Q]. */
struct ConvShape {
  int64_t N, C, H, W, K, R, S, P, Q;
  int64_t stride, padding;
  MPT_CUDA_HD int64_t crs() const { return C * R * S; }
  MPT_CUDA_HD int64_t pq() const { return P * Q; }
};

// [SECTION] elementwise.cu
cudaError_t cast(Flat x, Flat y, cudaStream_t stream);
cudaError_t fill(Flat y, double value, cudaStream_t stream);
/* Writes NaN (kind 0), +Inf (1) or -Inf (2) at x[index]. */
cudaError_t inject_fault(Flat x, int64_t index, int kind, cudaStream_t stream);
cudaError_t relu_forward(Flat x, Flat y, cudaStream_t stream);
cudaError_t relu_backward(Flat dy, Flat y, Flat dx, cudaStream_t stream);
/* y = x + bias[column] over rows of `cols` elements, read from fp32 `acc`, rounded to y's dtype. */
cudaError_t add_bias_rows(const float* acc, Flat bias, Flat y, int64_t cols, cudaStream_t stream);
/* y[n, k, p] = acc[n, k, p] + bias[k] (bias may be null), rounded to y's dtype. */
cudaError_t add_bias_channels(const float* acc, Flat bias, Flat y, int64_t channels,
                              int64_t plane, cudaStream_t stream);
cudaError_t log_softmax_forward(Flat x, Flat y, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t log_softmax_backward(Flat dy, Flat y, Flat dx, int64_t rows, int64_t cols,
                                 cudaStream_t stream);
cudaError_t nll_loss_forward(Flat logp, const int32_t* labels, Flat loss, int64_t rows,
                             int64_t cols, cudaStream_t stream);
cudaError_t nll_loss_backward(const int32_t* labels, Flat scale, Flat dlogp, int64_t rows,
                              int64_t cols, cudaStream_t stream);
cudaError_t accuracy_count(Flat logp, const int32_t* labels, int32_t* correct, int64_t rows,
                           int64_t cols, cudaStream_t stream);
/* Zeroes found_inf, then for each gradient: flags non-finite values and multiplies by 1/scale. */
cudaError_t amp_unscale_check(const float* scale, const Flat* grads, int n_grads,
                              float* found_inf, cudaStream_t stream);
cudaError_t amp_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf,
                             double growth_factor, double backoff_factor,
                             int64_t growth_interval, cudaStream_t stream);

struct SgdParams {
  double lr, momentum, weight_decay;
  int64_t step;  // counting from 1: the momentum buffer starts at step 1
  bool stochastic_rounding;
  uint64_t stream_key;  // random_stream_key(seed, step)
};
cudaError_t sgd_step(Flat param, Flat grad, Flat momentum_buf, const SgdParams& p,
                     cudaStream_t stream);

struct AdamWParams {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
  bool stochastic_rounding;
  uint64_t stream_key;
};
cudaError_t adamw_step(Flat param, Flat grad, Flat exp_avg, Flat exp_avg_sq, const AdamWParams& p,
                       cudaStream_t stream);

// [SECTION] quantize.cu
/* The formats and tiles (mpt/byte_formats.h) are the CPU library's. */
using mpt::ByteFormat;
using mpt::TileGrid;
/* The dtype of a dequantize kernel's scales. */
inline constexpr int kScaleF32 = 0, kScaleE8M0 = 1, kScaleE4M3 = 2;
/* Per-tensor current or delayed scaling (history non-null: its `steps` amaxes, newest first),
 * rounded down to a power of two when asked; `work` holds at least 12 bytes of device scratch. */
cudaError_t fp8_quantize_tensor(Flat x, uint8_t* q, const ByteFormat& f, float* scale_inv, float* history,
                                int64_t steps, bool update_history, bool pow2, void* work, cudaStream_t stream);
cudaError_t fp8_quantize_mx(Flat x, uint8_t* q, uint8_t* scales, const TileGrid& g, const ByteFormat& f, bool round_up,
                            cudaStream_t stream);
cudaError_t fp8_quantize_block(Flat x, uint8_t* q, float* scale_inv, const TileGrid& g, const ByteFormat& f,
                               cudaStream_t stream);
/* `work` holds 8 bytes of device scratch. */
cudaError_t fp8_quantize_nvfp4(Flat x, uint8_t* q, uint8_t* scales, float* global_scale_inv, const TileGrid& g,
                               void* work, cudaStream_t stream);
/* y = value of q times its tile's scale (times *global_scale_inv where given), in fp32. */
cudaError_t fp8_dequantize(const uint8_t* q, const ByteFormat& f, const void* scales, int scale_kind, const TileGrid& g,
                           const float* global_scale_inv, Flat y, cudaStream_t stream);

// [SECTION] layers.cu
/* Converts `x` exactly to fp32 into `out` (n elements). */
cudaError_t widen_to_f32(Flat x, float* out, cudaStream_t stream);
/* Column sums: out[c] = sum over rows of m[r, c] (m is rows x cols), rounded to out's dtype;
 * with fp16 partials the running sum is rounded to fp16 after each addition. */
cudaError_t sum_rows(Flat m, int64_t rows, int64_t cols, Flat out, bool partials_fp16,
                     cudaStream_t stream);
/* out[k] = sum over n and p of dy[n, k, p]; same rounding rules as sum_rows. */
cudaError_t sum_channels(Flat dy, int64_t batch, int64_t channels, int64_t plane, Flat out,
                         bool partials_fp16, cudaStream_t stream);
/* The products of the linear kernels with an fp16 accumulator, in k order:
 * c[i, j] = sum_k a(i, k) * b(k, j) with a(i,k) = A[i*a_si + k*a_sk], b likewise. */
struct StridedMatrix {
  Flat m;
  int64_t s_row, s_col;  // element strides of the (row, column) index
};
cudaError_t gemm_fp16_partials(StridedMatrix a, StridedMatrix b, float* c, int64_t rows,
                               int64_t cols, int64_t depth, cudaStream_t stream);
/* im2col of samples [n0, n0+count): col[(i*CRS + crs) * PQ + pq], values copied exactly in x's
 * dtype (or widened to fp32 when `col_dtype` is F32). */
cudaError_t im2col(Flat x, const ConvShape& s, int64_t n0, int64_t count, void* col,
                   int col_dtype, cudaStream_t stream);
/* dx[n0+i] = col2im(dcol[i]) for the chunk, sums in fp32, rounded to dx's dtype. */
cudaError_t col2im(const float* dcol, const ConvShape& s, int64_t n0, int64_t count, Flat dx,
                   cudaStream_t stream);
/* The convolution kernels with an fp16 accumulator (direct loops; see docs/gpu.md). */
cudaError_t conv_forward_fp16_partials(Flat x, Flat w, const ConvShape& s, float* acc,
                                       cudaStream_t stream);
cudaError_t conv_backward_data_fp16_partials(Flat dy, Flat w, const ConvShape& s, Flat dx,
                                             cudaStream_t stream);
cudaError_t conv_backward_weight_fp16_partials(Flat dy, Flat x, const ConvShape& s, Flat dw,
                                               cudaStream_t stream);
cudaError_t maxpool2d_forward(Flat x, Flat y, int32_t* argmax, int64_t planes, int64_t H,
                              int64_t W, int64_t P, int64_t Q, int64_t kernel, int64_t stride,
                              cudaStream_t stream);
cudaError_t maxpool2d_backward(Flat dy, const int32_t* argmax, Flat dx, int64_t planes, int64_t H,
                               int64_t W, int64_t P, int64_t Q, cudaStream_t stream);
struct GroupNormShape {
  int64_t N, C, HW, groups;
};
cudaError_t group_norm_forward(Flat x, Flat gamma, Flat beta, Flat y, float* mean, float* rstd,
                               const GroupNormShape& s, double eps, cudaStream_t stream);
cudaError_t group_norm_backward(Flat dy, Flat x, Flat gamma, const float* mean, const float* rstd,
                                Flat dx, Flat dgamma, Flat dbeta, const GroupNormShape& s,
                                cudaStream_t stream);

}  // namespace mpt::cuda::detail

#endif /* MPT_CUDA_LAUNCHERS_H */
