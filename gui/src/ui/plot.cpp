// ImDrawList plotting helpers (see plot.h).
#include "ui/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace fpscope::gui::plot {
namespace {

constexpr ImU32 kFrameBg = IM_COL32(24, 26, 32, 255);
constexpr ImU32 kGrid = IM_COL32(255, 255, 255, 22);
constexpr ImU32 kAxis = IM_COL32(180, 180, 190, 255);
constexpr ImU32 kTickText = IM_COL32(200, 200, 210, 255);

std::string default_label(const Axis& axis, double v, double step) {
  if (axis.format) return axis.format(v);
  if (axis.scale == Scale::kLog2) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "2^%d", static_cast<int>(std::lround(std::log2(v))));
    return buf;
  }
  return tick_label(v, step);
}

std::vector<double> axis_ticks(const Axis& axis, float pixels, float spacing, double* step) {
  const int max_ticks = std::max(2, static_cast<int>(pixels / spacing));
  if (axis.scale == Scale::kLog2) {
    *step = 1;
    std::vector<double> exps = log2_ticks(std::log2(axis.range.lo), std::log2(axis.range.hi), max_ticks);
    for (double& e : exps) e = std::exp2(e);
    return exps;
  }
  if (axis.binary_units) {
    // Ticks at round numbers of the largest binary unit (KiB, MiB, ...) below the range's top.
    double unit = 1;
    while (axis.range.hi / unit >= 1024) unit *= 1024;
    std::vector<double> ticks = nice_ticks(axis.range.lo / unit, axis.range.hi / unit, max_ticks, step);
    for (double& t : ticks) t *= unit;
    *step *= unit;
    return ticks;
  }
  return nice_ticks(axis.range.lo, axis.range.hi, max_ticks, step);
}

}  // namespace

void Range::include(double v) {
  if (!std::isfinite(v)) return;
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

Range Range::padded(double fraction) const {
  if (is_empty()) return Range{0, 1};
  if (hi == lo) return Range{lo - 0.5, hi + 0.5};
  const double pad = (hi - lo) * fraction;
  return Range{lo - pad, hi + pad};
}

Range Range::empty() {
  return Range{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks, double* step_out) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 1) return ticks;
  const double raw = (hi - lo) / max_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  if (step_out) *step_out = step;
  return ticks;
}

std::vector<double> log2_ticks(double lo_exp, double hi_exp, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi_exp > lo_exp) || !std::isfinite(lo_exp) || !std::isfinite(hi_exp)) return ticks;
  const double span = hi_exp - lo_exp;
  int stride = 1;
  while (span / stride > max_ticks) stride *= 2;
  for (int e = static_cast<int>(std::ceil(lo_exp / stride)) * stride; e <= hi_exp; e += stride) {
    ticks.push_back(e);
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  char buf[48];
  const double a = std::fabs(value);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.3g", value);
  } else {
    const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step))));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  }
  return buf;
}

Plot::Plot(const char* id, ImVec2 size, Axis x, Axis y) : x_(std::move(x)), y_(std::move(y)) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (size.x <= 0) size.x = std::max(100.0f, avail.x + size.x);
  if (size.y <= 0) size.y = std::max(80.0f, avail.y + size.y);
  frame_min_ = ImGui::GetCursorScreenPos();
  frame_max_ = ImVec2(frame_min_.x + size.x, frame_min_.y + size.y);
  ImGui::InvisibleButton(id, size);
  hovered_ = ImGui::IsItemHovered();
  clicked_ = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  draw_ = ImGui::GetWindowDrawList();

  const float line = ImGui::GetTextLineHeight();
  const float left = ImGui::CalcTextSize("-0.0000e+00").x * 0.75f + (y_.label.empty() ? 6 : line + 10);
  const float bottom = line + 8 + (x_.label.empty() ? 0 : line + 2);
  min_ = ImVec2(frame_min_.x + left, frame_min_.y + (y_.label.empty() ? line * 0.5f : line + 6));
  max_ = ImVec2(frame_max_.x - 12, frame_max_.y - bottom);
  if (x_.scale == Scale::kLog2 && x_.range.lo <= 0) x_.range.lo = 1e-30;
  if (y_.scale == Scale::kLog2 && y_.range.lo <= 0) y_.range.lo = 1e-30;
  if (!(x_.range.hi > x_.range.lo)) x_.range = x_.range.padded();
  if (!(y_.range.hi > y_.range.lo)) y_.range = y_.range.padded();
  draw_axes();
  draw_->PushClipRect(min_, max_, true);
}

