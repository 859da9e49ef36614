// The learning rate schedules of lr_schedule.h.
#include "lr_schedule.h"

#include "errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>

namespace mptrain {

LrSchedule parse_lr_schedule(const std::string& text) {
  LrSchedule schedule;
  if (text == "constant") return schedule;
  const auto colon = text.find(':');
  const std::string form = text.substr(0, colon), value = colon == std::string::npos ? "" : text.substr(colon + 1);
  const auto bad = [&](const char* why) {
    return UsageError(fmt::format("--lr-schedule '{}': {} (constant, exponential:GAMMA or cosine:STEPS)", text, why));
  };
  if (form == "exponential") {
    double gamma = 0.0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), gamma);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || !(gamma > 0.0 && gamma <= 1.0))
      throw bad("GAMMA, the factor applied after every update, must be a number above 0 and at most 1");
    schedule.kind = LrScheduleKind::kExponential;
    schedule.gamma = gamma;
  } else if (form == "cosine") {
    int64_t steps = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), steps);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || steps < 1)
      throw bad("STEPS, the updates over which the rate falls to 0, must be a whole number of at least 1");
    schedule.kind = LrScheduleKind::kCosine;
    schedule.steps = steps;
  } else {
    throw bad("not a schedule");
  }
  return schedule;
}

double learning_rate(const OptimizerConfig& config, int64_t update) {
  const double done = static_cast<double>(std::max<int64_t>(update - 1, 0));  // updates before this one
  switch (config.schedule.kind) {
    case LrScheduleKind::kConstant: return config.lr;
    case LrScheduleKind::kExponential: return config.lr * std::pow(config.schedule.gamma, done);
    case LrScheduleKind::kCosine: {
      const double t = std::min(done, static_cast<double>(config.schedule.steps)) / static_cast<double>(config.schedule.steps);
      return config.lr * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
    }
  }
  return config.lr;
}

}  // namespace mptrain
