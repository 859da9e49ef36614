// The application shell (see app.h).
//
// [SECTION] Window and fonts
// [SECTION] Frame loop
// [SECTION] Layout
// [SECTION] Unattended modes: screenshot, benchmark, state dump
#include "app.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <filesystem>

#include "screenshot.h"
#include "ui/colors.h"
#include "views/trace_list_panel.h"

namespace fpscope::gui {
namespace {

constexpr const char* kFontFolder = "/usr/share/fonts/truetype/dejavu";

void glfw_error(int code, const char* text) { std::fprintf(stderr, "fpscope-gui: GLFW error %d: %s\n", code, text); }

void on_drop(GLFWwindow* window, int count, const char** paths) {
  auto* app = static_cast<App*>(glfwGetWindowUserPointer(window));
  std::vector<std::string> list(paths, paths + count);
  app->queue_dropped(std::move(list));
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void apply_style(float font_size) {
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.FrameRounding = 3;
  style.TabRounding = 3;
  style.ChildRounding = 3;
  style.FramePadding = ImVec2(7, 4);
  style.ItemSpacing = ImVec2(8, 6);
  style.CellPadding = ImVec2(7, 3);
  style.ScrollbarSize = 14;
  style.Colors[ImGuiCol_WindowBg] = ImVec4(0.10f, 0.105f, 0.12f, 1.0f);
  // Child windows are transparent (the one with a background pushes its own): under a software
  // rasterizer every full-window layer costs, so the window background is glClear's colour.
  style.Colors[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  style.Colors[ImGuiCol_TableRowBgAlt] = ImVec4(1, 1, 1, 0.035f);
  (void)font_size;
}

}  // namespace

std::vector<std::unique_ptr<View>> make_views() {
  std::vector<std::unique_ptr<View>> views;
  views.push_back(make_summary_view());
  views.push_back(make_timeline_view());
  views.push_back(make_ranges_view());
  views.push_back(make_loss_view());
  views.push_back(make_memory_view());
  views.push_back(make_events_view());
  views.push_back(make_fp8_view());
  views.push_back(make_updates_view());
  return views;
}

App::App(Options options)
    : options_(std::move(options)), browser_(std::filesystem::current_path()), requested_view_(options_.view) {
  views_ = make_views();
  for (const auto& path : options_.traces) traces_.open(path, options_.rank);
  selection_.range_view = *analysis::parse_range_view(options_.range_view);
  if (options_.step >= 0) {
    selection_.select_step(options_.step);
    selection_.focus_timeline = true;
  }
}

App::~App() {
  if (!window_) return;
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

void App::queue_dropped(std::vector<std::string> paths) {
  std::lock_guard lock(dropped_mutex_);
  for (auto& p : paths) dropped_.push_back(std::move(p));
}

// [SECTION] Window and fonts ---------------------------------------------------------------------

bool App::init_window() {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr,
                 "fpscope-gui: cannot start GLFW: no display? Set DISPLAY, or run headless under "
                 "`xvfb-run -a fpscope-gui ...`\n");
    return false;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  window_ = glfwCreateWindow(options_.width, options_.height, "fpscope", nullptr, nullptr);
  if (!window_) {
    std::fprintf(stderr, "fpscope-gui: cannot create an OpenGL 3.0 window (is an OpenGL driver such as Mesa installed?)\n");
    glfwTerminate();
    return false;
  }
  glfwMakeContextCurrent(window_);
  // Unattended modes measure and capture as fast as the machine allows; a person gets vsync.
  glfwSwapInterval(options_.screenshot.empty() && options_.bench_frames == 0 ? 1 : 0);
  glfwSetWindowUserPointer(window_, this);
  glfwSetDropCallback(window_, on_drop);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // layout is fixed; nothing to remember in the working folder
  apply_style(options_.font_size);
  load_fonts();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  return true;
}

void App::load_fonts() {
  ImGuiIO& io = ImGui::GetIO();
  const std::string sans = std::string(kFontFolder) + "/DejaVuSans.ttf";
  if (std::filesystem::exists(sans) && io.Fonts->AddFontFromFileTTF(sans.c_str(), options_.font_size)) return;
  std::fprintf(stderr,
               "fpscope-gui: warning: %s not found (apt-get install fonts-dejavu-core); using Dear ImGui's "
               "small built-in font\n",
               sans.c_str());
  io.Fonts->AddFontDefault();
}

// [SECTION] Frame loop ---------------------------------------------------------------------------

int App::run() {
  if (!init_window()) return 1;
  while (!glfwWindowShouldClose(window_)) {
    const bool unattended = !options_.screenshot.empty() || options_.bench_frames > 0;
    if (unattended || traces_.any_loading() || ImGui::IsAnyMouseDown()) {
      glfwPollEvents();
    } else {
      glfwWaitEventsTimeout(0.25);  // idle: wake for input, and now and then for running traces
    }
    const auto frame_start = std::chrono::steady_clock::now();
    frame();
    if (first_data_frame_ms_ == 0 && traces_.source() && traces_.source()->data()) {
      first_data_frame_ms_ = ms_since(started_);
    }
    const bool loading = traces_.any_loading();
    if (!loading && !loaded_once_) {
      loaded_once_ = true;
      load_ms_ = ms_since(started_);
    }
    if (!options_.screenshot.empty() && screenshot_step()) break;
    if (options_.bench_frames > 0 && loaded_once_) {
      glFinish();  // count the rendering too, not only building the frame
      if (bench_step(ms_since(frame_start))) break;
    }
    glfwSwapBuffers(window_);
  }
  return exit_code_;
}

void App::frame() {
  frame_start_ = std::chrono::steady_clock::now();
  open_dropped();
  traces_.poll();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (!options_.screenshot.empty() || options_.bench_frames > 0) {
    // Unattended: wherever the pointer happens to be must not raise tooltips or hover effects.
    ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  }
  ImGui::NewFrame();
  draw_main_window();
  ImGui::Render();
  last_build_ms_ = ms_since(frame_start_);
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.10f, 0.105f, 0.12f, 1.0f);  // the main window's background (it draws none)
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void App::open_dropped() {
  std::vector<std::string> paths;
  {
    std::lock_guard lock(dropped_mutex_);
    paths.swap(dropped_);
  }
  for (const auto& p : paths) traces_.open(p);
}

// [SECTION] Layout -------------------------------------------------------------------------------

void App::draw_main_window() {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoResize | ImGuiWindowFlags_MenuBar |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBackground;
  ImGui::Begin("fpscope", nullptr, flags);
  draw_menu();
  const float list_width = std::max(250.0f, ImGui::GetFontSize() * 17.0f);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, ImVec4(0.12f, 0.125f, 0.145f, 1.0f));
  ImGui::BeginChild("trace_list", ImVec2(list_width, 0), true);
  ImGui::PopStyleColor();
  draw_trace_list_panel(traces_, selection_);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("views", ImVec2(0, 0), false);
  draw_views();
  ImGui::EndChild();
  for (const auto& path : browser_.draw()) traces_.open(path);
  ImGui::End();
}

void App::draw_menu() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open trace...", "Ctrl+O")) browser_.open();
    if (ImGui::MenuItem("Swap source and target", nullptr, false, traces_.docs().size() >= 2)) traces_.swap_pair();
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) glfwSetWindowShouldClose(window_, 1);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (const auto& view : views_) {
      if (ImGui::MenuItem(view->title())) requested_view_ = view->name();
    }
    ImGui::EndMenu();
  }
  const ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) browser_.open();
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q, false)) glfwSetWindowShouldClose(window_, 1);
  ImGui::TextDisabled("   drop .sqlite traces on the window to open them");
  ImGui::EndMenuBar();
}

