// Tensor ranges view: a heat map of layers by step coloured by the absmax exponent (log2) of their
// outputs, with the fp16 and bf16 limits on the colour scale and cells beyond fp16's largest value
// outlined; below it, the exponent histogram of the selected tensor (exponent_histogram.h).
// Clicking a cell selects that layer and step and shows the histogram of its largest output.
//
// [SECTION] Heat map grid
// [SECTION] Heat map drawing
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "ui/plot.h"
#include "views/exponent_histogram.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

const double kF16MaxExp = std::log2(contract::kF16.max_finite());  // 15.9991

// [SECTION] Heat map grid ------------------------------------------------------------------------

struct HeatGrid {
  const TraceData* owner = nullptr;
  analysis::RangeView view = analysis::RangeView::Activations;
  std::vector<std::string> layers;
  std::vector<int64_t> steps;                  // distinct, ascending
  std::vector<std::optional<double>> absmax;   // [layer * steps + step]
  std::vector<int64_t> nonfinite;
  double lo = -24, hi = 16;                    // exponent range of the data

  // Activations come with the loaded trace; the other views are asked of the analyzer when chosen.
  void build(const TraceData& d, analysis::RangeView v) {
    owner = &d;
    view = v;
    std::vector<analysis::LayerStepCell> other;
    if (v != analysis::RangeView::Activations) other = analysis::layer_step_ranges(*d.trace, v);
    const std::vector<analysis::LayerStepCell>& cells = v == analysis::RangeView::Activations ? d.layer_steps : other;
    layers.clear();
    for (const auto& c : cells) {
      if (std::find(layers.begin(), layers.end(), c.layer) == layers.end()) layers.push_back(c.layer);
    }
    steps.clear();
    for (const auto& c : cells) steps.push_back(c.step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    absmax.assign(layers.size() * steps.size(), std::nullopt);
    nonfinite.assign(layers.size() * steps.size(), 0);
    plot::Range r = plot::Range::empty();
    for (const auto& c : cells) {
      const size_t li = static_cast<size_t>(std::find(layers.begin(), layers.end(), c.layer) - layers.begin());
      const size_t si = static_cast<size_t>(std::lower_bound(steps.begin(), steps.end(), c.step) - steps.begin());
      const size_t at = li * steps.size() + si;
      if (c.absmax && *c.absmax > 0) {
        absmax[at] = std::max(absmax[at].value_or(0.0), *c.absmax);
        r.include(std::log2(*c.absmax));
      }
      nonfinite[at] += c.nonfinite;
    }
    lo = std::floor(std::min(r.is_empty() ? -24.0 : r.lo, -25.0));
    hi = std::ceil(std::max(r.is_empty() ? 16.0 : r.hi, 17.0));
  }
};

class RangesView final : public View {
 public:
  const char* name() const override { return "ranges"; }
  const char* title() const override { return "Tensor ranges"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    std::vector<std::pair<const TraceDoc*, int>> runs;
    for (int i = 0; i < 2 && i < static_cast<int>(ctx.traces.docs().size()); ++i) {
      const TraceDoc* doc = ctx.traces.docs()[static_cast<size_t>(i)].get();
      if (loaded(doc) && !draw_still_reading(*doc, "layer ranges by step")) runs.push_back({doc, i});
    }
    if (runs.empty()) return;
    draw_view_choice(ctx.selection);
    const float map_h = ImGui::GetContentRegionAvail().y * 0.46f;
    const float bar_w = ImGui::GetFontSize() * 12.5f;
    const float map_w = (ImGui::GetContentRegionAvail().x - bar_w) / static_cast<float>(runs.size()) - 8;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      HeatGrid& g = grid_for(i, *runs[i].first->data(), ctx.selection.range_view);
      lo = i == 0 ? g.lo : std::min(lo, g.lo);
      hi = i == 0 ? g.hi : std::max(hi, g.hi);
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      ImGui::BeginGroup();
      ImGui::PushID(static_cast<int>(i));
      draw_heat_map(ctx, *runs[i].first, runs[i].second, grids_[i], lo, hi, ImVec2(map_w, map_h));
      ImGui::PopID();
      ImGui::EndGroup();
      ImGui::SameLine();
    }
    draw_color_scale(lo, hi, ImVec2(bar_w, map_h));
    ImGui::Spacing();
    const TraceDoc* source = ctx.traces.source();
    const std::optional<TensorPick>* fallback = source && source->data() ? &default_pick(*source) : nullptr;
    histogram_.draw(ctx, fallback && *fallback ? std::optional<TensorRef>(TensorRef{source, (*fallback)->kernel.kernel_id,
                                                                                    (*fallback)->tensor_id})
                                               : std::nullopt);
  }

