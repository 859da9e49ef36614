// Updates view: the update-to-weight ratio of every parameter at every step the trace measured (rows:
// parameters; columns: steps), coloured by log10 of the rms of the applied change over the rms of the
// weight, with the weight formats' relative spacing on the colour scale: below it an update is
// rounded away unless fp32 master weights or stochastic rounding keep it. Cells where rounding lost
// a tenth or more of the nonzero updates carry a mark, and a triangle ends the row of a parameter whose
// ratio is forecast to reach its spacing. Two runs side by side share one scale (fp32
// masters against none, say). Below, the learning report's findings (fpscope report --section
// learning) for the run picked.
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ui/plot.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

const double kBf16Spacing = std::log10(std::ldexp(1.0, -8));   // bf16's relative spacing at 1
const double kF16Spacing = std::log10(std::ldexp(1.0, -11));   // fp16's
constexpr ImU32 kNoData = IM_COL32(45, 45, 52, 255);

struct RatioGrid {
  const TraceData* owner = nullptr;
  std::vector<std::string> params;           // flagged first, as the report ranks them
  std::vector<int64_t> steps;                // distinct, ascending
  std::vector<std::optional<double>> ratio;  // [param * steps + step]; 0 when nothing moved
  std::vector<std::optional<double>> lost;   // lost share of the nonzero updates
  std::vector<std::optional<double>> computed;
  double lo = -6, hi = 0;                    // log10 range of the data

  // `rows`: the parameters in the order every map of the view shows them.
  void build(const TraceData& d, const std::vector<std::string>& rows) {
    owner = &d;
    params = rows;
    steps.clear();
    for (const analysis::UpdatePoint& p : d.learning.points) steps.push_back(p.step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    ratio.assign(params.size() * steps.size(), std::nullopt);
    lost = computed = ratio;
    plot::Range r = plot::Range::empty();
    for (const analysis::UpdatePoint& p : d.learning.points) {
      const auto row = std::find(params.begin(), params.end(), p.param);
      if (row == params.end()) continue;
      const size_t at = static_cast<size_t>(row - params.begin()) * steps.size() +
                        static_cast<size_t>(std::lower_bound(steps.begin(), steps.end(), p.step) - steps.begin());
      ratio[at] = p.update_ratio;
      lost[at] = p.lost_update_share;
      computed[at] = p.computed_ratio;
      if (p.update_ratio && *p.update_ratio > 0) r.include(std::log10(*p.update_ratio));
      if (p.computed_ratio && *p.computed_ratio > 0) r.include(std::log10(*p.computed_ratio));
    }
    lo = std::floor(std::min(r.is_empty() ? -6.0 : r.lo, kF16Spacing - 0.5));
    hi = std::ceil(std::max(r.is_empty() ? 0.0 : r.hi, kBf16Spacing + 0.5));
  }
};

// A colour-scale tick at log10 value v: "1e-3" on a decade, the value itself ("0.0032") between.
std::string log10_label(double v) {
  char buf[24];
  if (std::fabs(v - std::round(v)) < 1e-9) std::snprintf(buf, sizeof buf, "1e%d", static_cast<int>(std::lround(v)));
  else std::snprintf(buf, sizeof buf, "%.2g", std::pow(10.0, v));
  return buf;
}

class UpdatesView final : public View {
 public:
  const char* name() const override { return "updates"; }
  const char* title() const override { return "Updates"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    const std::vector<std::pair<const TraceDoc*, int>> runs = loaded_runs(ctx.traces);
    if (runs.empty()) return;
    bool any = false;
    for (const auto& [doc, i] : runs) any = any || doc->data()->learning.measured_updates;
    if (!any) {
      ImGui::TextWrapped("%s", analysis::no_updates_text(runs.front().first->data()->learning).c_str());
      if (runs.front().first->data()->learning.measured_stores) draw_findings(*runs.front().first->data());
      return;
    }
    ImGui::PushStyleColor(ImGuiCol_Text, colors::to_vec4(colors::kDimText));
    ImGui::TextWrapped(
        "Each cell: the rms of the change a step applied to a parameter over the rms of the parameter (log10). Below a "
        "weight format's spacing the update is rounded away unless fp32 master weights or stochastic rounding keep it. "
        "A dot: the step lost %s or more of the parameter's nonzero updates; grey: nothing moved. Hover a cell for "
        "the figures.",
        analysis::human_percent(runs.front().first->data()->learning.thresholds.lost_update_share).c_str());
    ImGui::PopStyleColor();
    const float map_h = ImGui::GetContentRegionAvail().y * 0.55f;
    const float bar_w = ImGui::GetFontSize() * 12.5f;
    const float map_w = (ImGui::GetContentRegionAvail().x - bar_w) / static_cast<float>(runs.size()) - 8;
    double lo = 0, hi = 0;
    const std::vector<std::string> rows = row_order(runs);
    for (size_t i = 0; i < runs.size(); ++i) {
      const RatioGrid& g = grid_for(i, *runs[i].first->data(), rows);
      lo = i == 0 ? g.lo : std::min(lo, g.lo);
      hi = i == 0 ? g.hi : std::max(hi, g.hi);
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      ImGui::BeginGroup();
      ImGui::PushID(static_cast<int>(i));
      draw_map(*runs[i].first, runs[i].second, grids_[i], lo, hi, ImVec2(map_w, map_h));
      ImGui::PopID();
      ImGui::EndGroup();
      ImGui::SameLine();
    }
    draw_color_scale(lo, hi, ImVec2(bar_w, map_h));
    ImGui::Spacing();
    if (runs.size() > 1) {
      ImGui::AlignTextToFramePadding();
      ImGui::TextUnformatted("findings of");
      for (const auto& [doc, i] : runs) {
        ImGui::SameLine();
        if (ImGui::RadioButton(run_label(*doc, i).c_str(), run_ == i)) run_ = i;
      }
    }
    run_ = std::min(run_, static_cast<int>(runs.size()) - 1);
    draw_findings(*runs[static_cast<size_t>(run_)].first->data());
  }