Plot::~Plot() { draw_->PopClipRect(); }

double Plot::to_unit_x(double x) const {
  if (x_.scale == Scale::kLog2) {
    return (std::log2(x) - std::log2(x_.range.lo)) / (std::log2(x_.range.hi) - std::log2(x_.range.lo));
  }
  return (x - x_.range.lo) / x_.range.span();
}

double Plot::to_unit_y(double y) const {
  if (y_.scale == Scale::kLog2) {
    return (std::log2(y) - std::log2(y_.range.lo)) / (std::log2(y_.range.hi) - std::log2(y_.range.lo));
  }
  return (y - y_.range.lo) / y_.range.span();
}

float Plot::px(double x) const { return min_.x + static_cast<float>(to_unit_x(x)) * (max_.x - min_.x); }
float Plot::py(double y) const { return max_.y - static_cast<float>(to_unit_y(y)) * (max_.y - min_.y); }

double Plot::x_at(float pixel) const {
  const double u = (pixel - min_.x) / (max_.x - min_.x);
  if (x_.scale == Scale::kLog2) {
    return std::exp2(std::log2(x_.range.lo) + u * (std::log2(x_.range.hi) - std::log2(x_.range.lo)));
  }
  return x_.range.lo + u * x_.range.span();
}

double Plot::y_at(float pixel) const {
  const double u = (max_.y - pixel) / (max_.y - min_.y);
  if (y_.scale == Scale::kLog2) {
    return std::exp2(std::log2(y_.range.lo) + u * (std::log2(y_.range.hi) - std::log2(y_.range.lo)));
  }
  return y_.range.lo + u * y_.range.span();
}

void Plot::draw_axes() {
  draw_->AddRectFilled(min_, max_, kFrameBg);
  const float line = ImGui::GetTextLineHeight();
  double step = 1;
  for (double t : axis_ticks(x_, max_.x - min_.x, 110.0f, &step)) {
    const float x = px(t);
    draw_->AddLine(ImVec2(x, min_.y), ImVec2(x, max_.y), kGrid);
    draw_->AddLine(ImVec2(x, max_.y), ImVec2(x, max_.y + 4), kAxis);
    const std::string text = default_label(x_, t, step);
    const float w = ImGui::CalcTextSize(text.c_str()).x;
    draw_->AddText(ImVec2(std::clamp(x - w / 2, min_.x - 4, max_.x - w), max_.y + 5), kTickText, text.c_str());
  }
  for (double t : axis_ticks(y_, max_.y - min_.y, 2.6f * line, &step)) {
    const float y = py(t);
    draw_->AddLine(ImVec2(min_.x, y), ImVec2(max_.x, y), kGrid);
    draw_->AddLine(ImVec2(min_.x - 4, y), ImVec2(min_.x, y), kAxis);
    const std::string text = default_label(y_, t, step);
    const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    draw_->AddText(ImVec2(min_.x - 7 - sz.x, y - sz.y / 2), kTickText, text.c_str());
  }
  draw_->AddRect(min_, max_, kAxis);
  if (!x_.label.empty()) {
    const float w = ImGui::CalcTextSize(x_.label.c_str()).x;
    draw_->AddText(ImVec2((min_.x + max_.x - w) / 2, max_.y + line + 8), kAxis, x_.label.c_str());
  }
  if (!y_.label.empty()) {
    // ImGui has no rotated text: the y label stands above the tick labels at the top left.
    draw_->AddText(ImVec2(frame_min_.x, frame_min_.y), kAxis, y_.label.c_str());
  }
}

