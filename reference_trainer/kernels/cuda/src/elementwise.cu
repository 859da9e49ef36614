/* Device code of the pointwise kernels, the loss and metric kernels, the loss scaler and the
 * optimizers. Every kernel reads its inputs exactly into fp32 (device_numerics.h), computes in
 * fp32 in the same order as the CPU library, and rounds once to the output dtype. Built with
 * --fmad=false so that no multiply-add is fused where the CPU rounds twice.
 */
#include <cuda_runtime.h>

#include <cstdint>

#include "device_numerics.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

using dev::load_float;
using dev::store_float;

constexpr int kThreads = 256;

/* Enough blocks for a grid-stride loop over n elements, capped so huge tensors reuse threads. */
unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 65535) b = 65535;
  return static_cast<unsigned>(b);
}

#define MPT_FOR_EACH(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// [SECTION] data movement and activation

__global__ void cast_kernel(Flat x, Flat y) {
  MPT_FOR_EACH(i, y.n) store_float(y.data, y.dtype, i, load_float(x.data, x.dtype, i));
}

__global__ void fill_kernel(Flat y, float value, int32_t ivalue) {
  MPT_FOR_EACH(i, y.n) {
    if (y.dtype == dev::I32) {
      static_cast<int32_t*>(y.data)[i] = ivalue;
    } else {
      store_float(y.data, y.dtype, i, value);
    }
  }
}

/* y = x where x > 0, else 0 (a NaN gives 0, as the comparison is false). */
__global__ void relu_forward_kernel(Flat x, Flat y) {
  MPT_FOR_EACH(i, y.n) {
    float v = load_float(x.data, x.dtype, i);
    store_float(y.data, y.dtype, i, v > 0.0f ? v : 0.0f);
  }
}

__global__ void relu_backward_kernel(Flat dy, Flat y, Flat dx) {
  MPT_FOR_EACH(i, dx.n) {
    float g = load_float(dy.data, dy.dtype, i);
    store_float(dx.data, dx.dtype, i, load_float(y.data, y.dtype, i) > 0.0f ? g : 0.0f);
  }
}

__global__ void add_bias_rows_kernel(const float* acc, Flat bias, Flat y, int64_t cols) {
  MPT_FOR_EACH(i, y.n) {
    float v = acc[i];
    if (bias.data) v = v + load_float(bias.data, bias.dtype, i % cols);
    store_float(y.data, y.dtype, i, v);
  }
}

__global__ void add_bias_channels_kernel(const float* acc, Flat bias, Flat y, int64_t channels,
                                         int64_t plane) {
  MPT_FOR_EACH(i, y.n) {
    float v = acc[i];
    if (bias.data) v = v + load_float(bias.data, bias.dtype, (i / plane) % channels);
    store_float(y.data, y.dtype, i, v);
  }
}

// [SECTION] log-softmax, loss and accuracy (one block per row)

/* Block-wide reduction of `v` with `op`; every thread gets the result. */
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* shared) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T total = shared[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) total = op(total, shared[w]);
    shared[0] = total;
  }
  __syncthreads();
  T result = shared[0];
  __syncthreads();
  return result;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

/* y = x - max - log(sum(exp(x - max))), the sum accumulated in double. */
__global__ void log_softmax_forward_kernel(Flat x, Flat y, int64_t cols) {
  __shared__ float fshared[32];
  __shared__ double dshared[32];
  int64_t row = blockIdx.x;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    m = fmaxf(m, load_float(x.data, x.dtype, row * cols + c));
  }
  m = block_reduce(m, MaxOp{}, fshared);
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    s += expf(load_float(x.data, x.dtype, row * cols + c) - m);
  }
  float log_sum = logf(static_cast<float>(block_reduce(s, SumOp{}, dshared)));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = load_float(x.data, x.dtype, row * cols + c);
    store_float(y.data, y.dtype, row * cols + c, v - m - log_sum);
  }
}

/* dx = dy - exp(y) * sum(dy). */
__global__ void log_softmax_backward_kernel(Flat dy, Flat y, Flat dx, int64_t cols) {
  __shared__ double dshared[32];
  int64_t row = blockIdx.x;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    s += load_float(dy.data, dy.dtype, row * cols + c);
  }
  float sum = static_cast<float>(block_reduce(s, SumOp{}, dshared));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    int64_t i = row * cols + c;
    float g = load_float(dy.data, dy.dtype, i);
    store_float(dx.data, dx.dtype, i, g - expf(load_float(y.data, y.dtype, i)) * sum);
  }
}

/* loss = -mean(logp[n, label[n]]); a label outside [0, cols) makes the loss NaN. */
__global__ void nll_loss_forward_kernel(Flat logp, const int32_t* labels, float* loss,
                                        int64_t rows, int64_t cols) {
  __shared__ double dshared[32];
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    int32_t label = labels[r];
    s += (label >= 0 && label < cols) ? static_cast<double>(load_float(logp.data, logp.dtype, r * cols + label))
                                      : static_cast<double>(NAN);
  }
  double total = block_reduce(s, SumOp{}, dshared);
  if (threadIdx.x == 0) *loss = static_cast<float>(-total / static_cast<double>(rows));
}

