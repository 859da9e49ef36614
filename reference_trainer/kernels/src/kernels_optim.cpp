// SGD with momentum and weight decay (PyTorch's SGD, no dampening or Nesterov) and AdamW
// (PyTorch's AdamW: decoupled weight decay, bias correction), one fused elementwise pass each.
// Everything is computed in fp32 from the stored values; the optimizer state is rounded to its
// own dtype (f32, f16 or bf16) and the new parameter to the parameter's dtype, stochastically
// when asked and the parameter is 16-bit. Scalar constants are formed in double, as Python
// forms them, and used as fp32.
#include <cmath>
#include <vector>

#include "kernels.h"
#include "launch_report.h"
#include "mpt/numerics.h"
#include "parallel.h"
#include "scratch.h"

namespace mpt::kernels {
namespace {

constexpr int64_t kChunk = 1 << 14;

struct UpdateRounding {
  bool stochastic = false;
  uint64_t stream_key = 0;
};

UpdateRounding update_rounding(const Launch& l, const TensorArg& param, int64_t step) {
  UpdateRounding r;
  r.stochastic = l.flag("stochastic_rounding") && param->dtype != MPT_DTYPE_F32;
  if (r.stochastic) r.stream_key = random_stream_key(static_cast<uint64_t>(l.integer_or("seed", 0, 0)),
                                                    static_cast<uint64_t>(step));
  return r;
}

// Rounds new parameter values [b, e) into the parameter tensor.
void store_param(const mpt_tensor& param, const float* values, int64_t b, int64_t e, const UpdateRounding& r) {
  size_t n = static_cast<size_t>(e - b);
  if (!r.stochastic) {
    int64_t size = static_cast<int64_t>(dtype_size(param.dtype));
    store_from_f32(values + b, static_cast<char*>(param.data) + b * size, param.dtype, e - b);
  } else {
    uint16_t* bits = static_cast<uint16_t*>(param.data) + b;
    if (param.dtype == MPT_DTYPE_F16) convert_f32_to_f16_stochastic(values + b, bits, n, r.stream_key, b);
    else convert_f32_to_bf16_stochastic(values + b, bits, n, r.stream_key, b);
    if (LaunchReport* report = current_report()) report->count_store(bits, param.dtype, values + b, bits, e - b);
  }
}

// The launch report's parameter update (mpt/abi.h, mpt_update_counts), when the caller asked for
// one: each chunk compares the old values with the computed updates and the stored values.
class UpdateAccount {
 public:
  explicit UpdateAccount(const mpt_tensor& param) : param_(param), report_(current_report()) {}
  bool wanted() const { return report_ != nullptr; }

  // Elements [b, e): old values p (fp32), computed updates u, and the new values as the kernel
  // computed them in fp32 (an f32 parameter stores exactly those; a 16-bit one is read back).
  template <typename Update>
  void add(int64_t b, int64_t e, const float* p, const Update& u, const float* computed) const {
    mpt_update_counts part{};
    if (param_.dtype == MPT_DTYPE_F32) {
      for (int64_t i = b; i < e; ++i) add_update_element(part, p[i], u(i), computed[i]);
    } else {
      // The stored 16-bit values, widened in bulk.
      std::vector<float> stored(static_cast<size_t>(e - b));
      const uint16_t* bits = static_cast<const uint16_t*>(param_.data) + b;
      if (param_.dtype == MPT_DTYPE_F16) convert_f16_to_f32(bits, stored.data(), stored.size());
      else convert_bf16_to_f32(bits, stored.data(), stored.size());
      for (int64_t i = b; i < e; ++i) add_update_element(part, p[i], u(i), stored[static_cast<size_t>(i - b)]);
    }
    report_->add_update_chunk(b, part);
  }

  void finish() const {
    if (report_) report_->finish_update(static_cast<uint64_t>(element_count(param_)));
  }

