/* Host side of the CUDA backend: device discovery, memory, argument checks and the table from
 * kernel name to implementation. Layer products (linear, convolution) are in gemm.cpp; the device
 * code is in elementwise.cu and layers.cu.
 */

#include <cstring>
#include <mutex>
#include <string>

#include "device_numerics.h"
#include "device_scratch.h"
#include "launch_args.h"
#include "launchers.h"
#include "mpt/cuda_backend.h"

namespace mpt::cuda {
namespace detail {

// [SECTION] data movement and pointwise kernels

namespace {

int run_cast(LaunchArgs& a) {
  if (!a.counts(1, 1) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.floating(a.out(0), "y") || !a.same_shape(a.in(0), a.out(0), "x", "y")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(cast(a.in_flat(0), a.out_flat(0), a.stream()));
}

int run_fill(LaunchArgs& a) {
  double value;
  if (!a.counts(0, 1) || !a.on_device() || !a.scalar("value", &value)) return a.fail();
  const mpt_tensor& y = a.out(0);
  if (!is_float_dtype(y.dtype) && y.dtype != MPT_DTYPE_I32) {
    a.bad(std::string("y must be a float dtype or i32, got ") + dtype_name(y.dtype));
    return a.fail();
  }
  if (y.dtype == MPT_DTYPE_I32 && (value != static_cast<double>(static_cast<int64_t>(value)) ||
                                   value > 2147483647.0 || value < -2147483647.0)) {
    a.bad("scalar `value` = " + std::to_string(value) + " is not an i32 value");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(fill(a.out_flat(0), value, a.stream()));
}

/* `copy` may cross between host and device: the CPU library sends it here when either side is
 * on the device. cudaMemcpyDefault works out the direction from the pointers (unified addressing). */
int run_copy(LaunchArgs& a) {
  if (!a.counts(1, 1)) return a.fail();
  const mpt_tensor& x = a.in(0);
  const mpt_tensor& y = a.out(0);
  if (x.dtype != y.dtype) {
    a.bad(std::string("x and y must have the same dtype (") + dtype_name(x.dtype) + " vs " +
          dtype_name(y.dtype) + "); use `cast` to convert");
    return a.fail();
  }
  if (!a.same_shape(x, y, "x", "y")) return a.fail();
  size_t bytes = static_cast<size_t>(element_count(x) * element_bytes(x.dtype));
  if (bytes == 0) return MPT_OK;
  if (!x.data || !y.data) {
    a.bad("x or y has no data");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDefault, a.stream()));
}

int run_inject_fault(LaunchArgs& a) {
  int64_t index, kind;
  if (!a.counts(1, 1) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.dtype_is(a.out(0), a.in(0).dtype, "x (output)") ||
      !a.same_shape(a.in(0), a.out(0), "x", "x (output)") || !a.integer("index", 0, &index) ||
      !a.integer("kind", 0, &kind)) {
    return a.fail();
  }
  if (index >= element_count(a.in(0))) return a.bad("scalar `index` is outside x"), a.fail();
  if (kind > 2) return a.bad("scalar `kind` must be 0 (NaN), 1 (+Inf) or 2 (-Inf)"), a.fail();
  if (a.dry_run()) return MPT_OK;
  cudaError_t e = cudaSuccess;
  if (a.out(0).data != a.in(0).data) {
    e = cudaMemcpyAsync(a.out(0).data, a.in(0).data,
                        static_cast<size_t>(element_count(a.in(0)) * element_bytes(a.in(0).dtype)),
                        cudaMemcpyDeviceToDevice, a.stream());
  }
  if (e == cudaSuccess) e = inject_fault(a.out_flat(0), index, static_cast<int>(kind), a.stream());
  return a.done(e);
}

int run_relu_forward(LaunchArgs& a) {
  if (!a.counts(1, 1) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.floating(a.out(0), "y") || !a.same_shape(a.in(0), a.out(0), "x", "y")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(relu_forward(a.in_flat(0), a.out_flat(0), a.stream()));
}

int run_relu_backward(LaunchArgs& a) {
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.in(0), "dy") ||
      !a.floating(a.in(1), "y") || !a.floating(a.out(0), "dx") ||
      !a.same_shape(a.in(0), a.in(1), "dy", "y") || !a.same_shape(a.in(0), a.out(0), "dy", "dx")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(relu_backward(a.in_flat(0), a.in_flat(1), a.out_flat(0), a.stream()));
}

/* Rows and columns of a [N, O] tensor. */
bool matrix_shape(LaunchArgs& a, const mpt_tensor& t, const char* role, int64_t* rows,
                  int64_t* cols) {
  if (!a.ndim_is(t, 2, role)) return false;
  *rows = t.shape[0];
  *cols = t.shape[1];
  return true;
}

/* Rows over the last dimension of a tensor of any rank (log-softmax). */
bool row_shape(LaunchArgs& a, const mpt_tensor& t, const char* role, int64_t* rows,
               int64_t* cols) {
  if (t.ndim < 1 || t.shape[t.ndim - 1] == 0) {
    return a.bad(std::string(role) + " needs at least one dimension with a nonzero last extent");
  }
  *cols = t.shape[t.ndim - 1];
  *rows = element_count(t) / *cols;
  return true;
}


int run_log_softmax_forward(LaunchArgs& a) {
  int64_t rows, cols;
  if (!a.counts(1, 1) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.floating(a.out(0), "y") || !row_shape(a, a.in(0), "x", &rows, &cols) ||
      !a.same_shape(a.in(0), a.out(0), "x", "y")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(log_softmax_forward(a.in_flat(0), a.out_flat(0), rows, cols, a.stream()));
}

int run_log_softmax_backward(LaunchArgs& a) {
  int64_t rows, cols;
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.in(0), "dy") ||
      !a.floating(a.in(1), "y") || !a.floating(a.out(0), "dx") ||
      !row_shape(a, a.in(0), "dy", &rows, &cols) ||
      !a.same_shape(a.in(0), a.in(1), "dy", "y") || !a.same_shape(a.in(0), a.out(0), "dy", "dx")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(log_softmax_backward(a.in_flat(0), a.in_flat(1), a.out_flat(0), rows, cols,
                                     a.stream()));
}

bool labels_for(LaunchArgs& a, const mpt_tensor& labels, int64_t rows) {
  return a.dtype_is(labels, MPT_DTYPE_I32, "labels") &&
         (element_count(labels) == rows || a.bad("labels must hold one label per row"));
}

int run_nll_loss_forward(LaunchArgs& a) {
  int64_t rows, cols;
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.in(0), "logp") ||
      !matrix_shape(a, a.in(0), "logp", &rows, &cols) || !labels_for(a, a.in(1), rows) ||
      !a.floating(a.out(0), "loss") ||
      (element_count(a.out(0)) != 1 && !a.bad("loss must hold one element")) ||
      (rows == 0 && !a.bad("the batch is empty, its mean is undefined"))) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(nll_loss_forward(a.in_flat(0), static_cast<const int32_t*>(a.in(1).data),
                                 a.out_flat(0), rows, cols, a.stream()));
}

int run_nll_loss_backward(LaunchArgs& a) {
  int64_t rows, cols;
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.out(0), "dlogp") ||
      !matrix_shape(a, a.out(0), "dlogp", &rows, &cols) || !labels_for(a, a.in(0), rows) ||
      !a.floating(a.in(1), "scale") ||
      (element_count(a.in(1)) != 1 && !a.bad("scale must hold one element")) ||
      (rows == 0 && !a.bad("the batch is empty"))) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(nll_loss_backward(static_cast<const int32_t*>(a.in(0).data), a.in_flat(1),
                                  a.out_flat(0), rows, cols, a.stream()));
}