 private:
  HeatGrid& grid_for(size_t i, const TraceData& d, analysis::RangeView view) {
    if (grids_.size() <= i) grids_.resize(i + 1);
    if (grids_[i].owner != &d || grids_[i].view != view) grids_[i].build(d, view);
    return grids_[i];
  }

  // Which tensors the heat maps show: forward activations unless the user picks another view.
  void draw_view_choice(Selection& selection) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("show");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 26);
    if (ImGui::BeginCombo("##range_view", analysis::range_view_info(selection.range_view).title)) {
      for (int i = 0; i < analysis::kRangeViewCount; ++i) {
        const auto& info = analysis::range_view_info(static_cast<analysis::RangeView>(i));
        if (ImGui::Selectable(info.title, info.view == selection.range_view)) selection.range_view = info.view;
      }
      ImGui::EndCombo();
    }
  }

  // [SECTION] Heat map drawing ---------------------------------------------------------------------

  void draw_heat_map(ViewContext& ctx, const TraceDoc& doc, int index, const HeatGrid& g, double lo, double hi,
                     ImVec2 size) {
    const float line = ImGui::GetTextLineHeight();
    ImGui::TextColored(colors::to_vec4(colors::run(index)), "%s", run_label(doc, index).c_str());
    ImGui::SameLine();
    const auto& info = analysis::range_view_info(g.view);
    ImGui::TextDisabled("absmax of %s", info.short_title);
    size.y -= line + 6;
    if (g.layers.empty() || g.steps.empty()) {
      ImGui::TextDisabled("none in this trace (no measured tensors of this kind)");
      ImGui::Dummy(ImVec2(size.x, size.y - line));
      return;
    }
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("heat", size);
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float label_w = 0;
    for (const auto& l : g.layers) label_w = std::max(label_w, ImGui::CalcTextSize(l.c_str()).x);
    label_w = std::min(label_w + 10, size.x * 0.35f);
    const ImVec2 a(origin.x + label_w, origin.y);
    const ImVec2 b(origin.x + size.x, origin.y + size.y - line - 6);
    const float row_h = (b.y - a.y) / static_cast<float>(g.layers.size());
    const size_t n_steps = g.steps.size();
    const float col_w = (b.x - a.x) / static_cast<float>(n_steps);
    // With more steps than pixels, each drawn column takes the largest absmax of its steps.
    const size_t columns = std::min(n_steps, static_cast<size_t>(std::max(1.0f, b.x - a.x)));
    const float drawn_w = (b.x - a.x) / static_cast<float>(columns);
    // Rows heading for fp16's largest value (the why report's forecast): a mark before the map and
    // the forecast as the row label's tooltip.
    const analysis::RangeForecast* hovered_forecast = nullptr;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (size_t li = 0; li < g.layers.size(); ++li) {
      const float y0 = a.y + row_h * static_cast<float>(li);
      dl->PushClipRect(ImVec2(origin.x, y0), ImVec2(a.x - 4, y0 + row_h), true);
      dl->AddText(ImVec2(origin.x, y0 + (row_h - line) / 2), IM_COL32(210, 210, 220, 255), g.layers[li].c_str());
      dl->PopClipRect();
      if (const analysis::RangeForecast* f = forecast_of(doc, g.view, g.layers[li])) {
        const float m = std::min(row_h * 0.35f, 7.0f), cy = y0 + row_h / 2;
        dl->AddTriangleFilled(ImVec2(a.x - 3 - m, cy - m), ImVec2(a.x - 3, cy), ImVec2(a.x - 3 - m, cy + m),
                              colors::kWarningText);
        if (hovered && mouse.x < a.x && mouse.y >= y0 && mouse.y < y0 + row_h) hovered_forecast = f;
      }
      for (size_t c = 0; c < columns; ++c) {
        const size_t s0 = c * n_steps / columns, s1 = std::max(s0 + 1, (c + 1) * n_steps / columns);
        std::optional<double> v;
        int64_t bad = 0;
        for (size_t s = s0; s < s1; ++s) {
          const auto& cell = g.absmax[li * n_steps + s];
          if (cell) v = std::max(v.value_or(0.0), *cell);
          bad += g.nonfinite[li * n_steps + s];
        }
        const ImVec2 p0(a.x + drawn_w * static_cast<float>(c), y0);
        const ImVec2 p1(p0.x + drawn_w, y0 + row_h);
        const ImU32 fill = v ? colors::exponent_scale(std::log2(*v), lo, hi) : IM_COL32(45, 45, 52, 255);
        dl->AddRectFilled(p0, ImVec2(p1.x - (drawn_w > 4 ? 1 : 0), p1.y - 1), fill);
        if (analysis::headroom_log2(v, analysis::Format::F16).value_or(0) < 0) {  // a corner mark: beyond fp16's largest value
          const float mark = std::min(std::min(drawn_w, row_h) * 0.45f, 9.0f);
          dl->AddTriangleFilled(ImVec2(p1.x - 1 - mark, p0.y), ImVec2(p1.x - 1, p0.y), ImVec2(p1.x - 1, p0.y + mark),
                                colors::kOverflow);
        }
        if (bad > 0) {
          const float r = std::min(drawn_w, row_h) * 0.22f;
          dl->AddCircleFilled(ImVec2((p0.x + p1.x) / 2, (p0.y + p1.y) / 2), std::max(r, 2.0f), colors::kNaN);
        }
      }
    }
    draw_selection_marks(ctx, g, a, b, row_h, col_w, dl);
    plot::heat_map_step_axis(dl, g.steps, a.x, b.x, b.y);
    if (hovered_forecast) {
      ImGui::SetTooltip("%s", hovered_forecast->summary.c_str());
    } else if (hovered) {
      hover_cell(ctx, doc, g, a, b, row_h, col_w);
    }
  }

  static const analysis::RangeForecast* forecast_of(const TraceDoc& doc, analysis::RangeView view, const std::string& row) {
    const auto d = doc.data();  // the forecasts live as long as this snapshot; it outlives the frame
    if (!d) return nullptr;
    for (const analysis::RangeForecast& f : d->why.forecasts)
      if (f.view == view && f.row == row) return &f;
    return nullptr;
  }

  void draw_selection_marks(ViewContext& ctx, const HeatGrid& g, ImVec2 a, ImVec2 b, float row_h, float col_w,
                            ImDrawList* dl) {
    const auto& sel = ctx.selection;
    if (sel.layer) {
      auto it = std::find(g.layers.begin(), g.layers.end(), *sel.layer);
      if (it != g.layers.end()) {
        const float y = a.y + row_h * static_cast<float>(it - g.layers.begin());
        dl->AddRect(ImVec2(a.x - 2, y), ImVec2(b.x + 1, y + row_h), IM_COL32(255, 255, 255, 120), 0, 0, 1.0f);
      }
    }
    if (sel.step) {
      auto it = std::lower_bound(g.steps.begin(), g.steps.end(), *sel.step);
      if (it != g.steps.end() && *it == *sel.step) {
        const float x = a.x + col_w * static_cast<float>(it - g.steps.begin());
        dl->AddRect(ImVec2(x - 1, a.y - 1), ImVec2(x + std::max(col_w, 2.0f) + 1, b.y + 1), colors::kSelection, 0, 0, 2.0f);
      }
    }
  }

  void hover_cell(ViewContext& ctx, const TraceDoc& doc, const HeatGrid& g, ImVec2 a, ImVec2 b, float row_h,
                  float col_w) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    if (m.x < a.x || m.x >= b.x || m.y < a.y || m.y >= b.y) return;
    const size_t li = std::min(g.layers.size() - 1, static_cast<size_t>((m.y - a.y) / row_h));
    const size_t si = std::min(g.steps.size() - 1, static_cast<size_t>((m.x - a.x) / col_w));
    const auto& v = g.absmax[li * g.steps.size() + si];
    ImGui::BeginTooltip();
    ImGui::Text("layer %s, step %lld", g.layers[li].c_str(), static_cast<long long>(g.steps[si]));
    if (v) {
      ImGui::Text("absmax %s (2^%.2f)", analysis::human_number(*v).c_str(), std::log2(*v));
      const double head = analysis::headroom_log2(*v, analysis::Format::F16).value_or(0);
      ImGui::TextColored(colors::to_vec4(head < 0 ? colors::kOverflow : colors::kDimText),
                         head < 0 ? "overflows fp16 by 2^%.1f" : "fp16 headroom 2^%.1f", std::fabs(head));
    } else {
      ImGui::TextDisabled("no finite nonzero value");
    }
    if (const int64_t bad = g.nonfinite[li * g.steps.size() + si]) {
      ImGui::TextColored(colors::to_vec4(colors::kNaN), "%lld NaN/Inf values", static_cast<long long>(bad));
    }
    ImGui::TextDisabled("click: select, and show the histogram of its largest output");
    ImGui::EndTooltip();
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) select_cell(ctx, doc, g.layers[li], g.steps[si]);
  }

  void draw_color_scale(double lo, double hi, ImVec2 size) {
    const std::vector<plot::ColorBarMark> marks = {
        {kF16MaxExp, "fp16 max", colors::kOverflow},
        {-14, "fp16 normal", colors::kWarningText},
        {-24, "fp16 subnormal", colors::kUnderflow},
        {127.99, "bf16 max", colors::kOverflow},
        {-126, "bf16 normal", colors::kWarningText},
        {-133, "bf16 subnormal", colors::kUnderflow},
    };
    ImGui::BeginGroup();
    plot::color_bar("log2 absmax", ImVec2(size.x, size.y - ImGui::GetTextLineHeight() * 3.2f), lo, hi,
                    [&](double e) { return colors::exponent_scale(e, lo, hi); }, marks, exp_label);
    ImGui::TextDisabled("bf16 limits off scale:");
    ImGui::TextDisabled("2^-133 .. 2^128");
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + h, p.y + h), IM_COL32(45, 45, 52, 255));
    ImGui::GetWindowDrawList()->AddTriangleFilled(ImVec2(p.x + h * 0.45f, p.y), ImVec2(p.x + h, p.y),
                                                  ImVec2(p.x + h, p.y + h * 0.55f), colors::kOverflow);
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("above fp16 max");
    const ImVec2 q = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddCircleFilled(ImVec2(q.x + h / 2, q.y + h / 2), 3.0f, colors::kNaN);
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("NaN/Inf present");
    const ImVec2 f = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddTriangleFilled(ImVec2(f.x + h * 0.25f, f.y + h * 0.15f), ImVec2(f.x + h * 0.8f, f.y + h / 2),
                                                  ImVec2(f.x + h * 0.25f, f.y + h * 0.85f), colors::kWarningText);
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("heading for fp16 max");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("hover a marked row's name for the forecast (fpscope report --section why)");
    ImGui::EndGroup();
  }

  struct TensorPick {
    KernelRef kernel;
    int64_t tensor_id = 0;
    std::string tensor;
  };

  // The largest tensor of a cell of the current view, as the analyzer picks it.
  static std::optional<TensorPick> pick_tensor(const TraceDoc& doc, analysis::RangeView view, const std::string& row,
                                               int64_t step) {
    const auto cell = analysis::largest_tensor_of_cell(*doc.data()->trace, view, row, step);
    if (!cell) return std::nullopt;
    return TensorPick{KernelRef{doc.id(), cell->kernel_id}, cell->tensor_id, cell->tensor};
  }

  void select_cell(ViewContext& ctx, const TraceDoc& doc, const std::string& layer, int64_t step) {
    ctx.selection.step = step;
    ctx.selection.layer = layer;
    ctx.selection.kernel.reset();
    ctx.selection.tensor_id.reset();
    ctx.selection.tensor_name.reset();
    if (auto pick = pick_tensor(doc, ctx.selection.range_view, layer, step)) {
      ctx.selection.kernel = pick->kernel;
      ctx.selection.tensor_id = pick->tensor_id;
      ctx.selection.tensor_name = pick->tensor;
    }
  }

  // With nothing selected, the histogram shows the source's widest cell: its largest absmax.
  const std::optional<TensorPick>& default_pick(const TraceDoc& doc) {
    if (default_owner_ == doc.data().get()) return default_pick_;
    default_owner_ = doc.data().get();
    default_pick_.reset();
    const TraceData& d = *doc.data();
    const analysis::LayerStepCell* widest = nullptr;
    for (const auto& c : d.layer_steps) {
      if (c.absmax && (!widest || *c.absmax > *widest->absmax)) widest = &c;
    }
    if (widest) default_pick_ = pick_tensor(doc, analysis::RangeView::Activations, widest->layer, widest->step);
    return default_pick_;
  }

  std::vector<HeatGrid> grids_;
  const TraceData* default_owner_ = nullptr;
  std::optional<TensorPick> default_pick_;
  ExponentHistogramPanel histogram_;
};

}  // namespace

std::unique_ptr<View> make_ranges_view() { return std::make_unique<RangesView>(); }

}  // namespace fpscope::gui