 private:
  const mpt_tensor& param_;
  LaunchReport* report_;
};

// The value a state tensor of `dtype` holds after storing v.
inline float held_as(int32_t dtype, float v) {
  return dtype == MPT_DTYPE_F16 ? round_to_f16(v) : dtype == MPT_DTYPE_BF16 ? round_to_bf16(v) : v;
}

void expect_in_place(const Launch& l, int input, int output, const char* role) {
  TensorArg in = l.input(input, role), out = l.output(output, role);
  l.expect_float(in);
  l.expect_same_shape(out, in);
  if (in->dtype != out->dtype || in->data != out->data)
    l.fail(out.label + ": expected the same tensor as " + in.label + " (updated in place)");
}

}  // namespace

void sgd_step(const Launch& l) {
  l.expect_counts(3, 2);
  expect_in_place(l, 0, 0, "param");
  expect_in_place(l, 2, 1, "momentum_buf");
  TensorArg param = l.input(0, "param"), grad = l.input(1, "grad"), buf = l.input(2, "momentum_buf");
  l.expect_float(grad);
  l.expect_same_shape(grad, param);
  l.expect_same_shape(buf, param);
  float lr = static_cast<float>(l.scalar("lr"));
  float momentum = static_cast<float>(l.scalar_or("momentum", 0.0));
  float weight_decay = static_cast<float>(l.scalar_or("weight_decay", 0.0));
  int64_t step = l.integer("step", 1);
  UpdateRounding rounding = update_rounding(l, param, step);

  F32Input pv(*param), gv(*grad), bv(*buf);
  const UpdateAccount account(*param);
  ScratchFloats new_param(static_cast<size_t>(param.numel()));
  ScratchFloats new_buf(momentum != 0.0f ? new_param.size() : 0);
  ScratchFloats step_term(account.wanted() ? new_param.size() : 0);  // lr * d, as subtracted
  parallel_for(param.numel(), kChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float d = gv[i];
      if (weight_decay != 0.0f) d = d + weight_decay * pv[i];
      if (momentum != 0.0f) {
        float m = step == 1 ? d : bv[i] * momentum + d;  // PyTorch starts the buffer at the first step
        d = held_as(buf->dtype, m);
        new_buf[i] = d;
      }
      const float change = lr * d;
      if (account.wanted()) step_term[i] = change;
      new_param[i] = pv[i] - change;
    }
    // The computed update is -(lr * d). An f32 parameter is its own input: compare before storing.
    const auto update = [&](int64_t i) { return -static_cast<double>(step_term[i]); };
    if (account.wanted() && param->dtype == MPT_DTYPE_F32) account.add(b, e, pv.data(), update, new_param.data());
    store_param(*param, new_param.data(), b, e, rounding);
    if (account.wanted() && param->dtype != MPT_DTYPE_F32) account.add(b, e, pv.data(), update, new_param.data());
    if (momentum != 0.0f) {
      int64_t size = static_cast<int64_t>(dtype_size(buf->dtype));
      store_from_f32(new_buf.data() + b, static_cast<char*>(buf->data) + b * size, buf->dtype, e - b);
    }
  });
  account.finish();
}

void adamw_step(const Launch& l) {
  l.expect_counts(4, 3);
  expect_in_place(l, 0, 0, "param");
  expect_in_place(l, 2, 1, "exp_avg");
  expect_in_place(l, 3, 2, "exp_avg_sq");
  TensorArg param = l.input(0, "param"), grad = l.input(1, "grad");
  TensorArg avg = l.input(2, "exp_avg"), avg_sq = l.input(3, "exp_avg_sq");
  l.expect_float(grad);
  for (const TensorArg* t : {&grad, &avg, &avg_sq}) l.expect_same_shape(*t, param);
  double lr = l.scalar("lr"), beta1 = l.scalar("beta1"), beta2 = l.scalar("beta2");
  double eps = l.scalar("eps"), weight_decay = l.scalar_or("weight_decay", 0.0);
  int64_t step = l.integer("step", 1);
  UpdateRounding rounding = update_rounding(l, param, step);

  float decay = static_cast<float>(1.0 - lr * weight_decay);
  float lerp_weight = static_cast<float>(1.0 - beta1), beta2_f = static_cast<float>(beta2);
  float sq_weight = static_cast<float>(1.0 - beta2);
  double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  float neg_step_size = static_cast<float>(-(lr / bias_correction1));
  float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  float eps_f = static_cast<float>(eps);

  F32Input pv(*param), gv(*grad), mv(*avg), vv(*avg_sq);
  const UpdateAccount account(*param);
  size_t n = static_cast<size_t>(param.numel());
  ScratchFloats new_param(n), new_m(n), new_v(n);
  ScratchFloats step_term(account.wanted() ? n : 0);  // neg_step_size * (m / denom), as added
  parallel_for(param.numel(), kChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float p = pv[i] * decay, g = gv[i], m = mv[i];
      // torch.lerp: the formula depends on which side of 0.5 the weight lies.
      m = lerp_weight < 0.5f ? m + lerp_weight * (g - m) : g - (g - m) * (1.0f - lerp_weight);
      m = held_as(avg->dtype, m);
      float v = held_as(avg_sq->dtype, vv[i] * beta2_f + sq_weight * g * g);
      float denom = std::sqrt(v) / bias_correction2_sqrt + eps_f;
      new_m[i] = m;
      new_v[i] = v;
      const float change = neg_step_size * (m / denom);
      if (account.wanted()) step_term[i] = change;
      new_param[i] = p + change;
    }
    // The computed update is the decay's change plus the step: (param * decay - param) + change,
    // each term as the kernel formed it in fp32, summed exactly enough in double to tell zero.
    const auto update = [&](int64_t i) {
      const float decayed = pv[i] * decay;
      return (static_cast<double>(decayed) - static_cast<double>(pv[i])) + static_cast<double>(step_term[i]);
    };
    if (account.wanted() && param->dtype == MPT_DTYPE_F32) account.add(b, e, pv.data(), update, new_param.data());
    store_param(*param, new_param.data(), b, e, rounding);
    if (account.wanted() && param->dtype != MPT_DTYPE_F32) account.add(b, e, pv.data(), update, new_param.data());
    int64_t m_size = static_cast<int64_t>(dtype_size(avg->dtype)), v_size = static_cast<int64_t>(dtype_size(avg_sq->dtype));
    store_from_f32(new_m.data() + b, static_cast<char*>(avg->data) + b * m_size, avg->dtype, e - b);
    store_from_f32(new_v.data() + b, static_cast<char*>(avg_sq->data) + b * v_size, avg_sq->dtype, e - b);
  });
  account.finish();
}

}  // namespace mpt::kernels
