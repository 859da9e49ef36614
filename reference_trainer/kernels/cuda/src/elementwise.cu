/* Device code of the pointwise kernels, the loss and metric kernels, the loss scaler and the
 * optimizers. Each follows the CPU library's formula term for term (kernels_pointwise.cpp,
 * kernels_amp.cpp, kernels_optim.cpp): inputs read exactly into fp32 (device_numerics.h), fp32
 * arithmetic in the same order, one rounding to the output dtype. Built with --fmad=false so no
 * multiply-add is fused where the CPU rounds twice.
 */

#include <cmath>
#include <cstdint>

#include "device_numerics.h"
#include "grid_stride.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

using dev::load_float;
using dev::store_float;

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

/* Writes NaN, +Inf or -Inf (kind 0, 1, 2) at one element. */
__global__ void inject_fault_kernel(Flat x, int64_t index, int kind) {
  float value = kind == 0 ? __int_as_float(0x7fc00000) : kind == 1 ? INFINITY : -INFINITY;
  store_float(x.data, x.dtype, index, value);
}

/* y = 0 where x < 0, else x: a NaN passes through, so a tool sees where it went. */
__global__ void relu_forward_kernel(Flat x, Flat y) {
  MPT_FOR_EACH(i, y.n) {
    float v = load_float(x.data, x.dtype, i);
    store_float(y.data, y.dtype, i, v < 0.0f ? 0.0f : v);
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

// [SECTION] log-softmax, loss and accuracy
// One thread per row, summing in the CPU library's order (fp32, left to right), so the sums agree
// bit for bit; only expf/logf may differ from the host's libm by an ulp or two.

/* y = x - max - log(sum(exp(x - max))); a NaN never becomes the maximum. */
__global__ void log_softmax_forward_kernel(Flat x, Flat y, int64_t rows, int64_t cols) {
  MPT_FOR_EACH(r, rows) {
    int64_t base = r * cols;
    float top = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) {
      float v = load_float(x.data, x.dtype, base + c);
      top = v > top ? v : top;
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += expf(load_float(x.data, x.dtype, base + c) - top);
    float log_sum = logf(sum);
    for (int64_t c = 0; c < cols; ++c) {
      store_float(y.data, y.dtype, base + c, load_float(x.data, x.dtype, base + c) - top - log_sum);
    }
  }
}

/* dx = dy - exp(y) * sum(dy). */
__global__ void log_softmax_backward_kernel(Flat dy, Flat y, Flat dx, int64_t rows, int64_t cols) {
  MPT_FOR_EACH(r, rows) {
    int64_t base = r * cols;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += load_float(dy.data, dy.dtype, base + c);
    for (int64_t c = 0; c < cols; ++c) {
      float g = load_float(dy.data, dy.dtype, base + c);
      store_float(dx.data, dx.dtype, base + c, g - expf(load_float(y.data, y.dtype, base + c)) * sum);
    }
  }
}

/* loss = -(sum of logp[n, label[n]]) / N, summed in order. The CPU library rejects a label outside
 * [0, cols) before running; the device cannot without waiting, so such a label makes the loss NaN. */
__global__ void nll_loss_forward_kernel(Flat logp, const int32_t* labels, Flat loss, int64_t rows,
                                        int64_t cols) {
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t label = labels[r];
    sum += (label >= 0 && label < cols) ? load_float(logp.data, logp.dtype, r * cols + label) : NAN;
  }
  store_float(loss.data, loss.dtype, 0, -sum / static_cast<float>(rows));
}

/* dlogp = -(scale / N) at the label, 0 elsewhere. */
__global__ void nll_loss_backward_kernel(const int32_t* labels, Flat scale, Flat dlogp,
                                         int64_t rows, int64_t cols) {
  float at_label = -(load_float(scale.data, scale.dtype, 0) / static_cast<float>(rows));
  MPT_FOR_EACH(i, dlogp.n) {
    int64_t r = i / cols, c = i % cols;
    store_float(dlogp.data, dlogp.dtype, i, labels[r] == c ? at_label : 0.0f);
  }
}

/* Counts rows whose first largest entry sits at the label; a row holding a NaN never counts. */
__global__ void accuracy_count_kernel(Flat logp, const int32_t* labels, int32_t* correct,
                                      int64_t rows, int64_t cols) {
  MPT_FOR_EACH(r, rows) {
    int64_t best = 0;
    bool has_nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      float v = load_float(logp.data, logp.dtype, r * cols + c);
      has_nan = has_nan || isnan(v);
      if (v > load_float(logp.data, logp.dtype, r * cols + best)) best = c;
    }
    if (!has_nan && best == labels[r]) atomicAdd(correct, 1);
  }
}

// [SECTION] loss scaler

/* inv_scale = fp32(1 / double(scale)); found_inf was zeroed before the first gradient and is set
 * from the values before unscaling. */
/* A NaN times the reciprocal keeps its bits, quieted, as the CPU's multiply does (the GPU's would
 * give its canonical NaN). */
