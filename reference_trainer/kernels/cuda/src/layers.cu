/* Device code of the layer kernels: widening copies and im2col/col2im for the cuBLAS products,
 * the products with an fp16 accumulator (direct loops that round the running sum to fp16 after
 * every multiply-add, in the documented order), bias reductions, max pooling and group norm.
 */

#include <cstdint>

#include "device_numerics.h"
#include "device_scratch.h"
#include "grid_stride.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

using dev::load_float;
using dev::store_float;
using dev::round_through_f16;

/* One step of a running sum: fp32, or an fp16 accumulator rounded after each addition. The
 * products of the fp16-accumulator kernels use fmaf, one rounding as the CPU's std::fma. */
__device__ __forceinline__ float accumulate(float acc, float term, bool partials_fp16) {
  float s = acc + term;
  return partials_fp16 ? round_through_f16(s) : s;
}

__device__ double warp_block_sum(double v, double* shared) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += shared[w];
    shared[0] = total;
  }
  __syncthreads();
  double result = shared[0];
  __syncthreads();
  return result;
}

// [SECTION] widening, reductions, fp16-accumulator products

__global__ void widen_kernel(Flat x, float* out) {
  MPT_FOR_EACH(i, x.n) out[i] = load_float(x.data, x.dtype, i);
}

/* out[c] = sum_r m[r, c], sequential over r (the order of a row-by-row CPU loop). */
__global__ void sum_rows_kernel(Flat m, int64_t rows, int64_t cols, Flat out, bool fp16) {
  MPT_FOR_EACH(c, cols) {
    float acc = 0.0f;
    for (int64_t r = 0; r < rows; ++r) acc = accumulate(acc, load_float(m.data, m.dtype, r * cols + c), fp16);
    store_float(out.data, out.dtype, c, acc);
  }
}

/* out[k] = sum_{n,p} dy[n,k,p] with an fp16 accumulator: one sequential sum per channel. */
__global__ void sum_channels_fp16_kernel(Flat dy, int64_t batch, int64_t channels, int64_t plane,
                                         Flat out) {
  MPT_FOR_EACH(k, channels) {
    float acc = 0.0f;
    for (int64_t n = 0; n < batch; ++n) {
      int64_t base = (n * channels + k) * plane;
      for (int64_t p = 0; p < plane; ++p) acc = accumulate(acc, load_float(dy.data, dy.dtype, base + p), true);
    }
    store_float(out.data, out.dtype, k, acc);
  }
}

/* The same with fp32 partials: one block per channel, summed in double, rounded once. */
__global__ void sum_channels_kernel(Flat dy, int64_t batch, int64_t channels, int64_t plane,
                                    Flat out) {
  __shared__ double shared[32];
  int64_t k = blockIdx.x;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < batch * plane; i += blockDim.x) {
    int64_t n = i / plane, p = i % plane;
    s += load_float(dy.data, dy.dtype, (n * channels + k) * plane + p);
  }
  double total = warp_block_sum(s, shared);
  if (threadIdx.x == 0) store_float(out.data, out.dtype, k, static_cast<float>(total));
}

__global__ void gemm_fp16_partials_kernel(StridedMatrix a, StridedMatrix b, float* c,
                                          int64_t rows, int64_t cols, int64_t depth) {
  MPT_FOR_EACH(idx, rows * cols) {
    int64_t i = idx / cols, j = idx % cols;
    float acc = 0.0f;
    for (int64_t k = 0; k < depth; ++k) {
      float x = load_float(a.m.data, a.m.dtype, i * a.s_row + k * a.s_col);
      float y = load_float(b.m.data, b.m.dtype, k * b.s_row + j * b.s_col);
      acc = round_through_f16(fmaf(x, y, acc));
    }
    c[idx] = acc;
  }
}

// [SECTION] convolution helpers

