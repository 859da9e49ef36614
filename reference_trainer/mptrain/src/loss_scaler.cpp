// GradScaler-style loss scaling through the amp_* kernels (see loss_scaler.h).
#include "loss_scaler.h"

namespace mptrain {

LossScaler::LossScaler(const LossScaleConfig& config, Runtime& rt) : config_(config) {
  scale_ = rt.alloc("loss_scale", {1}, MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
  rt.fill(scale_, config.kind == LossScaleKind::kNone ? 1.0 : config.init);
  if (config.kind != LossScaleKind::kNone) {
    found_inf_ = rt.alloc("loss_scale.found_inf", {1}, MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
  }
  if (config.kind == LossScaleKind::kDynamic) {
    // Zero-filled by mpt_alloc: no finite steps counted yet.
    growth_tracker_ = rt.alloc("loss_scale.growth_tracker", {1}, MPT_DTYPE_I32, MPT_CAT_WORKSPACE);
  }
}

bool LossScaler::unscale_and_check(Runtime& rt, const std::vector<Param*>& params, bool all_ranks) {
  if (config_.kind == LossScaleKind::kNone) return false;
  TensorRefs inputs{&scale_};
  TensorRefs outputs{&found_inf_};
  for (const Param* p : params) {
    inputs.push_back(&p->grad);
    outputs.push_back(&p->grad);
  }
  rt.launch("amp_unscale_check", inputs, outputs);
  if (all_ranks) rt.launch("allreduce_sum", {&found_inf_}, {&found_inf_});
  return rt.read_scalar(found_inf_) != 0.0;
}

void LossScaler::update(Runtime& rt) {
  if (config_.kind != LossScaleKind::kDynamic) return;
  rt.launch("amp_update_scale", {&scale_, &growth_tracker_, &found_inf_}, {&scale_, &growth_tracker_},
            {{"growth_factor", config_.growth},
             {"backoff_factor", config_.backoff},
             {"growth_interval", static_cast<double>(config_.interval)}});
}

}  // namespace mptrain