__global__ void unscale_check_kernel(const float* scale, Flat g, float* found_inf) {
  float inv_scale = static_cast<float>(1.0 / static_cast<double>(*scale));
  MPT_FOR_EACH(i, g.n) {
    float v = load_float(g.data, g.dtype, i);
    if (!isfinite(v)) atomicExch(found_inf, 1.0f);  // many threads may set it: one atomic store each
    float unscaled = inv_scale == 1.0f ? v
                     : isnan(v)        ? __uint_as_float(__float_as_uint(v) | 0x00400000u)
                                       : v * inv_scale;
    store_float(g.data, g.dtype, i, unscaled);
  }
}

/* PyTorch's _amp_update_scale_: products in double, rounded to fp32; a grown scale is kept only
 * when finite. */
__global__ void update_scale_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                    double growth, double backoff, int64_t interval) {
  float current = *scale;
  int32_t successful = *tracker;
  if (*found_inf != 0.0f) {
    *scale = static_cast<float>(current * backoff);
    *tracker = 0;
  } else if (successful + 1 == interval) {
    float grown = static_cast<float>(current * growth);
    if (isfinite(grown)) *scale = grown;
    *tracker = 0;
  } else {
    *tracker = successful + 1;
  }
}

// [SECTION] optimizers
// Scalar constants are formed in double on the host, as the CPU library does, and used as fp32.

/* The value a tensor of `dtype` holds after storing v. */
__device__ __forceinline__ float held_as(int dtype, float v) {
  return dtype == dev::F16 ? dev::f16_to_f32(dev::f32_to_f16(v))
         : dtype == dev::BF16 ? dev::bf16_to_f32(dev::f32_to_bf16(v)) : v;
}

/* The new parameter value, rounded stochastically with the element's own random bits when asked
 * (16-bit parameters only: fp32 parameters are stored as computed). */
__device__ void store_param(Flat p, int64_t i, float v, bool stochastic, uint64_t key) {
  if (stochastic && p.dtype != dev::F32) {
    dev::store_float_stochastic(p.data, p.dtype, i, v,
                                dev::counter_random(key, static_cast<uint64_t>(i)));
  } else {
    store_float(p.data, p.dtype, i, v);
  }
}

/* PyTorch's SGD: d = g + wd*p; buf = d at step 1, buf*momentum + d after; p = p - lr*buf. */
__global__ void sgd_kernel(Flat param, Flat grad, Flat buf, float lr, float momentum, float wd,
                           bool first_step, bool stochastic, uint64_t key) {
  MPT_FOR_EACH(i, param.n) {
    float p = load_float(param.data, param.dtype, i);
    float d = load_float(grad.data, grad.dtype, i);
    if (wd != 0.0f) d = d + wd * p;
    if (momentum != 0.0f) {
      float m = first_step ? d : load_float(buf.data, buf.dtype, i) * momentum + d;
      d = held_as(buf.dtype, m);
      store_float(buf.data, buf.dtype, i, d);
    }
    store_param(param, i, p - lr * d, stochastic, key);
  }
}

struct AdamWDevice {
  float decay, lerp_weight, beta2, sq_weight, neg_step_size, bias_correction2_sqrt, eps;
  bool stochastic;
  uint64_t key;
};

/* PyTorch's AdamW: p*decay; exp_avg = lerp(exp_avg, g, 1 - beta1) with torch.lerp's two-sided
 * formula; exp_avg_sq = exp_avg_sq*beta2 + (1-beta2)*g*g; p += (-lr/bc1) * (m / denom). */
__global__ void adamw_kernel(Flat param, Flat grad, Flat exp_avg, Flat exp_avg_sq, AdamWDevice a) {
  MPT_FOR_EACH(i, param.n) {
    float p = load_float(param.data, param.dtype, i) * a.decay;
    float g = load_float(grad.data, grad.dtype, i);
    float m = load_float(exp_avg.data, exp_avg.dtype, i);
    m = a.lerp_weight < 0.5f ? m + a.lerp_weight * (g - m) : g - (g - m) * (1.0f - a.lerp_weight);
    m = held_as(exp_avg.dtype, m);
    float v = held_as(exp_avg_sq.dtype,
                      load_float(exp_avg_sq.data, exp_avg_sq.dtype, i) * a.beta2 + a.sq_weight * g * g);
    store_float(exp_avg.data, exp_avg.dtype, i, m);
    store_float(exp_avg_sq.data, exp_avg_sq.dtype, i, v);
    float denom = sqrtf(v) / a.bias_correction2_sqrt + a.eps;
    store_param(param, i, p + a.neg_step_size * (m / denom), a.stochastic, a.key);
  }
}

}  // namespace

// [SECTION] launchers

#define MPT_LAUNCH_OVER(n, kernel, ...)                                    \
  do {                                                                     \
    if ((n) == 0) return cudaSuccess;                                      \
    MPT_LAUNCH(kernel, blocks_for(n), kThreads, stream)(__VA_ARGS__);           \
    return cudaGetLastError();                                             \
  } while (0)

cudaError_t cast(Flat x, Flat y, cudaStream_t stream) { MPT_LAUNCH_OVER(y.n, cast_kernel, x, y); }

