// SGD (with momentum) and AdamW, one sgd_step / adamw_step kernel per parameter. In amp modes
// the kernel updates the fp32 master and a `cast` then refreshes the 16-bit working copy.
#pragma once

#include "config.h"
#include "layers.h"
#include "lr_schedule.h"
#include "runtime.h"

namespace mptrain {

class Optimizer {
 public:
  // Allocates the state (momentum, or Adam's two moments) of every parameter.
  Optimizer(const OptimizerConfig& config, uint64_t seed, Runtime& rt, std::vector<Param*> params);

  // One update of every parameter; `step` counts the updates done, this one included (from 1).
  void step(Runtime& rt, int64_t step);

 private:
  OptimizerConfig config_;
  uint64_t seed_;
  std::vector<Param*> params_;
};

}  // namespace mptrain
