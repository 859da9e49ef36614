// fpscope-gui's command line (see options.h).
#include "options.h"

#include <CLI/CLI.hpp>
#include <fpscope/analysis.h>

#include <cstdio>

#include "views/view.h"

namespace fpscope::gui {

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& v : make_views()) out.push_back(v->name());
    return out;
  }();
  return names;
}

namespace {
bool parse_size(const std::string& text, int& width, int& height) {
  int w = 0, h = 0;
  char trailing = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &w, &h, &trailing) != 2) return false;
  if (w < 320 || h < 240 || w > 16384 || h > 16384) return false;
  width = w;
  height = h;
  return true;
}
}  // namespace

int parse_options(int argc, char** argv, Options& options) {
  CLI::App app{
      "fpscope-gui: look at fpscope traces (SQLite) in a window: summary, timeline, tensor ranges,\n"
      "loss and loss scale, memory and events. Two traces are compared: the first is the source,\n"
      "the second the target (for example fp32 against amp-fp16).",
      "fpscope-gui"};
  std::string size;
  app.add_option("traces", options.traces, "trace files (.sqlite) to open; more can be opened from the window");
  app.add_option("--screenshot", options.screenshot,
                 "render --view once every trace has loaded, write it to this PNG and exit "
                 "(exit code 0 on success, 1 if the image could not be made)");
  app.add_option("--view", options.view, "view shown first")
      ->check(CLI::IsMember(view_names()));
  app.add_option("--step", options.step, "start with this training step selected; the timeline opens on it")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rank", options.rank,
                 "show only this rank of multi-process traces, as if it were traced alone (the trace panel changes it)")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::string> range_views;
  for (int i = 0; i < analysis::kRangeViewCount; ++i) range_views.push_back(analysis::range_view_info(static_cast<analysis::RangeView>(i)).key);
  app.add_option("--range-view", options.range_view,
                 "what the range heat maps show first: activations, gradients (as stored), gradients-unscaled, weights, "
                 "optimizer-state")
      ->check(CLI::IsMember(range_views))
      ->capture_default_str();
  app.add_option("--size", size, "window size WIDTHxHEIGHT (default 1600x1000)");
  app.add_option("--font-size", options.font_size, "font size in pixels (default 17)")->check(CLI::Range(8.0f, 48.0f));
  app.add_option("--bench-frames", options.bench_frames,
                 "after loading, pan the timeline for N frames and print load time and frame-time percentiles")
      ->check(CLI::Range(1, 1000000));
  app.add_flag("--dump-state", options.dump_state,
               "print each trace's load state (ready or the error) and headline numbers once loading is done");
  app.add_option("--settle-frames", options.settle_frames, "frames drawn before a screenshot (default 4)")
      ->check(CLI::Range(1, 1000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!size.empty() && !parse_size(size, options.width, options.height)) {
    std::fprintf(stderr, "fpscope-gui: --size expects WIDTHxHEIGHT between 320x240 and 16384x16384, got '%s'\n",
                 size.c_str());
    return 2;
  }
  return -1;
}

}  // namespace fpscope::gui