void Plot::line(std::span<const double> xs, std::span<const double> ys, ImU32 color, float thickness) {
  const size_t n = std::min(xs.size(), ys.size());
  if (n == 0) return;
  // Start at the first point left of the view, stop after the first one right of it.
  size_t begin = static_cast<size_t>(std::lower_bound(xs.begin(), xs.begin() + n, x_.range.lo) - xs.begin());
  size_t end = static_cast<size_t>(std::upper_bound(xs.begin(), xs.begin() + n, x_.range.hi) - xs.begin());
  begin = begin > 0 ? begin - 1 : 0;
  end = std::min(n, end + 1);
  std::vector<ImVec2> run;
  // Zero-length segments break ImGui's polyline joints: drop points that repeat the last one.
  auto push = [&](ImVec2 p) {
    if (!run.empty() && std::fabs(run.back().x - p.x) < 0.05f && std::fabs(run.back().y - p.y) < 0.05f) return;
    run.push_back(p);
  };
  auto flush = [&] {
    if (run.size() >= 2) draw_->AddPolyline(run.data(), static_cast<int>(run.size()), color, 0, thickness);
    if (run.size() == 1) draw_->AddCircleFilled(run[0], thickness, color);
    run.clear();
  };
  // Points sharing a pixel column are reduced to first, min, max and last, in that order, so a
  // dense series keeps its envelope at a cost bounded by the plot's width.
  struct Column {
    int x = std::numeric_limits<int>::min();
    ImVec2 first, last;
    float lo = 0, hi = 0;
    size_t points = 0;
  } col;
  auto emit = [&] {
    if (col.points == 0) return;
    push(col.first);
    if (col.points > 2) {
      push(ImVec2(col.first.x, col.lo));
      push(ImVec2(col.first.x, col.hi));
    }
    push(col.last);
    col.points = 0;
  };
  for (size_t i = begin; i < end; ++i) {
    if (!std::isfinite(ys[i]) || (y_.scale == Scale::kLog2 && ys[i] <= 0)) {
      emit();
      flush();
      continue;
    }
    const ImVec2 p(px(xs[i]), py(ys[i]));
    const int x = static_cast<int>(std::floor(p.x));
    if (x != col.x) {
      emit();
      col.x = x;
      col.first = p;
      col.lo = col.hi = p.y;
    }
    col.lo = std::min(col.lo, p.y);
    col.hi = std::max(col.hi, p.y);
    col.last = p;
    ++col.points;
  }
  emit();
  flush();
}

void Plot::stairs(std::span<const double> xs, std::span<const double> ys, ImU32 color, float thickness) {
  const size_t n = std::min(xs.size(), ys.size());
  std::vector<double> sx, sy;
  sx.reserve(2 * n);
  sy.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      sx.push_back(xs[i]);
      sy.push_back(ys[i - 1]);
    }
    sx.push_back(xs[i]);
    sy.push_back(ys[i]);
  }
  line(sx, sy, color, thickness);
}

void Plot::markers(std::span<const double> xs, std::span<const double> ys, ImU32 color, float radius) {
  const size_t n = std::min(xs.size(), ys.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ys[i]) || xs[i] < x_.range.lo || xs[i] > x_.range.hi) continue;
    draw_->AddCircleFilled(ImVec2(px(xs[i]), py(ys[i])), radius, color);
  }
}

void Plot::bar(double x0, double x1, double y0, double y1, ImU32 color) {
  draw_->AddRectFilled(ImVec2(px(x0), py(y1)), ImVec2(std::max(px(x1), px(x0) + 1), py(y0)), color);
}

