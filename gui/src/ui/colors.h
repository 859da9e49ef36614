// Colours with a meaning, in one place so every view uses the same ones: the two runs of a
// comparison, the kinds of event, memory categories, a stable colour per kernel name, and the
// colour scale of absmax exponents in the tensor-range heat map.
#pragma once

#include <imgui.h>

#include <string_view>

namespace fpscope::gui::colors {

// The runs of a comparison: source (first trace) and target (second).
inline constexpr ImU32 kSource = IM_COL32(70, 140, 230, 255);
inline constexpr ImU32 kTarget = IM_COL32(240, 140, 40, 255);
ImU32 run(int index);  // 0 source, 1 target, further traces get further colours

// Events.
inline constexpr ImU32 kNaN = IM_COL32(230, 40, 40, 255);
inline constexpr ImU32 kInf = IM_COL32(220, 60, 200, 255);
inline constexpr ImU32 kOverflow = IM_COL32(235, 90, 60, 255);
inline constexpr ImU32 kUnderflow = IM_COL32(60, 200, 190, 255);
inline constexpr ImU32 kSkipped = IM_COL32(250, 190, 40, 255);
inline constexpr ImU32 kScaleBackoff = IM_COL32(250, 120, 40, 255);
inline constexpr ImU32 kScaleGrowth = IM_COL32(90, 200, 110, 255);
inline constexpr ImU32 kSelection = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kWarningText = IM_COL32(250, 190, 70, 255);
inline constexpr ImU32 kErrorText = IM_COL32(255, 95, 90, 255);
inline constexpr ImU32 kOkText = IM_COL32(120, 210, 120, 255);
inline constexpr ImU32 kDimText = IM_COL32(150, 150, 160, 255);
inline constexpr ImU32 kTotal = IM_COL32(235, 235, 240, 255);  // a total drawn over its parts

ImVec4 to_vec4(ImU32 c);

// Memory category (weight, master_weight, gradient, activation, optimizer_state, workspace, data).
ImU32 category(std::string_view name);

// A stable, distinguishable colour for a name (kernels, layers, phases), muted enough for text
// drawn on top of it to stay readable.
ImU32 for_name(std::string_view name, float saturation = 0.55f, float value = 0.72f);

// Colour of a log2(absmax) exponent on the heat map scale [lo, hi] (blue small, yellow large).
ImU32 exponent_scale(double exponent, double lo, double hi);

// Text colour (black or white) readable over the given fill.
ImU32 contrast_text(ImU32 fill);

}  // namespace fpscope::gui::colors