int run_accuracy_count(LaunchArgs& a) {
  int64_t rows, cols;
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.in(0), "logp") ||
      !matrix_shape(a, a.in(0), "logp", &rows, &cols) || !labels_for(a, a.in(1), rows) ||
      !a.dtype_is(a.out(0), MPT_DTYPE_I32, "correct") ||
      (element_count(a.out(0)) != 1 && !a.bad("correct must hold one element"))) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(accuracy_count(a.in_flat(0), static_cast<const int32_t*>(a.in(1).data),
                               static_cast<int32_t*>(a.out(0).data), rows, cols, a.stream()));
}

bool one_f32(LaunchArgs& a, const mpt_tensor& t, const char* role) {
  return a.dtype_is(t, MPT_DTYPE_F32, role) &&
         (element_count(t) == 1 || a.bad(std::string(role) + " must hold one element"));
}

int run_amp_unscale_check(LaunchArgs& a) {
  const mpt_launch_desc& d = a.desc();
  if (d.n_inputs < 1 || d.n_outputs != d.n_inputs) {
    a.bad("expects scale and n gradients as inputs, found_inf and the same n gradients as outputs");
    return a.fail();
  }
  if (!a.on_device() || !one_f32(a, a.in(0), "scale") || !one_f32(a, a.out(0), "found_inf")) {
    return a.fail();
  }
  constexpr int kMaxGrads = 256;
  int n = d.n_inputs - 1;
  if (n > kMaxGrads) {
    a.bad("at most 256 gradient tensors per launch");
    return a.fail();
  }
  Flat grads[kMaxGrads];
  for (int i = 0; i < n; ++i) {
    const mpt_tensor& g = a.in(i + 1);
    if (!a.floating(g, "gradient")) return a.fail();
    if (!a.same_shape(g, a.out(i + 1), "gradient", "gradient (output)")) return a.fail();
    if (a.out(i + 1).data != g.data || a.out(i + 1).dtype != g.dtype) {
      a.bad("gradient " + std::to_string(i) + " must be the same tensor among inputs and outputs");
      return a.fail();
    }
    grads[i] = LaunchArgs::flat(g);
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(amp_unscale_check(static_cast<const float*>(a.in(0).data), grads, n,
                                  static_cast<float*>(a.out(0).data), a.stream()));
}

int run_amp_update_scale(LaunchArgs& a) {
  double growth, backoff;
  int64_t interval;
  if (!a.counts(3, 2) || !a.on_device() || !one_f32(a, a.in(0), "scale") ||
      !a.dtype_is(a.in(1), MPT_DTYPE_I32, "growth_tracker") || !one_f32(a, a.in(2), "found_inf") ||
      !a.scalar("growth_factor", &growth) || !a.scalar("backoff_factor", &backoff) ||
      !a.integer("growth_interval", 1, &interval)) {
    return a.fail();
  }
  if (!one_f32(a, a.out(0), "scale (output)") ||
      !a.dtype_is(a.out(1), MPT_DTYPE_I32, "growth_tracker (output)")) {
    return a.fail();
  }
  if (element_count(a.in(1)) != 1 || element_count(a.out(1)) != 1) {
    return a.bad("growth_tracker must hold one element"), a.fail();
  }
  if (a.out(0).data != a.in(0).data || a.out(1).data != a.in(1).data) {
    a.bad("scale and growth_tracker are updated in place: outputs must be the input tensors");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(amp_update_scale(static_cast<float*>(a.in(0).data),
                                 static_cast<int32_t*>(a.in(1).data),
                                 static_cast<const float*>(a.in(2).data), growth, backoff,
                                 interval, a.stream()));
}

/* `step` (from 1) and the stochastic-rounding stream key of (seed, step). */
bool seed_and_step(LaunchArgs& a, int64_t* step, uint64_t* key) {
  int64_t seed;
  if (!a.integer("step", 1, step) || !a.integer_or("seed", 0, 0, &seed)) return false;
  *key = dev::random_stream_key(static_cast<uint64_t>(seed), static_cast<uint64_t>(*step));
  return true;
}

bool optimizer_tensors(LaunchArgs& a, int n) {
  for (int i = 0; i < n; ++i) {
    if (!a.floating(a.in(i), "optimizer tensor") ||
        !a.same_shape(a.in(0), a.in(i), "param", "optimizer tensor")) {
      return false;
    }
  }
  for (int i = 0; i < a.desc().n_outputs; ++i) {
    int input = i == 0 ? 0 : i + 1;  // outputs are param, then the state tensors
    if (!a.same_shape(a.in(input), a.out(i), "optimizer tensor", "its output")) return false;
    if (a.out(i).data != a.in(input).data || a.out(i).dtype != a.in(input).dtype) {
      return a.bad("output " + std::to_string(i) + " must be input " + std::to_string(input) +
                   " (updated in place)");
    }
  }
  return true;
}

int run_sgd_step(LaunchArgs& a) {
  SgdParams p{};
  if (!a.counts(3, 2) || !a.on_device() || !optimizer_tensors(a, 3) || !a.scalar("lr", &p.lr) ||
      !seed_and_step(a, &p.step, &p.stream_key)) {
    return a.fail();
  }
  p.momentum = a.scalar_or("momentum", 0.0);
  p.weight_decay = a.scalar_or("weight_decay", 0.0);
  p.stochastic_rounding = a.flag("stochastic_rounding");
  if (a.dry_run()) return MPT_OK;
  return a.done(sgd_step(a.in_flat(0), a.in_flat(1), a.in_flat(2), p, a.stream()));
}

int run_adamw_step(LaunchArgs& a) {
  AdamWParams p{};
  if (!a.counts(4, 3) || !a.on_device() || !optimizer_tensors(a, 4) || !a.scalar("lr", &p.lr) ||
      !a.scalar("beta1", &p.beta1) || !a.scalar("beta2", &p.beta2) || !a.scalar("eps", &p.eps) ||
      !seed_and_step(a, &p.step, &p.stream_key)) {
    return a.fail();
  }
  p.weight_decay = a.scalar_or("weight_decay", 0.0);
  p.stochastic_rounding = a.flag("stochastic_rounding");
  if (a.dry_run()) return MPT_OK;
  return a.done(adamw_step(a.in_flat(0), a.in_flat(1), a.in_flat(2), a.in_flat(3), p, a.stream()));
}

// [SECTION] pooling and normalisation

int run_maxpool2d_forward(LaunchArgs& a) {
  int64_t k, s;
  if (!a.counts(1, 2) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.floating(a.out(0), "y") || !a.ndim_is(a.in(0), 4, "x") || !a.ndim_is(a.out(0), 4, "y") ||
      !a.dtype_is(a.out(1), MPT_DTYPE_I32, "argmax") ||
      !a.same_shape(a.out(0), a.out(1), "y", "argmax") || !a.integer("kernel", 1, &k) ||
      !a.integer_or("stride", k, 1, &s)) {
    return a.fail();
  }
  const mpt_tensor& x = a.in(0);
  const mpt_tensor& y = a.out(0);
  if (x.shape[2] < k || x.shape[3] < k) return a.bad("plane smaller than the pooling window"), a.fail();
  int64_t P = (x.shape[2] - k) / s + 1, Q = (x.shape[3] - k) / s + 1;
  if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1] || y.shape[2] != P || y.shape[3] != Q) {
    a.bad("y must be [N, C, " + std::to_string(P) + ", " + std::to_string(Q) + "]");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(maxpool2d_forward(a.in_flat(0), a.out_flat(0),
                                  static_cast<int32_t*>(a.out(1).data), x.shape[0] * x.shape[1],
                                  x.shape[2], x.shape[3], P, Q, k, s, a.stream()));
}

int run_maxpool2d_backward(LaunchArgs& a) {
  if (!a.counts(2, 1) || !a.on_device() || !a.floating(a.in(0), "dy") ||
      !a.dtype_is(a.in(1), MPT_DTYPE_I32, "argmax") || !a.floating(a.out(0), "dx") ||
      !a.ndim_is(a.in(0), 4, "dy") || !a.ndim_is(a.out(0), 4, "dx") ||
      !a.same_shape(a.in(0), a.in(1), "dy", "argmax")) {
    return a.fail();
  }
  const mpt_tensor& dy = a.in(0);
  const mpt_tensor& dx = a.out(0);
  if (dy.shape[0] != dx.shape[0] || dy.shape[1] != dx.shape[1]) {
    return a.bad("dy must be [N, C, H', W'] with N and C of dx"), a.fail();
  }
  // The window is not passed to the backward kernel; the scatter needs none (argmax is flat).
  if (a.dry_run()) return MPT_OK;
  return a.done(maxpool2d_backward(a.in_flat(0), static_cast<const int32_t*>(a.in(1).data),
                                   a.out_flat(0), dx.shape[0] * dx.shape[1], dx.shape[2],
                                   dx.shape[3], dy.shape[2], dy.shape[3], a.stream()));
}

/* x is [N, C, ...]: the trailing dimensions form one spatial extent. */
bool group_norm_shape(LaunchArgs& a, const mpt_tensor& x, GroupNormShape* s) {
  if (!a.floating(x, "x") || !a.integer("groups", 1, &s->groups)) return false;
  if (x.ndim < 2) return a.bad("x must be [N, C, ...] with at least 2 dimensions");
  s->N = x.shape[0];
  s->C = x.shape[1];
  s->HW = 1;
  for (int i = 2; i < x.ndim; ++i) s->HW *= x.shape[i];
  if (s->C % s->groups != 0) return a.bad("scalar `groups` must divide the channel count");
  if (s->HW == 0) return a.bad("x has an empty spatial extent");
  return true;
}

int run_group_norm_forward(LaunchArgs& a) {
  GroupNormShape s;
  double eps;
  if (!a.counts(3, 3) || !a.on_device() || !group_norm_shape(a, a.in(0), &s) ||
      !a.scalar("eps", &eps) || (!(eps >= 0.0) && !a.bad("scalar `eps` must be >= 0")) || !a.floating(a.in(1), "gamma") || !a.floating(a.in(2), "beta") ||
      !a.floating(a.out(0), "y") || !a.same_shape(a.in(0), a.out(0), "x", "y") ||
      !a.dtype_is(a.out(1), MPT_DTYPE_F32, "mean") || !a.dtype_is(a.out(2), MPT_DTYPE_F32, "rstd")) {
    return a.fail();
  }
  if (element_count(a.in(1)) != s.C || element_count(a.in(2)) != s.C ||
      element_count(a.out(1)) != s.N * s.groups || element_count(a.out(2)) != s.N * s.groups) {
    a.bad("gamma and beta must hold C values, mean and rstd N*groups");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(group_norm_forward(a.in_flat(0), a.in_flat(1), a.in_flat(2), a.out_flat(0),
                                   static_cast<float*>(a.out(1).data),
                                   static_cast<float*>(a.out(2).data), s, eps, a.stream()));
}

int run_group_norm_backward(LaunchArgs& a) {
  GroupNormShape s;
  if (!a.counts(5, 3) || !a.on_device() || !group_norm_shape(a, a.in(1), &s) ||
      !a.floating(a.in(0), "dy") || !a.floating(a.in(2), "gamma") ||
      !a.dtype_is(a.in(3), MPT_DTYPE_F32, "mean") || !a.dtype_is(a.in(4), MPT_DTYPE_F32, "rstd") ||
      !a.floating(a.out(0), "dx") || !a.floating(a.out(1), "dgamma") ||
      !a.floating(a.out(2), "dbeta") || !a.same_shape(a.in(0), a.in(1), "dy", "x") ||
      !a.same_shape(a.in(1), a.out(0), "x", "dx")) {
    return a.fail();
  }
  if (element_count(a.in(2)) != s.C || element_count(a.out(1)) != s.C ||
      element_count(a.out(2)) != s.C || element_count(a.in(3)) != s.N * s.groups ||
      element_count(a.in(4)) != s.N * s.groups) {
    a.bad("gamma, dgamma and dbeta must hold C values, mean and rstd N*groups");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(group_norm_backward(a.in_flat(0), a.in_flat(1), a.in_flat(2),
                                    static_cast<const float*>(a.in(3).data),
                                    static_cast<const float*>(a.in(4).data), a.out_flat(0),
                                    a.out_flat(1), a.out_flat(2), s, a.stream()));
}

}  // namespace

// [SECTION] dispatch

struct KernelEntry {
  const char* name;
  int (*run)(LaunchArgs&);
};

const KernelEntry kKernels[] = {
    {"cast", run_cast},
    {"fill", run_fill},
    {"copy", run_copy},
    {"conv2d_forward", run_conv2d_forward},
    {"inject_fault", run_inject_fault},
    {"relu_forward", run_relu_forward},
    {"maxpool2d_forward", run_maxpool2d_forward},
    {"group_norm_forward", run_group_norm_forward},
    {"linear_forward", run_linear_forward},
    {"log_softmax_forward", run_log_softmax_forward},
    {"nll_loss_forward", run_nll_loss_forward},
    {"nll_loss_backward", run_nll_loss_backward},
    {"log_softmax_backward", run_log_softmax_backward},
    {"linear_backward_data", run_linear_backward_data},
    {"linear_backward_weight", run_linear_backward_weight},
    {"group_norm_backward", run_group_norm_backward},
    {"maxpool2d_backward", run_maxpool2d_backward},
    {"relu_backward", run_relu_backward},
    {"conv2d_backward_data", run_conv2d_backward_data},
    {"conv2d_backward_weight", run_conv2d_backward_weight},
    {"amp_unscale_check", run_amp_unscale_check},
    {"amp_update_scale", run_amp_update_scale},
    {"sgd_step", run_sgd_step},
    {"adamw_step", run_adamw_step},
    {"accuracy_count", run_accuracy_count},
    {"fp8_quantize_tensor", run_fp8_quantize_tensor},
    {"fp8_quantize_mx", run_fp8_quantize_mx},
    {"fp8_quantize_block", run_fp8_quantize_block},
    {"fp8_quantize_nvfp4", run_fp8_quantize_nvfp4},
    {"fp8_dequantize", run_fp8_dequantize},
};

}  // namespace detail

// [SECTION] public interface

bool available(std::string* why) {
  static std::once_flag once;
  static bool usable = false;
  static std::string reason;
  std::call_once(once, [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      reason = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + ": " +
               cudaGetErrorString(e);
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
    } else if (count == 0) {
      reason = "no CUDA device present";
    } else {
      usable = true;
    }
  });
  if (!usable && why) *why = reason;
  return usable;
}

