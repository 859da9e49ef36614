// fpscope-gui: a desktop front end for fpscope traces. See docs/gui.md.
#include <cstdio>
#include <exception>

#include "app.h"
#include "options.h"

int main(int argc, char** argv) {
  fpscope::gui::Options options;
  if (const int code = fpscope::gui::parse_options(argc, argv, options); code >= 0) return code;
  try {
    fpscope::gui::App app(std::move(options));
    return app.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fpscope-gui: %s\n", e.what());
    return 1;
  }
}
