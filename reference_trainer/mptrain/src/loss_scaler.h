// Loss scaling as PyTorch's GradScaler does it, entirely with kernels: the scale is a device
// tensor that nll_loss_backward multiplies into the gradient; amp_unscale_check divides every
// gradient by it and reports found_inf; the host reads found_inf and skips the optimizer step;
// amp_update_scale (dynamic mode only) backs off or grows the scale.
#pragma once

#include "config.h"
#include "layers.h"
#include "runtime.h"

namespace mptrain {

class LossScaler {
 public:
  LossScaler(const LossScaleConfig& config, Runtime& rt);

  // f32 [1]: 1 without scaling.
  const Tensor& scale() const { return scale_; }

  // Unscales all gradients and checks them; true when a gradient holds NaN or Inf and the step
  // must be skipped. Without scaling nothing is checked and it returns false. `all_ranks`: the
  // ranks of a data-parallel run agree first (found_inf summed over them by allreduce_sum), so
  // they all skip the same steps.
  bool unscale_and_check(Runtime& rt, const std::vector<Param*>& params, bool all_ranks = false);

  // Dynamic scaling: adapts the scale to the last check. No-op otherwise.
  void update(Runtime& rt);

  // The scale now, read back from its tensor.
  double current(Runtime& rt) { return rt.read_scalar(scale_); }

 private:
  LossScaleConfig config_;
  Tensor scale_;
  Tensor growth_tracker_;
  Tensor found_inf_;
};

}  // namespace mptrain
