// Optimizer steps through the sgd_step and adamw_step kernels (see optimizer.h).
#include "optimizer.h"

namespace mptrain {

Optimizer::Optimizer(const OptimizerConfig& config, uint64_t seed, Runtime& rt, std::vector<Param*> params)
    : config_(config), seed_(seed), params_(std::move(params)) {
  for (Param* p : params_) {
    const Tensor& target = p->updated();
    if (config_.kind == OptimizerKind::kSgd) {
      p->state.push_back(rt.alloc(p->name + ".momentum", target.shape(), config_.state_dtype, MPT_CAT_OPTIMIZER_STATE));
    } else {
      p->state.push_back(rt.alloc(p->name + ".exp_avg", target.shape(), config_.state_dtype, MPT_CAT_OPTIMIZER_STATE));
      p->state.push_back(rt.alloc(p->name + ".exp_avg_sq", target.shape(), config_.state_dtype, MPT_CAT_OPTIMIZER_STATE));
    }
  }
}

void Optimizer::step(Runtime& rt, int64_t step) {
  const double rounding = config_.stochastic_rounding ? 1.0 : 0.0;
  const double lr = learning_rate(config_, step);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Param* p = params_[i];
    const Tensor& param = p->updated();
    // Each tensor its own random stream for stochastic rounding: base seed + tensor number,
    // kept below 2^52 so the double carries it exactly.
    const double seed = static_cast<double>((seed_ + i) & ((uint64_t{1} << 52) - 1));
    if (config_.kind == OptimizerKind::kSgd) {
      rt.launch("sgd_step", {&param, &p->grad, &p->state[0]}, {&param, &p->state[0]},
                {{"lr", lr}, {"momentum", config_.momentum}, {"weight_decay", config_.weight_decay},
                 {"stochastic_rounding", rounding}, {"seed", seed}, {"step", static_cast<double>(step)}});
    } else {
      rt.launch("adamw_step", {&param, &p->grad, &p->state[0], &p->state[1]}, {&param, &p->state[0], &p->state[1]},
                {{"lr", lr}, {"beta1", config_.beta1}, {"beta2", config_.beta2}, {"eps", config_.eps},
                 {"weight_decay", config_.weight_decay}, {"step", static_cast<double>(step)},
                 {"stochastic_rounding", rounding}, {"seed", seed}});
    }
    if (p->has_working_copy()) rt.cast_into(p->master, p->weight);
  }
}

}  // namespace mptrain