void App::draw_views() {
  if (!selection_.show_view.empty()) {
    requested_view_ = selection_.show_view;
    selection_.show_view.clear();
  }
  ViewContext ctx{traces_, selection_, scripted_pan_};
  if (ImGui::BeginTabBar("views_tabs")) {
    for (const auto& view : views_) {
      const ImGuiTabItemFlags flags = requested_view_ == view->name() ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(view->title(), nullptr, flags)) {
        ImGui::BeginChild(view->name(), ImVec2(0, 0), false);
        view->draw(ctx);
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  requested_view_.clear();
  scripted_pan_ = 0;
}

// [SECTION] Unattended modes: screenshot, benchmark, state dump ----------------------------------

bool App::screenshot_step() {
  if (!loaded_once_) return false;
  // Every computation the views show first: the comparison of a pair runs on its own thread. It
  // has not started, or not finished, while it has neither a result nor an error.
  const PairComparison& pair = traces_.comparison();
  const bool pair_loaded = traces_.source() && traces_.source()->data() && traces_.target() && traces_.target()->data();
  if (pair.computing() || (pair_loaded && !pair.result() && pair.error().empty())) {
    settled_frames_ = 0;
    return false;
  }
  // Keep asking for the view: a selection jump must not take the capture elsewhere.
  requested_view_ = options_.view;
  if (++settled_frames_ < options_.settle_frames) return false;
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  const std::string error = write_framebuffer_png(options_.screenshot, width, height);
  if (options_.dump_state) dump_state();
  if (!error.empty()) {
    std::fprintf(stderr, "fpscope-gui: screenshot failed: %s\n", error.c_str());
    exit_code_ = 1;
    return true;
  }
  const bool any_failed = std::any_of(traces_.docs().begin(), traces_.docs().end(),
                                      [](const auto& d) { return d->state() == LoadState::kFailed; });
  std::printf("fpscope-gui: wrote %s (%dx%d, view %s)%s\n", options_.screenshot.c_str(), width, height,
              options_.view.c_str(), any_failed ? "; some traces could not be read" : "");
  exit_code_ = any_failed ? 3 : 0;
  return true;
}

bool App::bench_step(double frame_ms) {
  if (bench_frame_ms_.empty() && first_frame_ms_ == 0) {
    first_frame_ms_ = ms_since(started_);
    requested_view_ = "timeline";
  }
  // Pan right across the trace and back, a few percent of the visible window per frame.
  const int i = static_cast<int>(bench_frame_ms_.size());
  scripted_pan_ = (i / 200) % 2 == 0 ? 0.03 : -0.03;
  bench_frame_ms_.push_back(frame_ms);
  bench_build_ms_.push_back(last_build_ms_);
  if (static_cast<int>(bench_frame_ms_.size()) < options_.bench_frames + 3) return false;
  std::vector<double> t(bench_frame_ms_.begin() + 3, bench_frame_ms_.end());  // skip the tab switch
  std::sort(t.begin(), t.end());
  auto pct = [&](double p) { return t[std::min(t.size() - 1, static_cast<size_t>(p * (t.size() - 1) + 0.5))]; };
  std::printf("fpscope-gui benchmark (%d frames panning the timeline, window %dx%d)\n", options_.bench_frames,
              options_.width, options_.height);
  for (const auto& doc : traces_.docs()) {
    std::printf("  trace %-28s %s: reports drawable after %.0f ms, timeline and events after %.0f ms\n",
                doc->name().c_str(), doc->state() == LoadState::kReady ? "ready" : "failed",
                doc->first_data_seconds() * 1e3, doc->load_seconds() * 1e3);
  }
  std::printf("  first frame with data    %8.1f ms after start (the window draws from the first frame on)\n",
              first_data_frame_ms_);
  std::printf("  all traces loaded        %8.1f ms after start\n", load_ms_);
  std::printf("  frame time  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (built and rendered)\n", pct(0.5),
              pct(0.9), pct(0.99), t.back());
  t.assign(bench_build_ms_.begin() + 3, bench_build_ms_.end());
  std::sort(t.begin(), t.end());
  std::printf("  build time  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (ImGui frame, before OpenGL)\n",
              pct(0.5), pct(0.9), pct(0.99), t.back());
  if (options_.dump_state) dump_state();
  return true;
}

// One JSON object per line and trace: its load state, and, once loaded, the report object of
// `fpscope report --format json` filled from what the views draw (so a test can hold the two
// against each other), plus what only the GUI has (its timeline index and event table).
void App::dump_state() const {
  for (size_t i = 0; i < traces_.docs().size(); ++i) {
    const TraceDoc& doc = *traces_.docs()[i];
    nlohmann::ordered_json line = {{"trace", i + 1},
                           {"role", i == 0 ? "source" : i == 1 ? "target" : "other"},
                           {"path", doc.path().string()}};
    if (doc.state() == LoadState::kFailed) {
      line["state"] = "failed";
      line["error"] = doc.error();
    } else if (const auto data = doc.data()) {
      line["state"] = data->complete ? "ready" : "loading";
      line["report"] = nlohmann::ordered_json::parse(analysis::report_json(report_data_of(*data)));
      line["gui"] = {{"timeline_kernels", data->timeline.kernel_count()},
                     {"timeline_lanes", data->timeline.lanes.size()},
                     {"events", data->events.size()},
                     {"events_truncated", data->events_truncated}};
    } else {
      line["state"] = "loading";
    }
    std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);
}

}  // namespace fpscope::gui