void Plot::hband(double y0, double y1, ImU32 color, const char* label) {
  const float top = std::max(min_.y, py(y1));
  const float bottom = std::min(max_.y, py(y0));
  if (bottom <= top) return;
  draw_->AddRectFilled(ImVec2(min_.x, top), ImVec2(max_.x, bottom), color);
  if (label) {
    const ImVec2 sz = ImGui::CalcTextSize(label);
    draw_->AddText(ImVec2(max_.x - sz.x - 4, top + 2), kTickText, label);
  }
}

void Plot::vband(double x0, double x1, ImU32 color) {
  const float left = std::max(min_.x, px(x0));
  const float right = std::min(max_.x, px(x1));
  if (right <= left) return;
  draw_->AddRectFilled(ImVec2(left, min_.y), ImVec2(right, max_.y), color);
}

void Plot::hline(double y, ImU32 color, const char* label, float thickness) {
  const float p = py(y);
  draw_->AddLine(ImVec2(min_.x, p), ImVec2(max_.x, p), color, thickness);
  if (label) draw_->AddText(ImVec2(min_.x + 4, p - ImGui::GetTextLineHeight() - 1), color, label);
}

void Plot::vline(double x, ImU32 color, const char* label, float thickness) {
  const float p = px(x);
  draw_->AddLine(ImVec2(p, min_.y), ImVec2(p, max_.y), color, thickness);
  if (label) draw_->AddText(ImVec2(p + 3, min_.y + 2), color, label);
}

namespace {

// An item's swatch (a line, or a band for `dashed`) `swatch` wide, its left edge at x, beside a
// text line whose top is at y.
void draw_swatch(ImDrawList* draw, const LegendItem& item, float x, float y, float swatch) {
  const float line = ImGui::GetTextLineHeight();
  if (item.dashed) {
    draw->AddRectFilled(ImVec2(x, y + 2), ImVec2(x + swatch, y + line - 2), item.color);
  } else {
    draw->AddLine(ImVec2(x, y + line / 2), ImVec2(x + swatch, y + line / 2), item.color, 2.5f);
  }
}

}  // namespace

void Plot::legend(std::span<const LegendItem> items) {
  if (items.empty()) return;
  const float line = ImGui::GetTextLineHeight();
  const float swatch = line * 1.4f;
  float width = 0;
  for (const auto& item : items) width = std::max(width, ImGui::CalcTextSize(item.label.c_str()).x);
  const ImVec2 size(width + swatch + 18, items.size() * (line + 3) + 8);
  const ImVec2 origin(max_.x - size.x - 8, min_.y + 8);
  draw_->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y), IM_COL32(15, 16, 20, 225), 3);
  draw_->AddRect(origin, ImVec2(origin.x + size.x, origin.y + size.y), IM_COL32(255, 255, 255, 50), 3);
  float y = origin.y + 5;
  for (const auto& item : items) {
    draw_swatch(draw_, item, origin.x + 6, y, swatch);
    draw_->AddText(ImVec2(origin.x + swatch + 12, y), kTickText, item.label.c_str());
    y += line + 3;
  }
}

StepAxisLayout step_axis_layout(std::span<const int64_t> steps, float x0, float x1,
                                const std::function<float(const std::string&)>& text_width) {
  StepAxisLayout layout;
  layout.title_left = x0 - text_width("step") - kFirstLabelGap;
  if (steps.empty() || x1 <= x0) return layout;
  const float column = (x1 - x0) / static_cast<float>(steps.size());
  double step = 1;
  for (double t : nice_ticks(static_cast<double>(steps.front()), static_cast<double>(steps.back()),
                             std::max(2, static_cast<int>((x1 - x0) / 70)), &step)) {
    const auto at = std::lower_bound(steps.begin(), steps.end(), static_cast<int64_t>(t));
    if (at == steps.end()) continue;
    StepTick tick;
    tick.x = x0 + column * (static_cast<float>(at - steps.begin()) + 0.5f);
    tick.label = tick_label(t, step);
    const float w = text_width(tick.label);
    tick.left = std::max(x0, std::min(tick.x - w / 2, x1 - w));
    layout.ticks.push_back(std::move(tick));
  }
  if (!layout.ticks.empty())
    layout.title_left = std::min(x0, layout.ticks.front().left) - text_width("step") - kFirstLabelGap;
  return layout;
}