/* dlogp = -scale/N at the label, 0 elsewhere. */
__global__ void nll_loss_backward_kernel(const int32_t* labels, const float* scale, Flat dlogp,
                                         int64_t rows, int64_t cols) {
  float at_label = -*scale / static_cast<float>(rows);
  MPT_FOR_EACH(i, dlogp.n) {
    int64_t r = i / cols, c = i % cols;
    store_float(dlogp.data, dlogp.dtype, i, labels[r] == c ? at_label : 0.0f);
  }
}

/* Counts rows whose first largest entry sits at the label. */
__global__ void accuracy_count_kernel(Flat logp, const int32_t* labels, int32_t* correct,
                                      int64_t rows, int64_t cols) {
  MPT_FOR_EACH(r, rows) {
    int64_t best = 0;
    float best_value = load_float(logp.data, logp.dtype, r * cols);
    for (int64_t c = 1; c < cols; ++c) {
      float v = load_float(logp.data, logp.dtype, r * cols + c);
      if (v > best_value) {
        best_value = v;
        best = c;
      }
    }
    if (best == labels[r]) atomicAdd(correct, 1);
  }
}

// [SECTION] loss scaler

__global__ void unscale_check_kernel(const float* scale, Flat g, float* found_inf) {
  float inv_scale = 1.0f / *scale;
  MPT_FOR_EACH(i, g.n) {
    float v = load_float(g.data, g.dtype, i);
    if (!isfinite(v)) *found_inf = 1.0f;
    store_float(g.data, g.dtype, i, v * inv_scale);
  }
}

__global__ void update_scale_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                    float growth, float backoff, int64_t interval) {
  if (*found_inf != 0.0f) {
    *scale = *scale * backoff;
    *tracker = 0;
    return;
  }
  int32_t next = *tracker + 1;
  if (next >= interval) {
    *scale = *scale * growth;
    next = 0;
  }
  *tracker = next;
}

// [SECTION] optimizers

__device__ void store_param(Flat p, int64_t i, float v, bool stochastic, uint64_t key) {
  if (stochastic) {
    dev::store_float_stochastic(p.data, p.dtype, i, v, dev::counter_random(key, i));
  } else {
    store_float(p.data, p.dtype, i, v);
  }
}

/* PyTorch's SGD: g += wd*p; buf = momentum*buf + g; p -= lr*buf (no momentum: p -= lr*g). */
__global__ void sgd_kernel(Flat param, Flat grad, Flat buf, float lr, float momentum, float wd,
                           bool stochastic, uint64_t key) {
  MPT_FOR_EACH(i, param.n) {
    float p = load_float(param.data, param.dtype, i);
    float g = load_float(grad.data, grad.dtype, i);
    if (wd != 0.0f) g = g + wd * p;
    if (momentum != 0.0f) {
      g = momentum * load_float(buf.data, buf.dtype, i) + g;
      store_float(buf.data, buf.dtype, i, g);
    }
    store_param(param, i, p - lr * g, stochastic, key);
  }
}

/* PyTorch's AdamW: p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). */
struct AdamWDevice {
  float lr, beta1, beta2, eps, decay_factor, one_minus_beta1, one_minus_beta2, step_size,
      sqrt_bias_correction2;
  bool stochastic;
  uint64_t key;
};

__global__ void adamw_kernel(Flat param, Flat grad, Flat exp_avg, Flat exp_avg_sq, AdamWDevice a) {
  MPT_FOR_EACH(i, param.n) {
    float p = load_float(param.data, param.dtype, i) * a.decay_factor;
    float g = load_float(grad.data, grad.dtype, i);
    float m = a.beta1 * load_float(exp_avg.data, exp_avg.dtype, i) + a.one_minus_beta1 * g;
    float v = a.beta2 * load_float(exp_avg_sq.data, exp_avg_sq.dtype, i) + a.one_minus_beta2 * g * g;
    store_float(exp_avg.data, exp_avg.dtype, i, m);
    store_float(exp_avg_sq.data, exp_avg_sq.dtype, i, v);
    float denom = sqrtf(v) / a.sqrt_bias_correction2 + a.eps;
    store_param(param, i, p - a.step_size * (m / denom), a.stochastic, a.key);
  }
}

}  // namespace

// [SECTION] launchers

cudaError_t cast(Flat x, Flat y, cudaStream_t stream) {
  if (y.n == 0) return cudaSuccess;
  cast_kernel<<<blocks_for(y.n), kThreads, 0, stream>>>(x, y);
  return cudaGetLastError();
}

