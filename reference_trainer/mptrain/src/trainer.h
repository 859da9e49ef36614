// The training loop: for each step, one NVTX step range holding the forward, backward and
// optimizer phases; loss scaling and the skip-on-inf rule; per-step scalars for tools
// (mpt_log_scalar); epoch summaries; then evaluation on the test set.
#pragma once

#include "config.h"
#include "dataset.h"
#include "model.h"
#include "runtime.h"

#include <vector>

namespace mptrain {

struct EpochSummary {
  double loss = 0.0;            // mean over the epoch's images
  double train_accuracy = 0.0;  // percent
  double images_per_s = 0.0;
  int64_t steps = 0;
};

struct RunResult {
  std::vector<EpochSummary> epochs;
  std::vector<double> losses;       // one per step
  std::vector<double> loss_scales;  // scale used by each step
  double test_accuracy = 0.0;       // percent
  double step_time_ms = 0.0;        // mean over all steps
  double images_per_s = 0.0;        // over all training
  double train_cpu_seconds = 0.0;   // CPU time of all threads during training: robust to a busy machine
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double final_loss_scale = 1.0;
};

RunResult train_and_evaluate(const TrainConfig& config, const PrecisionPolicy& policy, Runtime& rt,
                             Model& model, const ImageSet& train, const ImageSet& test);

}  // namespace mptrain
