// The numeric formats fpscope reasons about, the kernel-to-op mapping of the reference trainer,
// the error exit codes, and run state names.
#include "fpscope/analysis.h"

#include <array>
#include <cmath>

namespace fpscope::analysis {

const FormatLimits& format_limits(Format format) {
  // Derived from the contract's bit layouts (fp8 as in the OCP 8-bit spec: e4m3 "FN").
  static const std::array<FormatLimits, kFormatCount> limits = [] {
    std::array<FormatLimits, kFormatCount> l{};
    for (int i = 0; i < kFormatCount; ++i) {
      const contract::CastFormatInfo& f = contract::kCastFormats[static_cast<std::size_t>(i)];
      l[static_cast<std::size_t>(i)] = {f.name, f.short_name, f.bits.max_finite(), f.bits.min_normal(), f.bits.min_subnormal()};
    }
    return l;
  }();
  return limits[static_cast<int>(format)];
}

std::optional<double> headroom_log2(std::optional<double> absmax, Format format) {
  if (!absmax || !(*absmax > 0)) return std::nullopt;
  return std::log2(format_limits(format).max_finite / *absmax);
}

std::optional<double> footroom_log2(std::optional<double> min_nonzero, Format format) {
  if (!min_nonzero || !(*min_nonzero > 0)) return std::nullopt;
  return std::log2(*min_nonzero / format_limits(format).min_subnormal);
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
    case TraceErrorKind::NoSuchRank: return 2;
  }
  return 1;
}

}  // namespace fpscope::analysis
