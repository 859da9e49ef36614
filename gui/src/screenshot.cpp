// PNG capture of the rendered frame (see screenshot.h). OpenGL's rows start at the bottom; PNG's
// at the top, hence the flip.
#include "screenshot.h"

#include <GLFW/glfw3.h>
#include <stb_image_write.h>

#include <cstring>
#include <vector>

namespace fpscope::gui {

std::string write_framebuffer_png(const std::string& path, int width, int height) {
  if (width <= 0 || height <= 0) return "the window has no pixels to capture";
  const size_t row = static_cast<size_t>(width) * 4;
  std::vector<unsigned char> pixels(row * static_cast<size_t>(height));
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  if (glGetError() != GL_NO_ERROR) return "glReadPixels failed";
  std::vector<unsigned char> flipped(pixels.size());
  for (int y = 0; y < height; ++y) {
    std::memcpy(&flipped[static_cast<size_t>(y) * row], &pixels[static_cast<size_t>(height - 1 - y) * row], row);
  }
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;  // the window is opaque
  if (!stbi_write_png(path.c_str(), width, height, 4, flipped.data(), static_cast<int>(row))) {
    return "cannot write " + path;
  }
  return {};
}

}  // namespace fpscope::gui