__global__ void im2col_kernel(Flat x, ConvShape s, int64_t n0, int64_t count, void* col,
                              int col_dtype) {
  int64_t per_sample = s.crs() * s.pq();
  MPT_FOR_EACH(idx, count * per_sample) {
    int64_t i = idx / per_sample, rest = idx % per_sample;
    int64_t crs = rest / s.pq(), pq = rest % s.pq();
    int64_t c = crs / (s.R * s.S), r = (crs / s.S) % s.R, sc = crs % s.S;
    int64_t h = (pq / s.Q) * s.stride - s.padding + r, w = (pq % s.Q) * s.stride - s.padding + sc;
    bool inside = h >= 0 && h < s.H && w >= 0 && w < s.W;
    int64_t src = (((n0 + i) * s.C + c) * s.H + h) * s.W + w;
    if (col_dtype == x.dtype && x.dtype != dev::F32) {  // 16-bit: copy the bits
      static_cast<uint16_t*>(col)[idx] = inside ? static_cast<const uint16_t*>(x.data)[src] : 0;
    } else {
      static_cast<float*>(col)[idx] = inside ? load_float(x.data, x.dtype, src) : 0.0f;
    }
  }
}

/* dx[n0+i, c, h, w] = sum over (r, s) of dcol[i, (c,r,s), (p,q)] where the window at (p,q)
 * covers (h,w); summed in fp32 in (r, s) order. */
__global__ void col2im_kernel(const float* dcol, ConvShape s, int64_t n0, int64_t count, Flat dx) {
  int64_t per_sample = s.C * s.H * s.W;
  MPT_FOR_EACH(idx, count * per_sample) {
    int64_t i = idx / per_sample, rest = idx % per_sample;
    int64_t c = rest / (s.H * s.W), h = (rest / s.W) % s.H, w = rest % s.W;
    float acc = 0.0f;
    for (int64_t r = 0; r < s.R; ++r) {
      int64_t hp = h + s.padding - r;
      if (hp < 0 || hp % s.stride != 0 || hp / s.stride >= s.P) continue;
      for (int64_t sc = 0; sc < s.S; ++sc) {
        int64_t wq = w + s.padding - sc;
        if (wq < 0 || wq % s.stride != 0 || wq / s.stride >= s.Q) continue;
        int64_t crs = (c * s.R + r) * s.S + sc;
        acc += dcol[(i * s.crs() + crs) * s.pq() + (hp / s.stride) * s.Q + wq / s.stride];
      }
    }
    store_float(dx.data, dx.dtype, (n0 + i) * per_sample + rest, acc);
  }
}

/* Forward with an fp16 accumulator, the CPU's im2col order: acc over (c, r, s), padding included
 * as zero terms (fmaf(w, 0, acc) can turn a -0 sum into +0, so skipping them would differ). */
__global__ void conv_forward_fp16_kernel(Flat x, Flat w, ConvShape s, float* acc_out) {
  MPT_FOR_EACH(idx, s.N * s.K * s.pq()) {
    int64_t n = idx / (s.K * s.pq()), k = (idx / s.pq()) % s.K, p = (idx % s.pq()) / s.Q,
            q = idx % s.Q;
    float acc = 0.0f;
    for (int64_t c = 0; c < s.C; ++c) {
      for (int64_t r = 0; r < s.R; ++r) {
        int64_t h = p * s.stride - s.padding + r;
        for (int64_t sc = 0; sc < s.S; ++sc) {
          int64_t wc = q * s.stride - s.padding + sc;
          bool inside = h >= 0 && h < s.H && wc >= 0 && wc < s.W;
          float xv = inside ? load_float(x.data, x.dtype, ((n * s.C + c) * s.H + h) * s.W + wc) : 0.0f;
          float wv = load_float(w.data, w.dtype, ((k * s.C + c) * s.R + r) * s.S + sc);
          acc = round_through_f16(fmaf(wv, xv, acc));
        }
      }
    }
    acc_out[idx] = acc;
  }
}

