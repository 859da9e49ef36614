// Colours for the views. What carries meaning (runs, events, memory categories, a colour per
// kernel name, the heat map's exponent scale) comes from the shared palette (fpscope/palette.h),
// so the GUI and the HTML export draw a trace alike; the rest is the GUI's own dark theme.
#pragma once

#include "fpscope/palette.h"

#include <imgui.h>

#include <string_view>

namespace fpscope::gui::colors {

constexpr ImU32 im(palette::Rgb c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }

// The runs of a comparison: source (first trace) and target (second).
inline constexpr ImU32 kSource = im(palette::run(0));
inline constexpr ImU32 kTarget = im(palette::run(1));
inline ImU32 run(int index) { return im(palette::run(index)); }

// Events.
inline constexpr ImU32 kNaN = im(palette::kNaN);
inline constexpr ImU32 kInf = im(palette::kInf);
inline constexpr ImU32 kOverflow = im(palette::kOverflow);
inline constexpr ImU32 kUnderflow = im(palette::kUnderflow);
inline constexpr ImU32 kSkipped = im(palette::kSkipped);
inline constexpr ImU32 kScaleBackoff = im(palette::kScaleBackoff);
inline constexpr ImU32 kScaleGrowth = im(palette::kScaleGrowth);

// The dark theme's own.
inline constexpr ImU32 kSelection = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kWarningText = IM_COL32(250, 190, 70, 255);
inline constexpr ImU32 kErrorText = IM_COL32(255, 95, 90, 255);
inline constexpr ImU32 kOkText = IM_COL32(120, 210, 120, 255);
inline constexpr ImU32 kDimText = IM_COL32(150, 150, 160, 255);
inline constexpr ImU32 kTotal = IM_COL32(235, 235, 240, 255);  // a total drawn over its parts
// Timeline spans of different names too narrow to draw apart, drawn as one rectangle.
inline constexpr ImU32 kMixed = IM_COL32(112, 114, 124, 255);

ImVec4 to_vec4(ImU32 c);

// Memory category (weight, master_weight, gradient, activation, optimizer_state, workspace, data).
inline ImU32 category(std::string_view name) { return im(palette::category(name)); }

// A stable, distinguishable colour for a name (kernels, layers, phases).
inline ImU32 for_name(std::string_view name, double saturation = 0.55, double value = 0.72) {
  return im(palette::for_name(name, saturation, value));
}

// Colour of a log2(absmax) exponent on the heat map scale [lo, hi].
inline ImU32 exponent_scale(double exponent, double lo, double hi) {
  return im(palette::exponent_scale(palette::scale_position(exponent, lo, hi)));
}

// Text colour (black or white) readable over the given fill.
ImU32 contrast_text(ImU32 fill);

}  // namespace fpscope::gui::colors
