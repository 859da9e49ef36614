// The GUI's colour helpers (see colors.h).
#include "ui/colors.h"

namespace fpscope::gui::colors {

ImVec4 to_vec4(ImU32 c) { return ImGui::ColorConvertU32ToFloat4(c); }

ImU32 contrast_text(ImU32 fill) {
  const ImVec4 c = to_vec4(fill);
  const float luminance = 0.299f * c.x + 0.587f * c.y + 0.114f * c.z;
  return luminance > 0.55f ? IM_COL32(15, 15, 20, 255) : IM_COL32(245, 245, 250, 255);
}

}  // namespace fpscope::gui::colors