/* Backward data with an fp16 accumulator, as the CPU computes it: each column entry
 * dcol[(c,r,s),(p,q)] is a running sum over k, and dx[n,c,h,w] sums the column entries that came
 * from it in (r, s) order, each addition rounded to fp16. */
__global__ void conv_backward_data_fp16_kernel(Flat dy, Flat w, ConvShape s, Flat dx) {
  MPT_FOR_EACH(idx, s.N * s.C * s.H * s.W) {
    int64_t n = idx / (s.C * s.H * s.W), c = (idx / (s.H * s.W)) % s.C, h = (idx / s.W) % s.H,
            wc = idx % s.W;
    float acc = 0.0f;
    for (int64_t r = 0; r < s.R; ++r) {
      int64_t hp = h + s.padding - r;
      if (hp < 0 || hp % s.stride != 0 || hp / s.stride >= s.P) continue;
      for (int64_t sc = 0; sc < s.S; ++sc) {
        int64_t wq = wc + s.padding - sc;
        if (wq < 0 || wq % s.stride != 0 || wq / s.stride >= s.Q) continue;
        int64_t at = (hp / s.stride) * s.Q + wq / s.stride;
        float column = 0.0f;
        for (int64_t k = 0; k < s.K; ++k) {
          float g = load_float(dy.data, dy.dtype, (n * s.K + k) * s.pq() + at);
          float wv = load_float(w.data, w.dtype, ((k * s.C + c) * s.R + r) * s.S + sc);
          column = round_through_f16(fmaf(wv, g, column));
        }
        acc = round_through_f16(acc + column);
      }
    }
    store_float(dx.data, dx.dtype, idx, acc);
  }
}

/* Backward weight with an fp16 accumulator: dw[k,c,r,s] runs over n, then (p, q), padding
 * included as zero terms, as the CPU's per-sample products continue one running sum. */
__global__ void conv_backward_weight_fp16_kernel(Flat dy, Flat x, ConvShape s, Flat dw) {
  MPT_FOR_EACH(idx, s.K * s.crs()) {
    int64_t k = idx / s.crs(), c = (idx / (s.R * s.S)) % s.C, r = (idx / s.S) % s.R,
            sc = idx % s.S;
    float acc = 0.0f;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t p = 0; p < s.P; ++p) {
        int64_t h = p * s.stride - s.padding + r;
        for (int64_t q = 0; q < s.Q; ++q) {
          int64_t wc = q * s.stride - s.padding + sc;
          bool inside = h >= 0 && h < s.H && wc >= 0 && wc < s.W;
          float g = load_float(dy.data, dy.dtype, ((n * s.K + k) * s.P + p) * s.Q + q);
          float xv = inside ? load_float(x.data, x.dtype, ((n * s.C + c) * s.H + h) * s.W + wc) : 0.0f;
          acc = round_through_f16(fmaf(g, xv, acc));
        }
      }
    }
    store_float(dw.data, dw.dtype, idx, acc);
  }
}

// [SECTION] pooling

/* The first largest value of each window wins; a NaN wins and stays (it propagates). */
__global__ void maxpool_forward_kernel(Flat x, Flat y, int32_t* argmax, int64_t planes,
                                       int64_t H, int64_t W, int64_t P, int64_t Q,
                                       int64_t kernel, int64_t stride) {
  MPT_FOR_EACH(idx, planes * P * Q) {
    int64_t plane = idx / (P * Q), p = (idx / Q) % P, q = idx % Q;
    const int64_t base = plane * H * W;
    int64_t best = (p * stride) * W + q * stride;
    float best_value = load_float(x.data, x.dtype, base + best);
    for (int64_t r = 0; r < kernel; ++r) {
      for (int64_t s = 0; s < kernel; ++s) {
        int64_t at = (p * stride + r) * W + q * stride + s;
        float v = load_float(x.data, x.dtype, base + at);
        if (!isnan(best_value) && (v > best_value || isnan(v))) {
          best_value = v;
          best = at;
        }
      }
    }
    store_float(y.data, y.dtype, idx, best_value);
    argmax[idx] = static_cast<int32_t>(best);
  }
}

