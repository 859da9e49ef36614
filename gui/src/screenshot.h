// Reads the frame just rendered (the back buffer, before the swap) and writes it as a PNG.
#pragma once

#include <string>

namespace fpscope::gui {

// Returns an empty string on success, otherwise what went wrong.
std::string write_framebuffer_png(const std::string& path, int width, int height);

}  // namespace fpscope::gui