 private:
  const RatioGrid& grid_for(size_t i, const TraceData& d, const std::vector<std::string>& rows) {
    if (grids_.size() <= i) grids_.resize(i + 1);
    if (grids_[i].owner != &d || grids_[i].params != rows) grids_[i].build(d, rows);
    return grids_[i];
  }

  // One row order for every map: the first run's ranking (most updates lost first), then the
  // parameters only a later run has.
  static std::vector<std::string> row_order(const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    std::vector<std::string> rows;
    for (const auto& [doc, i] : runs)
      for (const analysis::ParamLearning& p : doc->data()->learning.params)
        if (std::find(rows.begin(), rows.end(), p.param) == rows.end()) rows.push_back(p.param);
    return rows;
  }

  static ImU32 cell_color(const std::optional<double>& ratio, double lo, double hi) {
    if (!ratio) return kNoData;
    if (*ratio <= 0) return IM_COL32(95, 95, 105, 255);  // nothing moved
    return colors::exponent_scale(std::log10(*ratio), lo, hi);
  }

  void draw_map(const TraceDoc& doc, int index, const RatioGrid& g, double lo, double hi, ImVec2 size) {
    const float line = ImGui::GetTextLineHeight();
    ImGui::TextColored(colors::to_vec4(colors::run(index)), "%s", run_label(doc, index).c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("update/weight by step");
    size.y -= line + 6;
    if (g.params.empty() || g.steps.empty()) {
      ImGui::TextDisabled("no parameter update in this trace");
      ImGui::Dummy(ImVec2(size.x, size.y - line));
      return;
    }
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("updates", size);
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float label_w = 0;
    for (const auto& p : g.params) label_w = std::max(label_w, ImGui::CalcTextSize(p.c_str()).x);
    label_w = std::min(label_w + 10, size.x * 0.35f);
    const ImVec2 a(origin.x + label_w, origin.y);
    // A line's width kept after the rows for the forecasts' triangles, where the run has any.
    const float forecast_w = doc.data()->learning.forecasts.empty() ? 0.0f : line;
    const ImVec2 b(origin.x + size.x - forecast_w, origin.y + size.y - line - 6);
    const float row_h = (b.y - a.y) / static_cast<float>(g.params.size());
    const size_t n_steps = g.steps.size();
    const size_t columns = std::min(n_steps, static_cast<size_t>(std::max(1.0f, b.x - a.x)));
    const float col_w = (b.x - a.x) / static_cast<float>(columns);
    const double mark_share = doc.data()->learning.thresholds.lost_update_share;
    for (size_t pi = 0; pi < g.params.size(); ++pi) {
      const float y0 = a.y + row_h * static_cast<float>(pi);
      dl->PushClipRect(ImVec2(origin.x, y0), ImVec2(a.x - 4, y0 + row_h), true);
      dl->AddText(ImVec2(origin.x, y0 + (row_h - line) / 2), IM_COL32(210, 210, 220, 255), g.params[pi].c_str());
      dl->PopClipRect();
      for (size_t c = 0; c < columns; ++c) {
        // With more steps than pixels, a column shows the smallest ratio of its steps (the worst).
        const size_t s0 = c * n_steps / columns, s1 = std::max(s0 + 1, (c + 1) * n_steps / columns);
        std::optional<double> v, lost;
        for (size_t s = s0; s < s1; ++s) {
          const auto& r = g.ratio[pi * n_steps + s];
          if (r && (!v || *r < *v)) v = r;
          const auto& l = g.lost[pi * n_steps + s];
          if (l && (!lost || *l > *lost)) lost = l;
        }
        const ImVec2 p0(a.x + col_w * static_cast<float>(c), y0);
        const ImVec2 p1(p0.x + col_w, y0 + row_h);
        dl->AddRectFilled(p0, ImVec2(p1.x - (col_w > 4 ? 1 : 0), p1.y - 1), cell_color(v, lo, hi));
        if (lost && *lost >= mark_share) {
          const float r = std::min(col_w, row_h) * 0.2f;
          dl->AddCircleFilled(ImVec2((p0.x + p1.x) / 2, (p0.y + p1.y) / 2), std::max(r, 2.0f), colors::kUnderflow);
        }
      }
      // A ratio forecast to reach its spacing: a triangle past the row's last step.
      if (forecast_of(*doc.data(), g.params[pi])) {
        const float h = std::min(row_h * 0.7f, line), cy = y0 + row_h / 2;
        dl->AddTriangleFilled(ImVec2(b.x + 2, cy - h / 2), ImVec2(b.x + 2, cy + h / 2), ImVec2(b.x + 2 + h * 0.7f, cy),
                              colors::kWarningText);
      }
    }
    plot::heat_map_step_axis(dl, g.steps, a.x, b.x, b.y);
    const float step_w = (b.x - a.x) / static_cast<float>(n_steps);
    const ImVec2 m = ImGui::GetIO().MousePos;
    if (!hovered || m.x < a.x || m.y < a.y || m.y >= b.y) return;
    const size_t pi = std::min(g.params.size() - 1, static_cast<size_t>((m.y - a.y) / row_h));
    if (m.x >= b.x) {  // over a forecast's triangle
      if (const analysis::UpdateForecast* f = forecast_of(*doc.data(), g.params[pi])) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36);
        ImGui::TextWrapped("%s.", f->summary.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
      }
      return;
    }
    const size_t si = std::min(n_steps - 1, static_cast<size_t>((m.x - a.x) / step_w));
    const size_t at = pi * n_steps + si;
    ImGui::BeginTooltip();
    ImGui::Text("%s, step %lld", g.params[pi].c_str(), static_cast<long long>(g.steps[si]));
    auto ratio_line = [](const char* what, const std::optional<double>& r) {
      if (!r) ImGui::TextDisabled("%s: not known", what);
      else if (*r <= 0) ImGui::Text("%s: 0 (no element moved)", what);
      else ImGui::Text("%s: %s (1e%.2f)", what, analysis::human_number(*r).c_str(), std::log10(*r));
    };
    ratio_line("applied update/weight", g.ratio[at]);
    ratio_line("computed update/weight", g.computed[at]);
    if (g.lost[at])
      ImGui::TextColored(colors::to_vec4(*g.lost[at] >= mark_share ? colors::kUnderflow : colors::kDimText),
                         "%s of the nonzero updates lost to rounding", analysis::human_percent(*g.lost[at]).c_str());
    if (const analysis::UpdateForecast* f = forecast_of(*doc.data(), g.params[pi]))
      ImGui::TextColored(colors::to_vec4(colors::kWarningText), "forecast: the %s ratio reaches 2^%d at about step %lld",
                         f->computed ? "computed" : "applied", f->spacing_log2, static_cast<long long>(f->crossing_step));
    ImGui::EndTooltip();
  }

