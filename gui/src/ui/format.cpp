// Text formatting for the views (see format.h).
#include "ui/format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fpscope::gui {

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = std::fabs(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  char buf[48];
  const char* sign = bytes < 0 ? "-" : "";
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%s%.0f B", sign, v);
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%s%.2f %s" : v < 100 ? "%s%.1f %s" : "%s%.0f %s", sign, v,
                  units[unit]);
  }
  return buf;
}

std::string format_bytes_delta(double bytes) {
  if (bytes == 0) return "0 B";
  return (bytes > 0 ? "+" : "") + format_bytes(bytes);
}

std::string format_percent_change(double from, double to) {
  if (from == 0) return to == 0 ? "0%" : "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (to - from) / from);
  return buf;
}

std::string format_duration(double ns) {
  char buf[48];
  const double a = std::fabs(ns);
  if (a < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (a < 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  } else if (a < 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g s", ns / 1e9);
  }
  return buf;
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(std::llabs(n));
  std::string out;
  const int first = static_cast<int>(digits.size() % 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (static_cast<int>(i) - first) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace fpscope::gui