namespace {

const detail::KernelEntry* find_kernel(const char* name) {
  for (const auto& entry : detail::kKernels) {
    if (std::strcmp(entry.name, name) == 0) return &entry;
  }
  return nullptr;
}

bool well_formed(const mpt_launch_desc& d) {
  return d.n_inputs >= 0 && d.n_outputs >= 0 && d.n_scalars >= 0 && (d.n_inputs == 0 || d.inputs) &&
         (d.n_outputs == 0 || d.outputs) && (d.n_scalars == 0 || d.scalars);
}

}  // namespace

namespace detail {

int validate(const mpt_launch_desc& d, std::string* error) {
  const char* name = d.kernel ? d.kernel : "";
  const KernelEntry* entry = find_kernel(name);
  if (!entry) {
    if (error) *error = std::string("unknown kernel `") + name + "` (cuda); docs/kernels.md lists them";
    return MPT_ERR_UNKNOWN_KERNEL;
  }
  if (!well_formed(d)) {
    if (error) *error = std::string(name) + " (cuda): malformed launch description";
    return MPT_ERR_BAD_ARGUMENTS;
  }
  LaunchArgs args(d, error, /*dry_run=*/true);
  return entry->run(args);
}

}  // namespace detail

/* Arguments are checked before the device: a wrong launch is MPT_ERR_BAD_ARGUMENTS on any machine,
 * a right one without a device MPT_ERR_DEVICE. */
int launch(const mpt_launch_desc& d, std::string* error) {
  int status = detail::validate(d, error);
  if (status != MPT_OK) return status;
  std::string why;
  if (!available(&why)) {
    if (error) *error = std::string(d.kernel) + " (cuda): " + why;
    return MPT_ERR_DEVICE;
  }
  detail::LaunchArgs args(d, error, /*dry_run=*/false);
  detail::ScratchKernelScope scratch_names(d.kernel);
  return find_kernel(d.kernel)->run(args);
}

void* alloc(size_t bytes, std::string* error) {
  std::string why;
  if (!available(&why)) {
    if (error) *error = "cannot allocate device memory: " + why;
    return nullptr;
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e == cudaSuccess) e = cudaMemset(p, 0, bytes);
  if (e != cudaSuccess) {
    if (p) cudaFree(p);
    if (error) {
      *error = "cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorName(e) +
               ": " + cudaGetErrorString(e);
    }
    return nullptr;
  }
  return p;
}

void free(void* p) {
  if (p) cudaFree(p);
}

}  // namespace mpt::cuda