cudaError_t fill(Flat y, double value, cudaStream_t stream) {
  MPT_LAUNCH_OVER(y.n, fill_kernel, y, static_cast<float>(value), static_cast<int32_t>(value));
}

cudaError_t inject_fault(Flat x, int64_t index, int kind, cudaStream_t stream) {
  MPT_LAUNCH(inject_fault_kernel, 1, 1, stream)(x, index, kind);
  return cudaGetLastError();
}

cudaError_t relu_forward(Flat x, Flat y, cudaStream_t stream) {
  MPT_LAUNCH_OVER(y.n, relu_forward_kernel, x, y);
}

cudaError_t relu_backward(Flat dy, Flat y, Flat dx, cudaStream_t stream) {
  MPT_LAUNCH_OVER(dx.n, relu_backward_kernel, dy, y, dx);
}

cudaError_t add_bias_rows(const float* acc, Flat bias, Flat y, int64_t cols, cudaStream_t stream) {
  MPT_LAUNCH_OVER(y.n, add_bias_rows_kernel, acc, bias, y, cols);
}

cudaError_t add_bias_channels(const float* acc, Flat bias, Flat y, int64_t channels,
                              int64_t plane, cudaStream_t stream) {
  MPT_LAUNCH_OVER(y.n, add_bias_channels_kernel, acc, bias, y, channels, plane);
}

cudaError_t log_softmax_forward(Flat x, Flat y, int64_t rows, int64_t cols, cudaStream_t stream) {
  MPT_LAUNCH_OVER(rows, log_softmax_forward_kernel, x, y, rows, cols);
}

cudaError_t log_softmax_backward(Flat dy, Flat y, Flat dx, int64_t rows, int64_t cols,
                                 cudaStream_t stream) {
  MPT_LAUNCH_OVER(rows, log_softmax_backward_kernel, dy, y, dx, rows, cols);
}

cudaError_t nll_loss_forward(Flat logp, const int32_t* labels, Flat loss, int64_t rows,
                             int64_t cols, cudaStream_t stream) {
  MPT_LAUNCH(nll_loss_forward_kernel, 1, 1, stream)(logp, labels, loss, rows, cols);
  return cudaGetLastError();
}

cudaError_t nll_loss_backward(const int32_t* labels, Flat scale, Flat dlogp, int64_t rows,
                              int64_t cols, cudaStream_t stream) {
  MPT_LAUNCH_OVER(dlogp.n, nll_loss_backward_kernel, labels, scale, dlogp, rows, cols);
}

cudaError_t accuracy_count(Flat logp, const int32_t* labels, int32_t* correct, int64_t rows,
                           int64_t cols, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(correct, 0, sizeof(int32_t), stream);
  if (e != cudaSuccess || cols == 0) return e;
  MPT_LAUNCH_OVER(rows, accuracy_count_kernel, logp, labels, correct, rows, cols);
}

cudaError_t amp_unscale_check(const float* scale, const Flat* grads, int n_grads,
                              float* found_inf, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(found_inf, 0, sizeof(float), stream);
  for (int i = 0; i < n_grads && e == cudaSuccess; ++i) {
    if (grads[i].n == 0) continue;
    MPT_LAUNCH(unscale_check_kernel, blocks_for(grads[i].n), kThreads, stream)(scale, grads[i], found_inf);
    e = cudaGetLastError();
  }
  return e;
}

cudaError_t amp_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf,
                             double growth_factor, double backoff_factor,
                             int64_t growth_interval, cudaStream_t stream) {
  MPT_LAUNCH(update_scale_kernel, 1, 1, stream)(scale, growth_tracker, found_inf, growth_factor,
                                           backoff_factor, growth_interval);
  return cudaGetLastError();
}

cudaError_t sgd_step(Flat param, Flat grad, Flat momentum_buf, const SgdParams& p,
                     cudaStream_t stream) {
  MPT_LAUNCH_OVER(param.n, sgd_kernel, param, grad, momentum_buf, static_cast<float>(p.lr),
                  static_cast<float>(p.momentum), static_cast<float>(p.weight_decay), p.step == 1,
                  p.stochastic_rounding, p.stream_key);
}

cudaError_t adamw_step(Flat param, Flat grad, Flat exp_avg, Flat exp_avg_sq, const AdamWParams& p,
                       cudaStream_t stream) {
  double bias_correction1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  double bias_correction2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  AdamWDevice a{};
  a.decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  a.lerp_weight = static_cast<float>(1.0 - p.beta1);
  a.beta2 = static_cast<float>(p.beta2);
  a.sq_weight = static_cast<float>(1.0 - p.beta2);
  a.neg_step_size = static_cast<float>(-(p.lr / bias_correction1));
  a.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  a.eps = static_cast<float>(p.eps);
  a.stochastic = p.stochastic_rounding;
  a.key = p.stream_key;
  MPT_LAUNCH_OVER(param.n, adamw_kernel, param, grad, exp_avg, exp_avg_sq, a);
}

}  // namespace mpt::cuda::detail
