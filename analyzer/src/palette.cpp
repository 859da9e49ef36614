// The shared palette (see palette.h).
#include "fpscope/palette.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fpscope::palette {

std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

Rgb category(std::string_view name) {
  for (size_t i = 0; i < contract::kMemoryCategoryNames.size(); ++i) {
    if (name == contract::kMemoryCategoryNames[i]) return kCategories[i];
  }
  return for_name(name);
}

namespace {

uint8_t channel(double v) { return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); }

}  // namespace

Rgb for_name(std::string_view name, double saturation, double value) {
  // FNV-1a of the name picks the hue, so a kernel keeps its colour between traces and sessions.
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  const double hue = static_cast<double>(h % 360u) / 60.0;  // sextant of the colour wheel, [0, 6)
  const int sextant = static_cast<int>(hue);
  const double f = hue - sextant;
  const double p = value * (1 - saturation), q = value * (1 - saturation * f), t = value * (1 - saturation * (1 - f));
  double r = value, g = t, b = p;
  switch (sextant) {
    case 0: r = value, g = t, b = p; break;
    case 1: r = q, g = value, b = p; break;
    case 2: r = p, g = value, b = t; break;
    case 3: r = p, g = q, b = value; break;
    case 4: r = t, g = p, b = value; break;
    default: r = value, g = p, b = q; break;
  }
  return {channel(r), channel(g), channel(b)};
}

Rgb recipe_fit(RecipeFit fit, double margin_db, double severity) {
  switch (fit) {
    case RecipeFit::Unseen: return kRecipeUnseen;
    case RecipeFit::Nonfinite: return kNaN;
    case RecipeFit::Misses: return severity < 10 ? kRecipeNearMiss : kRecipeMiss;
    case RecipeFit::Fits: break;
  }
  const double spare = std::clamp(margin_db, 0.0, 15.0);  // NaN clamps to itself: treat as none
  return {40, static_cast<uint8_t>(110 + int((spare == spare ? spare : 0.0) * 6)), 70};
}

Rgb exponent_scale(double t) {
  // Anchors in the manner of viridis, interpolated linearly.
  static constexpr std::array<std::array<double, 3>, 6> anchors = {{{0.27, 0.00, 0.33},
                                                                     {0.23, 0.32, 0.55},
                                                                     {0.13, 0.57, 0.55},
                                                                     {0.27, 0.75, 0.44},
                                                                     {0.70, 0.87, 0.18},
                                                                     {0.99, 0.91, 0.14}}};
  if (!(t >= 0)) t = 0;  // NaN too
  const double x = std::min(t, 1.0) * static_cast<double>(anchors.size() - 1);
  const size_t i = std::min(static_cast<size_t>(x), anchors.size() - 2);
  const double f = x - static_cast<double>(i);
  const auto& a = anchors[i];
  const auto& b = anchors[i + 1];
  return {channel(a[0] + (b[0] - a[0]) * f), channel(a[1] + (b[1] - a[1]) * f), channel(a[2] + (b[2] - a[2]) * f)};
}

double scale_position(double exponent, double lo, double hi) { return hi > lo ? (exponent - lo) / (hi - lo) : 0.5; }

}  // namespace fpscope::palette
