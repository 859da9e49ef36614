// Steps and the loss scaler: each step's loss and scale, its skips, backoffs and growths.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

struct StepRow {
  int64_t step = 0;
  std::optional<int64_t> start_ns, end_ns;
  std::optional<double> loss, train_accuracy, lr;
  std::optional<double> loss_scale;    // scale in force during the step
  bool skipped = false;                // the optimizer step was skipped
  int64_t nan_values = 0, inf_values = 0;  // in outputs, intended values left out
  int64_t intended_values = 0;             // NaN/Inf an allow rule covers
};
std::vector<StepRow> steps(const Trace& trace);

struct LossScaleEvent {
  int64_t kernel_id = 0;
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  double scale_before = 0, scale_after = 0;
  bool found_inf = false, skipped = false;
  std::string event;  // "growth", "backoff", "unchanged"
  int64_t growth_tracker = 0;
};

struct LossScaleReport {
  bool used = false;                     // any amp_update_scale launch
  std::vector<LossScaleEvent> events;    // in time order
  int64_t updates = 0, skipped_steps = 0, growths = 0, backoffs = 0;
  std::vector<int64_t> skipped_step_numbers;
  std::optional<double> initial_scale, final_scale, min_scale, max_scale;
};
// Of a multi-rank trace, the lowest rank's loss scaler (ranks(): whether the others agreed).
LossScaleReport loss_scale(const Trace& trace);

}  // namespace fpscope::analysis
