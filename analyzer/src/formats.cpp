// The numeric formats fpscope reasons about, the kernel-to-op mapping of the reference trainer,
// the error exit codes, and run state names.
#include "fpscope/analysis.h"

#include <array>
#include <cmath>

namespace fpscope::analysis {

const FormatLimits& format_limits(Format format) {
  // max_finite, min_normal, min_subnormal of each format (fp8 as in the OCP 8-bit spec: e4m3 "FN").
  static const std::array<FormatLimits, kFormatCount> limits = {{
      {"fp16", "f16", 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)},
      {"bf16", "bf16", std::ldexp(255.0, 120), std::ldexp(1.0, -126), std::ldexp(1.0, -133)},
      {"fp8-e4m3", "e4m3", 448.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9)},
      {"fp8-e5m2", "e5m2", 57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16)},
  }};
  return limits[static_cast<int>(format)];
}

std::string op_of_kernel(std::string_view kernel) {
  // Longest prefixes first: "log_softmax" before a hypothetical "log".
  static const std::array<std::pair<std::string_view, const char*>, 7> prefixes = {{
      {"log_softmax_", "log_softmax"},
      {"nll_loss_", "nll_loss"},
      {"group_norm_", "group_norm"},
      {"maxpool2d_", "max_pool2d"},
      {"conv2d_", "conv2d"},
      {"linear_", "linear"},
      {"relu_", "relu"},
  }};
  for (const auto& [prefix, op] : prefixes) {
    if (kernel.substr(0, prefix.size()) == prefix) return op;
  }
  return "";
}

const std::vector<std::string>& model_op_names() {
  static const std::vector<std::string> names = {"conv2d",      "relu",        "max_pool2d", "group_norm",
                                                 "linear",      "log_softmax", "nll_loss"};
  return names;
}

int exit_code_of(TraceErrorKind kind) {
  switch (kind) {
    case TraceErrorKind::NotFound: return 3;
    case TraceErrorKind::NotSqlite: return 4;
    case TraceErrorKind::NotATrace: return 5;
    case TraceErrorKind::NewerSchema: return 6;
    case TraceErrorKind::Corrupt: return 7;
    case TraceErrorKind::Query: return 8;
    case TraceErrorKind::Cancelled: return 130;
  }
  return 1;
}

const char* run_state_name(RunState state) {
  switch (state) {
    case RunState::Finished: return "finished";
    case RunState::Signalled: return "ended by a signal";
    case RunState::InProgress: return "in progress (still being written, or its collector stopped)";
    case RunState::Unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace fpscope::analysis
