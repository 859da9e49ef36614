// Command line of fpscope-gui: the traces to open and the unattended modes (screenshot, benchmark,
// state dump) that tests and documentation use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fpscope::gui {

struct Options {
  std::vector<std::string> traces;  // first is the source, second the comparison target
  std::string screenshot;           // write this PNG once loading is done, then exit
  std::string view = "summary";     // tab shown first (and captured by --screenshot)
  int width = 1600;
  int height = 1000;
  float font_size = 17.0f;
  int64_t step = -1;      // >= 0: start with this step selected (the timeline shows it)
  std::optional<int32_t> rank;  // --rank: only this rank of multi-process traces
  std::string range_view = "activations";  // what the range heat maps show first (analysis::RangeView key)
  int bench_frames = 0;   // > 0: pan the timeline this many frames and print frame times
  bool dump_state = false;  // print each trace's load state and headline numbers on stdout
  int settle_frames = 4;    // frames drawn after loading before the screenshot is taken
};

// Parses argv into `options`. Returns -1 to go on, or the exit code (0 after --help, 2 on error).
int parse_options(int argc, char** argv, Options& options);

// The names accepted by --view, in tab order.
const std::vector<std::string>& view_names();

}  // namespace fpscope::gui