/* acc (fp32, zeroed) += dy at argmax, one plane per thread in output order, so overlapping
 * windows add up in the CPU's order; an index outside the plane is skipped (the CPU library
 * rejects it before running, which the device cannot do without waiting). */
__global__ void maxpool_backward_kernel(Flat dy, const int32_t* argmax, float* acc, int64_t planes,
                                        int64_t HW, int64_t PQ) {
  MPT_FOR_EACH(plane, planes) {
    for (int64_t o = 0; o < PQ; ++o) {
      int32_t at = argmax[plane * PQ + o];
      if (at < 0 || at >= HW) continue;
      acc[plane * HW + at] += load_float(dy.data, dy.dtype, plane * PQ + o);
    }
  }
}

__global__ void round_into_kernel(const float* acc, Flat out) {
  MPT_FOR_EACH(i, out.n) store_float(out.data, out.dtype, i, acc[i]);
}

// [SECTION] group norm (one block per (n, group); a group's elements are contiguous)

__global__ void group_norm_forward_kernel(Flat x, Flat gamma, Flat beta, Flat y, float* mean_out,
                                          float* rstd_out, GroupNormShape s, double eps) {
  __shared__ double shared[32];
  int64_t ng = blockIdx.x, cg = s.C / s.groups, count = cg * s.HW;
  int64_t base = ng * count, c0 = (ng % s.groups) * cg;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += load_float(x.data, x.dtype, base + i);
  double mean = warp_block_sum(sum, shared) / static_cast<double>(count);
  double sq = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    double d = load_float(x.data, x.dtype, base + i) - mean;
    sq += d * d;
  }
  double var = warp_block_sum(sq, shared) / static_cast<double>(count);
  float mean_f = static_cast<float>(mean);
  float rstd_f = static_cast<float>(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) {
    mean_out[ng] = mean_f;
    rstd_out[ng] = rstd_f;
  }
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    int64_t c = c0 + i / s.HW;
    float xhat = (load_float(x.data, x.dtype, base + i) - mean_f) * rstd_f;
    float v = xhat * load_float(gamma.data, gamma.dtype, c) + load_float(beta.data, beta.dtype, c);
    store_float(y.data, y.dtype, base + i, v);
  }
}

/* dx = rstd * (dy*gamma - mean(dy*gamma) - xhat * mean(dy*gamma*xhat)) over the group; the
 * means from sums of double products, the rest in fp32, as the CPU library. */
__global__ void group_norm_backward_data_kernel(Flat dy, Flat x, Flat gamma, const float* mean,
                                                const float* rstd, Flat dx, GroupNormShape s) {
  __shared__ double shared[32];
  int64_t ng = blockIdx.x, cg = s.C / s.groups, count = cg * s.HW;
  int64_t base = ng * count, c0 = (ng % s.groups) * cg;
  float m = mean[ng], rs = rstd[ng];
  double a = 0.0, b = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    double g = static_cast<double>(load_float(dy.data, dy.dtype, base + i)) *
               load_float(gamma.data, gamma.dtype, c0 + i / s.HW);
    float xhat = (load_float(x.data, x.dtype, base + i) - m) * rs;
    a += g;
    b += g * xhat;
  }
  float mean_a = static_cast<float>(warp_block_sum(a, shared) / static_cast<double>(count));
  float mean_b = static_cast<float>(warp_block_sum(b, shared) / static_cast<double>(count));
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float g = load_float(dy.data, dy.dtype, base + i) * load_float(gamma.data, gamma.dtype, c0 + i / s.HW);
    float xhat = (load_float(x.data, x.dtype, base + i) - m) * rs;
    store_float(dx.data, dx.dtype, base + i, rs * (g - mean_a - xhat * mean_b));
  }
}

