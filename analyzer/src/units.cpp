// Human-readable numbers shared by the command line and the GUI: see fpscope/units.h.
#include "fpscope/units.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace fpscope::analysis {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  if (std::fabs(value) >= 100) return fmt::format("{:.1f} {}", value, units[unit]);
  return fmt::format("{:.2f} {}", value, units[unit]);
}

std::string human_bytes_delta(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return (bytes > 0 ? "+" : "") + human_bytes(bytes);
}

std::string human_percent_change(double from, double to) {
  if (from == 0) return to == 0 ? "0%" : "n/a";
  return fmt::format("{:+.1f}%", 100.0 * (to - from) / from);
}

std::string human_count(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -(n + 1) + uint64_t{1} : static_cast<uint64_t>(n));
  std::string out;
  const std::size_t first = digits.size() % 3;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (i + 3 - first) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string human_points(double delta) { return fmt::format("{:+.2f} points", delta); }

std::string human_duration(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (std::llabs(ns) < 1000) return fmt::format("{} ns", ns);
  if (std::llabs(ns) < 1000000) return fmt::format("{:.3g} us", v / 1e3);
  if (std::llabs(ns) < 1000000000) return fmt::format("{:.3g} ms", v / 1e6);
  return fmt::format("{:.3g} s", v / 1e9);
}

std::string human_percent(double share) {
  if (share != 0 && std::fabs(share) < 0.0001) return share > 0 ? "<0.01%" : ">-0.01%";
  return fmt::format("{:.2f}%", share * 100.0);
}

std::string human_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{:.4g}", value);
}

std::string human_number_exact(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

std::string human_launch(int64_t kernel_id) {
  const int64_t process = kernel_id >> 40, launch = kernel_id & ((int64_t{1} << 40) - 1);
  return process == 0 ? std::to_string(launch) : fmt::format("{} of process {}", launch, process);
}

std::string human_scale(double scale) {
  if (scale > 0 && std::isfinite(scale)) {
    int exponent = 0;
    if (std::frexp(scale, &exponent) == 0.5) return fmt::format("2^{}", exponent - 1);
  }
  return fmt::format("{:g}", scale);
}

std::string human_step_place(std::optional<int64_t> step) {
  return step ? "at step " + std::to_string(*step) : std::string("outside the training steps");
}

std::string human_optional(const std::optional<double>& value, const char* missing) {
  return value ? human_number(*value) : std::string(missing);
}

}  // namespace fpscope::analysis
