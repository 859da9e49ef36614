// fpscope-gui: a desktop front end for fpscope traces. See docs/gui.md.
#include <cstdio>
#include <exception>

#include "app.h"
#include "options.h"

#if defined(__SANITIZE_THREAD__)
// A build under ThreadSanitizer (FPSCOPE_SANITIZE=thread): Mesa's software rasterizer, which draws
// the window under Xvfb, runs threads of its own (llvmpipe) inside swrast_dri.so, a library built
// without the sanitizer. The races reported from its own calls (a mutex it destroys while one of
// its threads still reads it) are the driver's, not this program's.
extern "C" const char* __tsan_default_suppressions() { return "race:swrast_dri.so\n"; }
#endif

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