  void draw_color_scale(double lo, double hi, ImVec2 size) {
    const std::vector<plot::ColorBarMark> marks = {
        {kBf16Spacing, "bf16 spacing", colors::kWarningText},
        {kF16Spacing, "fp16 spacing", colors::kUnderflow},
        {-3, "typical 1e-3", colors::kOkText},
    };
    ImGui::BeginGroup();
    plot::color_bar("log10 update/weight", ImVec2(size.x, size.y - ImGui::GetTextLineHeight() * 2.4f), lo, hi,
                    [&](double e) { return colors::exponent_scale(e, lo, hi); }, marks, log10_label);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + h, p.y + h), IM_COL32(95, 95, 105, 255));
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("nothing moved");
    const ImVec2 q = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddCircleFilled(ImVec2(q.x + h / 2, q.y + h / 2), 3.0f, colors::kUnderflow);
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("updates lost");
    const ImVec2 t = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddTriangleFilled(ImVec2(t.x + 2, t.y + 2), ImVec2(t.x + 2, t.y + h - 2),
                                                  ImVec2(t.x + h * 0.7f, t.y + h / 2), colors::kWarningText);
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextDisabled("heading for its spacing");
    ImGui::EndGroup();
  }

  // The report's findings for one run: flagged parameters and stores, each with its advice.
  void draw_findings(const TraceData& d) {
    const analysis::LearningReport& r = d.learning;
    heading("Findings");
    int shown = 0;
    for (const analysis::AdviceGroup& g : analysis::advice_groups(r)) {
      ImGui::Bullet();
      ImGui::TextColored(colors::to_vec4(colors::kWarningText), "updates lost");
      ImGui::SameLine();
      ImGui::TextWrapped("%s", g.sentence().c_str());
      ++shown;
    }
    for (const analysis::StoreLoss& s : r.stores) {
      if (!s.flagged) continue;
      ImGui::Bullet();
      ImGui::TextColored(colors::to_vec4(colors::kWarningText), "%s", s.tensor.c_str());
      ImGui::SameLine();
      ImGui::TextWrapped("(%s, %s): %s of its nonzero values flushed to zero at the store, %s at step %s. %s.",
                         s.layer.empty() ? "no layer" : s.layer.c_str(), s.phase.c_str(),
                         analysis::human_percent(s.flushed_share().value_or(0)).c_str(),
                         analysis::human_percent(s.worst_flushed_share).c_str(),
                         s.worst_step ? std::to_string(*s.worst_step).c_str() : "-", s.advice.c_str());
      ++shown;
    }
    if (shown == 0)
      ImGui::TextDisabled("No parameter loses its updates and no store flushes its results beyond the thresholds.");
    for (std::size_t i = 0; i < std::min(r.forecasts.size(), analysis::kForecastsShown); ++i) {
      ImGui::Bullet();
      ImGui::TextColored(colors::to_vec4(colors::kWarningText), "heading for its spacing");
      ImGui::SameLine();
      ImGui::TextWrapped("%s.", r.forecasts[i].summary.c_str());
    }
    if (r.forecasts.size() > analysis::kForecastsShown)
      ImGui::TextDisabled("... and %zu more heading for their spacing (the rows marked by a triangle)",
                          r.forecasts.size() - analysis::kForecastsShown);
    for (const std::string& advice : analysis::forecast_advice(r)) {
      ImGui::Indent();
      ImGui::TextWrapped("Advice before then: %s.", advice.c_str());
      ImGui::Unindent();
    }
  }

  // The forecast of a parameter's ratio, if the run has one.
  static const analysis::UpdateForecast* forecast_of(const TraceData& d, const std::string& param) {
    for (const analysis::UpdateForecast& f : d.learning.forecasts)
      if (f.param == param) return &f;
    return nullptr;
  }

  std::vector<RatioGrid> grids_;
  int run_ = 0;
};

}  // namespace

std::unique_ptr<View> make_updates_view() { return std::make_unique<UpdatesView>(); }

}  // namespace fpscope::gui