void heat_map_step_axis(ImDrawList* draw, std::span<const int64_t> steps, float x0, float x1, float y) {
  const StepAxisLayout layout =
      step_axis_layout(steps, x0, x1, [](const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; });
  for (const StepTick& tick : layout.ticks) {
    draw->AddLine(ImVec2(tick.x, y), ImVec2(tick.x, y + 4), kAxis);
    draw->AddText(ImVec2(tick.left, y + 5), kTickText, tick.label.c_str());
  }
  draw->AddText(ImVec2(layout.title_left, y + 5), IM_COL32(160, 160, 170, 255), "step");
}

void legend_row(std::span<const LegendItem> items) {
  const float swatch = ImGui::GetTextLineHeight() * 1.4f;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) ImGui::SameLine(0, 16);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    draw_swatch(ImGui::GetWindowDrawList(), items[i], at.x, at.y, swatch);
    ImGui::Dummy(ImVec2(swatch, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, 6);
    ImGui::TextUnformatted(items[i].label.c_str());
  }
}

void Plot::hover_readout(const std::function<void(double x)>& body) {
  if (!hovered_) return;
  const ImVec2 m = mouse();
  if (m.x < min_.x || m.x > max_.x || m.y < min_.y || m.y > max_.y) return;
  draw_->AddLine(ImVec2(m.x, min_.y), ImVec2(m.x, max_.y), IM_COL32(255, 255, 255, 90));
  ImGui::BeginTooltip();
  body(x_at(m.x));
  ImGui::EndTooltip();
}

void color_bar(const char* title, ImVec2 size, double lo, double hi,
               const std::function<ImU32(double)>& color_of, std::span<const ColorBarMark> marks,
               const std::function<std::string(double)>& format) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  draw->AddText(origin, kAxis, title);
  const ImVec2 bar_min(origin.x + 4, origin.y + line + 8);
  const ImVec2 bar_max(origin.x + 4 + 22, origin.y + size.y - line / 2);
  const int strips = 96;
  const float h = (bar_max.y - bar_min.y) / strips;
  for (int i = 0; i < strips; ++i) {
    const double v = hi - (hi - lo) * (i + 0.5) / strips;
    draw->AddRectFilled(ImVec2(bar_min.x, bar_min.y + i * h), ImVec2(bar_max.x, bar_min.y + (i + 1) * h + 1),
                        color_of(v));
  }
  draw->AddRect(bar_min, bar_max, kAxis);
  auto y_of = [&](double v) { return bar_min.y + static_cast<float>((hi - v) / (hi - lo)) * (bar_max.y - bar_min.y); };
  double step = 1;
  for (double t : nice_ticks(lo, hi, static_cast<int>((bar_max.y - bar_min.y) / (2.2f * line)), &step)) {
    const float y = y_of(t);
    draw->AddLine(ImVec2(bar_max.x, y), ImVec2(bar_max.x + 4, y), kAxis);
    draw->AddText(ImVec2(bar_max.x + 9, y - line / 2), kTickText, format(t).c_str());
  }
  const float mark_x = bar_max.x + 9 + ImGui::CalcTextSize("2^-100").x + 8;
  for (const auto& mark : marks) {
    if (mark.value < lo || mark.value > hi) continue;
    const float y = y_of(mark.value);
    draw->AddLine(ImVec2(bar_min.x - 3, y), ImVec2(mark_x - 2, y), mark.color, 2.0f);
    draw->AddText(ImVec2(mark_x, y - line / 2), mark.color, mark.label.c_str());
  }
}

}  // namespace fpscope::gui::plot
