// The application: the GLFW window and OpenGL context, Dear ImGui with readable fonts, the main
// layout (menu, trace list, view tabs), drag and drop, and the unattended modes: --screenshot
// (render one view to a PNG and exit) and --bench-frames (print load and frame times).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "options.h"
#include "selection.h"
#include "trace_set.h"
#include "ui/file_browser.h"
#include "views/view.h"

struct GLFWwindow;

namespace fpscope::gui {

class App {
 public:
  explicit App(Options options);
  ~App();
  // Runs until the window closes or an unattended mode finishes; returns the exit code.
  int run();

  // Called from GLFW's drop callback: paths are opened on the next frame.
  void queue_dropped(std::vector<std::string> paths);

 private:
  bool init_window();
  void load_fonts();
  void frame();
  void draw_main_window();
  void draw_menu();
  void draw_views();
  void open_dropped();
  // Unattended modes; each returns true once the program should exit (with exit_code_ set).
  bool screenshot_step();
  bool bench_step(double frame_ms);
  void dump_state() const;

  Options options_;
  GLFWwindow* window_ = nullptr;
  TraceSet traces_;
  Selection selection_;
  std::vector<std::unique_ptr<View>> views_;
  FileBrowser browser_;
  std::string requested_view_;
  double scripted_pan_ = 0;

  std::mutex dropped_mutex_;
  std::vector<std::string> dropped_;

  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int settled_frames_ = 0;
  bool loaded_once_ = false;
  double load_ms_ = 0;
  double first_frame_ms_ = 0;       // first benchmark frame
  double first_data_frame_ms_ = 0;  // first frame drawn with the source's reports
  std::vector<double> bench_frame_ms_;
  std::vector<double> bench_build_ms_;
  std::chrono::steady_clock::time_point frame_start_;
  double last_build_ms_ = 0;
  int exit_code_ = 0;
};

}  // namespace fpscope::gui
