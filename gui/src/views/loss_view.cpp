// Loss and loss scale view: the loss of each run over steps (two runs overlaid when comparing),
// the loss scale over steps on a log2 axis with growth and backoff marked, and skipped optimizer
// steps shaded. The step under the mouse is read out for both runs; a click selects it.
#include <imgui.h>

#include <fpscope/units.h>

#include <cmath>
#include <cstdio>

#include "ui/plot.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

struct Series {
  const TraceDoc* doc;
  const TraceData* data;
  int index;
  std::vector<double> steps, loss, scale_steps, scale;
};

class LossView final : public View {
 public:
  const char* name() const override { return "loss"; }
  const char* title() const override { return "Loss and loss scale"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    build_series(ctx);
    plot::Range steps = plot::Range::empty(), loss = plot::Range::empty(), scale = plot::Range::empty();
    for (const auto& s : series_) {
      for (double x : s.steps) steps.include(x);
      for (double y : s.loss) loss.include(y);
      for (double y : s.scale) scale.include(y);
    }
    draw_header(ctx);
    const bool any_scale = !scale.is_empty();
    const float avail = ImGui::GetContentRegionAvail().y;
    const float loss_h = any_scale ? avail * 0.55f : avail;
    draw_loss_plot(ctx, steps.padded(0.01), loss.padded(0.06), loss_h);
    if (any_scale) {
      const plot::Range scale_range{std::exp2(std::floor(std::log2(scale.lo)) - 1), std::exp2(std::ceil(std::log2(scale.hi)) + 1)};
      draw_scale_plot(ctx, steps.padded(0.01), scale_range, 0);
    } else {
      ImGui::TextDisabled("No loss scaling in these runs (no amp_update_scale launches).");
    }
  }

 private:
  void build_series(ViewContext& ctx) {
    series_.clear();
    for (int i = 0; i < 2 && i < static_cast<int>(ctx.traces.docs().size()); ++i) {
      const TraceDoc* doc = ctx.traces.docs()[static_cast<size_t>(i)].get();
      const TraceData* d = loaded(doc);
      if (!d || draw_still_reading(*doc, "the steps")) continue;
      Series s{doc, d, i, {}, {}, {}, {}};
      for (const auto& row : d->steps) {
        s.steps.push_back(static_cast<double>(row.step));
        s.loss.push_back(row.loss ? *row.loss : NAN);  // NaN breaks the line: no loss logged
        if (row.loss_scale) {
          s.scale_steps.push_back(static_cast<double>(row.step));
          s.scale.push_back(*row.loss_scale);
        }
      }
      series_.push_back(std::move(s));
    }
  }

  void draw_header(ViewContext& ctx) {
    for (const auto& s : series_) {
      const auto& ls = s.data->loss_scale;
      ImGui::TextColored(colors::to_vec4(colors::run(s.index)), "%s", run_label(*s.doc, s.index).c_str());
      ImGui::SameLine();
      if (ls.used) {
        ImGui::Text(": %lld skipped steps, %lld backoffs, %lld growths, scale %s .. %s", static_cast<long long>(ls.skipped_steps),
                    static_cast<long long>(ls.backoffs), static_cast<long long>(ls.growths),
                    analysis::human_optional(ls.min_scale).c_str(), analysis::human_optional(ls.max_scale).c_str());
      } else {
        ImGui::TextDisabled(": no loss scaling");
      }
    }
    if (const analysis::Comparison* c = ctx.traces.comparison().result(); c && c->first_divergent_step) {
      if (c->diverged_to_nonfinite) {
        ImGui::TextColored(colors::to_vec4(colors::kWarningText), "one run's loss is NaN/Inf from step %lld",
                           static_cast<long long>(*c->first_divergent_step));
      } else {
        ImGui::TextColored(colors::to_vec4(colors::kWarningText), "loss differs by more than %.0f%% from step %lld on",
                           c->loss_tolerance * 100, static_cast<long long>(*c->first_divergent_step));
      }
    }
  }

  void mark_common(plot::Plot& p, ViewContext& ctx) {
    for (const auto& s : series_) {
      for (int64_t step : s.data->loss_scale.skipped_step_numbers) {
        p.vband(static_cast<double>(step) - 0.5, static_cast<double>(step) + 0.5, IM_COL32(250, 190, 40, 45));
      }
    }
    if (const analysis::Comparison* c = ctx.traces.comparison().result(); c && c->first_divergent_step) {
      p.vline(static_cast<double>(*c->first_divergent_step), colors::kWarningText, "diverges", 1.5f);
    }
    if (ctx.selection.step) p.vline(static_cast<double>(*ctx.selection.step), colors::kSelection, nullptr, 1.5f);
    if (p.clicked()) ctx.selection.select_step(std::llround(p.x_at(p.mouse().x)));
  }