/* dgamma[c] = sum dy*xhat, dbeta[c] = sum dy over n and the plane; one block per channel. */
__global__ void group_norm_backward_affine_kernel(Flat dy, Flat x, const float* mean,
                                                  const float* rstd, Flat dgamma, Flat dbeta,
                                                  GroupNormShape s) {
  __shared__ double shared[32];
  int64_t c = blockIdx.x, cg = s.C / s.groups;
  double dg = 0.0, db = 0.0;
  for (int64_t i = threadIdx.x; i < s.N * s.HW; i += blockDim.x) {
    int64_t n = i / s.HW, at = (n * s.C + c) * s.HW + i % s.HW, ng = n * s.groups + c / cg;
    float g = load_float(dy.data, dy.dtype, at);
    float xhat = (load_float(x.data, x.dtype, at) - mean[ng]) * rstd[ng];
    dg += static_cast<double>(g) * xhat;
    db += g;
  }
  double total_dg = warp_block_sum(dg, shared);
  double total_db = warp_block_sum(db, shared);
  if (threadIdx.x == 0) {
    store_float(dgamma.data, dgamma.dtype, c, static_cast<float>(total_dg));
    store_float(dbeta.data, dbeta.dtype, c, static_cast<float>(total_db));
  }
}

}  // namespace

// [SECTION] launchers

cudaError_t widen_to_f32(Flat x, float* out, cudaStream_t stream) {
  if (x.n == 0) return cudaSuccess;
  MPT_LAUNCH(widen_kernel, blocks_for(x.n), kThreads, stream)(x, out);
  return cudaGetLastError();
}

cudaError_t sum_rows(Flat m, int64_t rows, int64_t cols, Flat out, bool partials_fp16,
                     cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  MPT_LAUNCH(sum_rows_kernel, blocks_for(cols), kThreads, stream)(m, rows, cols, out, partials_fp16);
  return cudaGetLastError();
}

cudaError_t sum_channels(Flat dy, int64_t batch, int64_t channels, int64_t plane, Flat out,
                         bool partials_fp16, cudaStream_t stream) {
  if (channels == 0) return cudaSuccess;
  if (partials_fp16) {
    MPT_LAUNCH(sum_channels_fp16_kernel, blocks_for(channels), kThreads, stream)(dy, batch, channels,
                                                                           plane, out);
  } else {
    MPT_LAUNCH(sum_channels_kernel, static_cast<unsigned>(channels), kThreads, stream)(dy, batch,
                                                                                 channels, plane, out);
  }
  return cudaGetLastError();
}

cudaError_t gemm_fp16_partials(StridedMatrix a, StridedMatrix b, float* c, int64_t rows,
                               int64_t cols, int64_t depth, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  MPT_LAUNCH(gemm_fp16_partials_kernel, blocks_for(rows * cols), kThreads, stream)(a, b, c, rows, cols,
                                                                              depth);
  return cudaGetLastError();
}

cudaError_t im2col(Flat x, const ConvShape& s, int64_t n0, int64_t count, void* col,
                   int col_dtype, cudaStream_t stream) {
  int64_t n = count * s.crs() * s.pq();
  if (n == 0) return cudaSuccess;
  MPT_LAUNCH(im2col_kernel, blocks_for(n), kThreads, stream)(x, s, n0, count, col, col_dtype);
  return cudaGetLastError();
}

cudaError_t col2im(const float* dcol, const ConvShape& s, int64_t n0, int64_t count, Flat dx,
                   cudaStream_t stream) {
  int64_t n = count * s.C * s.H * s.W;
  if (n == 0) return cudaSuccess;
  MPT_LAUNCH(col2im_kernel, blocks_for(n), kThreads, stream)(dcol, s, n0, count, dx);
  return cudaGetLastError();
}

cudaError_t conv_forward_fp16_partials(Flat x, Flat w, const ConvShape& s, float* acc,
                                       cudaStream_t stream) {
  int64_t n = s.N * s.K * s.pq();
  if (n == 0) return cudaSuccess;
  MPT_LAUNCH(conv_forward_fp16_kernel, blocks_for(n), kThreads, stream)(x, w, s, acc);
  return cudaGetLastError();
}

