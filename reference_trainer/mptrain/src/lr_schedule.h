// The learning rate over the updates (`--lr-schedule`): the schedule's text parsed, and the rate of
// each update. docs/mptrain.md ("Optimizers") states the formulas.
#pragma once

#include "config.h"

#include <cstdint>
#include <string>

namespace mptrain {

// Parses "constant", "exponential:GAMMA" (0 < GAMMA <= 1) or "cosine:STEPS" (STEPS >= 1) (throws
// UsageError).
LrSchedule parse_lr_schedule(const std::string& text);

// The learning rate of update number `update` (from 1) under the config's schedule.
double learning_rate(const OptimizerConfig& config, int64_t update);

}  // namespace mptrain
