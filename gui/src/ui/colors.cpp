// Colour choices for the views (see colors.h).
#include "ui/colors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace fpscope::gui::colors {

ImU32 run(int index) {
  static constexpr std::array<ImU32, 4> more = {kSource, kTarget, IM_COL32(120, 200, 120, 255),
                                                IM_COL32(200, 120, 220, 255)};
  return more[static_cast<size_t>(index) % more.size()];
}

ImVec4 to_vec4(ImU32 c) { return ImGui::ColorConvertU32ToFloat4(c); }

ImU32 category(std::string_view name) {
  if (name == "weight") return IM_COL32(70, 140, 230, 255);
  if (name == "master_weight") return IM_COL32(40, 90, 170, 255);
  if (name == "gradient") return IM_COL32(235, 120, 50, 255);
  if (name == "activation") return IM_COL32(90, 190, 100, 255);
  if (name == "optimizer_state") return IM_COL32(170, 110, 210, 255);
  if (name == "workspace") return IM_COL32(150, 150, 150, 255);
  if (name == "data") return IM_COL32(220, 200, 80, 255);
  return for_name(name);
}

ImU32 for_name(std::string_view name, float saturation, float value) {
  // FNV-1a: stable across runs, so a kernel keeps its colour between sessions and traces.
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  const float hue = static_cast<float>(h % 360u) / 360.0f;
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(hue, saturation, value, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 1.0f));
}

ImU32 exponent_scale(double exponent, double lo, double hi) {
  // A perceptually ordered ramp (dark blue, teal, green, yellow) in the manner of viridis,
  // interpolated between a few anchors.
  static constexpr std::array<std::array<float, 3>, 6> anchors = {{{0.27f, 0.00f, 0.33f},
                                                                    {0.23f, 0.32f, 0.55f},
                                                                    {0.13f, 0.57f, 0.55f},
                                                                    {0.27f, 0.75f, 0.44f},
                                                                    {0.70f, 0.87f, 0.18f},
                                                                    {0.99f, 0.91f, 0.14f}}};
  double t = hi > lo ? (exponent - lo) / (hi - lo) : 0.5;
  t = std::clamp(t, 0.0, 1.0) * (anchors.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), anchors.size() - 2);
  const float f = static_cast<float>(t - static_cast<double>(i));
  const auto& a = anchors[i];
  const auto& b = anchors[i + 1];
  return ImGui::ColorConvertFloat4ToU32(ImVec4(a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f,
                                               a[2] + (b[2] - a[2]) * f, 1.0f));
}

ImU32 contrast_text(ImU32 fill) {
  const ImVec4 c = to_vec4(fill);
  const float luminance = 0.299f * c.x + 0.587f * c.y + 0.114f * c.z;
  return luminance > 0.55f ? IM_COL32(15, 15, 20, 255) : IM_COL32(245, 245, 250, 255);
}

}  // namespace fpscope::gui::colors
