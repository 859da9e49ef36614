// Small plotting helpers drawn with Dear ImGui's own ImDrawList: a Plot reserves a rectangle in the
// current window, draws frame, grid, "nice" ticks (1-2-5 steps) and axis labels, maps data to pixels
// and offers lines, markers, bars, bands, reference lines, a legend and a hover read-out. Lines with
// more points than pixels are reduced to a min/max pair per pixel column, so a plot costs about the
// same whatever the length of the series.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace fpscope::gui::plot {

struct Range {
  double lo = 0;
  double hi = 1;
  double span() const { return hi - lo; }
  // Widens the range to hold v (ignores NaN and Inf).
  void include(double v);
  // A range with room around the data: zero-span ranges get a unit width, others `fraction` padding.
  Range padded(double fraction = 0.05) const;
  static Range empty();  // lo = +inf, hi = -inf: include() fills it
  bool is_empty() const { return !(hi >= lo); }
};

// Tick positions at 1, 2 or 5 times a power of ten covering [lo, hi], at most about max_ticks.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks, double* step = nullptr);
// Tick positions at integer powers of two for a log2 axis, thinned to about max_ticks.
std::vector<double> log2_ticks(double lo_exp, double hi_exp, int max_ticks);
// A tick label with just enough decimals for the tick step.
std::string tick_label(double value, double step);

enum class Scale { kLinear, kLog2 };

struct Axis {
  std::string label;
  Range range;
  Scale scale = Scale::kLinear;
  // Formats a tick value (data units); the default prints tick_label (linear) or 2^e (log2).
  std::function<std::string(double)> format;
  bool binary_units = false;  // ticks at round KiB/MiB/GiB (for byte axes)
};

struct LegendItem {
  std::string label;
  ImU32 color;
  bool dashed = false;  // drawn as a band swatch instead of a line
};

class Plot {
 public:
  // size: pixels; a component <= 0 fills the available width or height of the window.
  Plot(const char* id, ImVec2 size, Axis x, Axis y);
  ~Plot();
  Plot(const Plot&) = delete;
  Plot& operator=(const Plot&) = delete;

  // Data to pixels and back (log2 axes take data values, not exponents).
  float px(double x) const;
  float py(double y) const;
  double x_at(float pixel) const;
  double y_at(float pixel) const;

  ImDrawList* draw_list() const { return draw_; }
  ImVec2 area_min() const { return min_; }
  ImVec2 area_max() const { return max_; }
  bool hovered() const { return hovered_; }
  bool clicked() const { return clicked_; }
  ImVec2 mouse() const { return ImGui::GetIO().MousePos; }

  // A polyline through (xs[i], ys[i]); NaN values break the line. xs must be ascending.
  void line(std::span<const double> xs, std::span<const double> ys, ImU32 color, float thickness = 1.8f);
  // A stair line (value holds until the next x), as for a loss scale.
  void stairs(std::span<const double> xs, std::span<const double> ys, ImU32 color, float thickness = 1.8f);
  void markers(std::span<const double> xs, std::span<const double> ys, ImU32 color, float radius = 3.0f);
  void bar(double x0, double x1, double y0, double y1, ImU32 color);
  // Horizontal band between y0 and y1 across the plot, with an optional label at its right edge.
  void hband(double y0, double y1, ImU32 color, const char* label = nullptr);
  void vband(double x0, double x1, ImU32 color);
  void hline(double y, ImU32 color, const char* label = nullptr, float thickness = 1.0f);
  void vline(double x, ImU32 color, const char* label = nullptr, float thickness = 1.0f);
  // Legend box in the top-right corner of the plot area.
  void legend(std::span<const LegendItem> items);
  // A vertical guide at the mouse and a tooltip built by `body`, when the plot is hovered.
  void hover_readout(const std::function<void(double x)>& body);

 private:
  void draw_axes();
  double to_unit_x(double x) const;
  double to_unit_y(double y) const;

  Axis x_;
  Axis y_;
  ImDrawList* draw_ = nullptr;
  ImVec2 frame_min_, frame_max_;  // whole widget
  ImVec2 min_, max_;              // plot area inside the axes
  bool hovered_ = false;
  bool clicked_ = false;
};

// The step axis under a heat map with one column per step (`steps` distinct and ascending, the map
// spanning x0..x1): ticks at round steps (at the column of the first step at or after each), each
// label centred on its column and kept inside the map's width, and the title "step" to the left,
// kFirstLabelGap pixels clear of the first label. `text_width` measures a label.
struct StepTick {
  float x = 0;     // the tick, at its column's centre
  float left = 0;  // the label's left edge
  std::string label;
};
struct StepAxisLayout {
  std::vector<StepTick> ticks;
  float title_left = 0;
};
inline constexpr float kFirstLabelGap = 8;
StepAxisLayout step_axis_layout(std::span<const int64_t> steps, float x0, float x1,
                                const std::function<float(const std::string&)>& text_width);
// Draws it under a map whose bottom edge is at y.
void heat_map_step_axis(ImDrawList* draw, std::span<const int64_t> steps, float x0, float x1, float y);

// The legend as one row of swatches and labels at the cursor, outside any plot: for plots whose
// data fills every corner, or several plots that share one legend.
void legend_row(std::span<const LegendItem> items);

// A vertical colour bar for a scale over [lo, hi] with ticks; marks are labelled reference values
// (for example the fp16 limits). Reserves `size` in the current window.
struct ColorBarMark {
  double value;
  std::string label;
  ImU32 color;
};
void color_bar(const char* title, ImVec2 size, double lo, double hi,
               const std::function<ImU32(double)>& color_of, std::span<const ColorBarMark> marks,
               const std::function<std::string(double)>& format);

}  // namespace fpscope::gui::plot