cudaError_t fill(Flat y, double value, cudaStream_t stream) {
  if (y.n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(y.n), kThreads, 0, stream>>>(y, static_cast<float>(value),
                                                        static_cast<int32_t>(value));
  return cudaGetLastError();
}

cudaError_t relu_forward(Flat x, Flat y, cudaStream_t stream) {
  if (y.n == 0) return cudaSuccess;
  relu_forward_kernel<<<blocks_for(y.n), kThreads, 0, stream>>>(x, y);
  return cudaGetLastError();
}

cudaError_t relu_backward(Flat dy, Flat y, Flat dx, cudaStream_t stream) {
  if (dx.n == 0) return cudaSuccess;
  relu_backward_kernel<<<blocks_for(dx.n), kThreads, 0, stream>>>(dy, y, dx);
  return cudaGetLastError();
}

cudaError_t add_bias_rows(const float* acc, Flat bias, Flat y, int64_t cols, cudaStream_t stream) {
  if (y.n == 0) return cudaSuccess;
  add_bias_rows_kernel<<<blocks_for(y.n), kThreads, 0, stream>>>(acc, bias, y, cols);
  return cudaGetLastError();
}

cudaError_t add_bias_channels(const float* acc, Flat bias, Flat y, int64_t channels,
                              int64_t plane, cudaStream_t stream) {
  if (y.n == 0) return cudaSuccess;
  add_bias_channels_kernel<<<blocks_for(y.n), kThreads, 0, stream>>>(acc, bias, y, channels, plane);
  return cudaGetLastError();
}

cudaError_t log_softmax_forward(Flat x, Flat y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  log_softmax_forward_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

cudaError_t log_softmax_backward(Flat dy, Flat y, Flat dx, int64_t rows, int64_t cols,
                                 cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  log_softmax_backward_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(dy, y, dx, cols);
  return cudaGetLastError();
}

cudaError_t nll_loss_forward(Flat logp, const int32_t* labels, float* loss, int64_t rows,
                             int64_t cols, cudaStream_t stream) {
  nll_loss_forward_kernel<<<1, 256, 0, stream>>>(logp, labels, loss, rows, cols);
  return cudaGetLastError();
}

cudaError_t nll_loss_backward(const int32_t* labels, const float* scale, Flat dlogp, int64_t rows,
                              int64_t cols, cudaStream_t stream) {
  if (dlogp.n == 0) return cudaSuccess;
  nll_loss_backward_kernel<<<blocks_for(dlogp.n), kThreads, 0, stream>>>(labels, scale, dlogp,
                                                                         rows, cols);
  return cudaGetLastError();
}

cudaError_t accuracy_count(Flat logp, const int32_t* labels, int32_t* correct, int64_t rows,
                           int64_t cols, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(correct, 0, sizeof(int32_t), stream);
  if (e != cudaSuccess || rows == 0 || cols == 0) return e;
  accuracy_count_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(logp, labels, correct, rows, cols);
  return cudaGetLastError();
}

cudaError_t amp_unscale_check(const float* scale, const Flat* grads, int n_grads,
                              float* found_inf, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(found_inf, 0, sizeof(float), stream);
  for (int i = 0; i < n_grads && e == cudaSuccess; ++i) {
    if (grads[i].n == 0) continue;
    unscale_check_kernel<<<blocks_for(grads[i].n), kThreads, 0, stream>>>(scale, grads[i], found_inf);
    e = cudaGetLastError();
  }
  return e;
}

cudaError_t amp_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf,
                             double growth_factor, double backoff_factor,
                             int64_t growth_interval, cudaStream_t stream) {
  update_scale_kernel<<<1, 1, 0, stream>>>(scale, growth_tracker, found_inf,
                                           static_cast<float>(growth_factor),
                                           static_cast<float>(backoff_factor), growth_interval);
  return cudaGetLastError();
}

cudaError_t sgd_step(Flat param, Flat grad, Flat momentum_buf, const SgdParams& p,
                     cudaStream_t stream) {
  if (param.n == 0) return cudaSuccess;
  sgd_kernel<<<blocks_for(param.n), kThreads, 0, stream>>>(
      param, grad, momentum_buf, static_cast<float>(p.lr), static_cast<float>(p.momentum),
      static_cast<float>(p.weight_decay), p.stochastic_rounding, p.stream_key);
  return cudaGetLastError();
}

cudaError_t adamw_step(Flat param, Flat grad, Flat exp_avg, Flat exp_avg_sq, const AdamWParams& p,
                       cudaStream_t stream) {
  if (param.n == 0) return cudaSuccess;
  double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  AdamWDevice a{};
  a.lr = static_cast<float>(p.lr);
  a.beta1 = static_cast<float>(p.beta1);
  a.beta2 = static_cast<float>(p.beta2);
  a.eps = static_cast<float>(p.eps);
  a.decay_factor = static_cast<float>(1.0 - p.lr * p.weight_decay);
  a.one_minus_beta1 = static_cast<float>(1.0 - p.beta1);
  a.one_minus_beta2 = static_cast<float>(1.0 - p.beta2);
  a.step_size = static_cast<float>(p.lr / bc1);
  a.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bc2));
  a.stochastic = p.stochastic_rounding;
  a.key = p.stream_key;
  adamw_kernel<<<blocks_for(param.n), kThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, a);
  return cudaGetLastError();
}

}  // namespace mpt::cuda::detail