  void readout(double x) {
    const int64_t step = std::llround(x);
    ImGui::Text("step %lld", static_cast<long long>(step));
    for (const auto& s : series_) {
      const analysis::StepRow* row = s.data->step_row(step);
      ImGui::TextColored(colors::to_vec4(colors::run(s.index)), "%s", s.doc->name().c_str());
      if (!row) {
        ImGui::SameLine();
        ImGui::TextDisabled("no such step");
        continue;
      }
      ImGui::SameLine();
      ImGui::Text("loss %s  scale %s%s", analysis::human_optional(row->loss).c_str(),
                  analysis::human_optional(row->loss_scale).c_str(), row->skipped ? "  (step skipped)" : "");
    }
  }

  // The runs drawn (with `scaled_only`, those with a loss scale: a run without one has no line in
  // the scale plot), and the skipped steps' band.
  std::vector<plot::LegendItem> legend(bool with_skipped, bool scaled_only = false) const {
    std::vector<plot::LegendItem> items;
    for (const auto& s : series_) {
      if (scaled_only && s.scale.empty()) continue;
      items.push_back({run_label(*s.doc, s.index), colors::run(s.index)});
    }
    if (with_skipped) items.push_back({"skipped step", IM_COL32(250, 190, 40, 140), true});
    return items;
  }

  void draw_loss_plot(ViewContext& ctx, plot::Range steps, plot::Range loss, float height) {
    plot::Plot p("loss", ImVec2(-1, height - ImGui::GetStyle().ItemSpacing.y),
                 plot::Axis{"step", steps, plot::Scale::kLinear, {}}, plot::Axis{"loss", loss, plot::Scale::kLinear, {}});
    mark_common(p, ctx);
    for (const auto& s : series_) {
      // The source is drawn wider underneath, so identical curves still show both colours.
      p.line(s.steps, s.loss, colors::run(s.index), s.index == 0 ? 4.0f : 1.8f);
      if (s.steps.size() < 200) p.markers(s.steps, s.loss, colors::run(s.index), 2.5f);
    }
    bool any_skipped = false;
    for (const auto& s : series_) any_skipped |= s.data->loss_scale.skipped_steps > 0;
    p.legend(legend(any_skipped));
    p.hover_readout([&](double x) { readout(x); });
  }

  void draw_scale_plot(ViewContext& ctx, plot::Range steps, plot::Range scale, float height) {
    plot::Plot p("scale", ImVec2(-1, height), plot::Axis{"step", steps, plot::Scale::kLinear, {}},
                 plot::Axis{"loss scale", scale, plot::Scale::kLog2, {}});
    mark_common(p, ctx);
    for (const auto& s : series_) {
      p.stairs(s.scale_steps, s.scale, colors::run(s.index), s.index == 0 ? 4.0f : 2.0f);
      for (const auto& e : s.data->loss_scale.events) {
        if (!e.step || e.event == "unchanged") continue;
        const bool backoff = e.event == "backoff";
        // The update runs at the end of its step; the new scale holds from the next one.
        const float x = p.px(static_cast<double>(*e.step) + 0.5), y = p.py(e.scale_after);
        const float r = 5;
        const ImU32 c = backoff ? colors::kScaleBackoff : colors::kScaleGrowth;
        if (backoff) {
          p.draw_list()->AddTriangleFilled(ImVec2(x - r, y - r), ImVec2(x + r, y - r), ImVec2(x, y + r), c);
        } else {
          p.draw_list()->AddTriangleFilled(ImVec2(x - r, y + r), ImVec2(x + r, y + r), ImVec2(x, y - r), c);
        }
      }
    }
    auto items = legend(false, true);
    items.push_back({"scale backoff", colors::kScaleBackoff, true});
    items.push_back({"scale growth", colors::kScaleGrowth, true});
    p.legend(items);
    p.hover_readout([&](double x) { readout(x); });
  }

  std::vector<Series> series_;
};

}  // namespace

std::unique_ptr<View> make_loss_view() { return std::make_unique<LossView>(); }

}  // namespace fpscope::gui