cudaError_t conv_backward_data_fp16_partials(Flat dy, Flat w, const ConvShape& s, Flat dx,
                                             cudaStream_t stream) {
  if (dx.n == 0) return cudaSuccess;
  MPT_LAUNCH(conv_backward_data_fp16_kernel, blocks_for(dx.n), kThreads, stream)(dy, w, s, dx);
  return cudaGetLastError();
}

cudaError_t conv_backward_weight_fp16_partials(Flat dy, Flat x, const ConvShape& s, Flat dw,
                                               cudaStream_t stream) {
  if (dw.n == 0) return cudaSuccess;
  MPT_LAUNCH(conv_backward_weight_fp16_kernel, blocks_for(dw.n), kThreads, stream)(dy, x, s, dw);
  return cudaGetLastError();
}

cudaError_t maxpool2d_forward(Flat x, Flat y, int32_t* argmax, int64_t planes, int64_t H,
                              int64_t W, int64_t P, int64_t Q, int64_t kernel, int64_t stride,
                              cudaStream_t stream) {
  int64_t n = planes * P * Q;
  if (n == 0) return cudaSuccess;
  MPT_LAUNCH(maxpool_forward_kernel, blocks_for(n), kThreads, stream)(x, y, argmax, planes, H, W, P, Q,
                                                                 kernel, stride);
  return cudaGetLastError();
}

cudaError_t maxpool2d_backward(Flat dy, const int32_t* argmax, Flat dx, int64_t planes, int64_t H,
                               int64_t W, int64_t P, int64_t Q, cudaStream_t stream) {
  // Sums are kept in fp32 and rounded once, as the CPU's zeroed fp32 output buffer.
  float* acc = static_cast<float*>(dx.data);
  Scratch acc_mem(stream);
  cudaError_t e = cudaSuccess;
  if (dx.dtype != dev::F32) {
    void* p = nullptr;
    e = acc_mem.get(static_cast<size_t>(dx.n) * sizeof(float), &p);
    acc = static_cast<float*>(p);
  }
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(acc, 0, static_cast<size_t>(dx.n) * sizeof(float), stream);
  if (e == cudaSuccess && planes > 0) {
    MPT_LAUNCH(maxpool_backward_kernel, blocks_for(planes), kThreads, stream)(dy, argmax, acc, planes,
                                                                         H * W, P * Q);
    e = cudaGetLastError();
  }
  if (dx.dtype != dev::F32 && e == cudaSuccess && dx.n > 0) {
    MPT_LAUNCH(round_into_kernel, blocks_for(dx.n), kThreads, stream)(acc, dx);
    e = cudaGetLastError();
  }
  return e;
}

cudaError_t group_norm_forward(Flat x, Flat gamma, Flat beta, Flat y, float* mean, float* rstd,
                               const GroupNormShape& s, double eps, cudaStream_t stream) {
  if (s.N * s.groups == 0) return cudaSuccess;
  MPT_LAUNCH(group_norm_forward_kernel, static_cast<unsigned>(s.N * s.groups), kThreads, stream)(
      x, gamma, beta, y, mean, rstd, s, eps);
  return cudaGetLastError();
}

cudaError_t group_norm_backward(Flat dy, Flat x, Flat gamma, const float* mean, const float* rstd,
                                Flat dx, Flat dgamma, Flat dbeta, const GroupNormShape& s,
                                cudaStream_t stream) {
  if (s.N * s.groups == 0) return cudaSuccess;
  MPT_LAUNCH(group_norm_backward_data_kernel, static_cast<unsigned>(s.N * s.groups), kThreads, stream)(
      dy, x, gamma, mean, rstd, dx, s);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  MPT_LAUNCH(group_norm_backward_affine_kernel, static_cast<unsigned>(s.C), kThreads, stream)(
      dy, x, mean, rstd, dgamma, dbeta, s);
  return cudaGetLastError();
}

}  // namespace mpt::cuda::detail
