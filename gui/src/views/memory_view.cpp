// Memory view: live bytes by category at each run's peak, source and target side by side with the
// difference in bytes and percent (from analysis::compare), each category's own maximum, the
// moment of the peak (a link to that step), the largest allocations, and live bytes over time by
// category for each run.
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ui/plot.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

constexpr size_t kLargestShown = 5;

class MemoryView final : public View {
 public:
  const char* name() const override { return "memory"; }
  const char* title() const override { return "Memory"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    const std::vector<std::pair<const TraceDoc*, int>> runs = loaded_runs(ctx.traces);
    draw_peaks(ctx, runs);
    draw_category_table(ctx, runs);
    draw_largest(runs);
    draw_over_time(ctx, runs);
  }

 private:
  void draw_peaks(ViewContext& ctx, const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    for (const auto& [doc, index] : runs) {
      const analysis::MemoryReport& m = doc->data()->memory;
      ImGui::PushID(index);
      ImGui::TextColored(colors::to_vec4(colors::run(index)), "%s", run_label(*doc, index).c_str());
      ImGui::SameLine();
      ImGui::Text("peak %s", analysis::human_bytes(m.peak_bytes).c_str());
      ImGui::SameLine();
      if (m.peak_step) {
        if (link("at step " + std::to_string(*m.peak_step))) {
          ctx.selection.select_step(*m.peak_step);
          ctx.selection.jump_to_timeline();
        }
      } else {
        ImGui::TextDisabled("outside any step");
      }
      ImGui::SameLine();
      const int64_t origin = doc->data()->bounds ? doc->data()->bounds->first : 0;
      ImGui::TextDisabled("(t = %s; live at end %s; %s events)",
                          m.peak_ns ? analysis::human_duration(*m.peak_ns - origin).c_str() : "-",
                          analysis::human_bytes(m.live_at_end).c_str(), analysis::human_count(m.events).c_str());
      ImGui::PopID();
    }
  }

  // Category rows; with a pair, the comparison's numbers (so they match `fpscope compare`).
  void draw_category_table(ViewContext& ctx, const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    heading("Live bytes by category at the peak");
    const analysis::Comparison* c = runs.size() == 2 ? ctx.traces.comparison().result() : nullptr;
    if (runs.size() == 2 && !c) {
      ImGui::TextDisabled("comparing...");
      return;
    }
    // One table id per layout: a table keeps its columns' widths by id, and the one-run table
    // (shown while the second trace still loads) would leave its widths to the pair's.
    const int cols = c ? 7 : 4;
    if (!ImGui::BeginTable(c ? "categories_pair" : "categories_one", cols, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp)) return;
    ImGui::TableSetupColumn("category");
    if (c) {
      for (const char* h : {"source at peak", "target at peak", "difference", "change", "source max", "target max"}) {
        ImGui::TableSetupColumn(h);
      }
    } else {
      for (const char* h : {"at peak", "own maximum", "allocated in total"}) ImGui::TableSetupColumn(h);
    }
    ImGui::TableHeadersRow();
    if (c) {
      for (size_t i = 0; i < c->memory.size(); ++i) {
        const analysis::MemoryDelta& d = c->memory[i];
        const analysis::MemoryDelta* mx = nullptr;
        for (const auto& m : c->memory_max_live) {
          if (m.category == d.category) mx = &m;
        }
        draw_delta_row(d, mx);
      }
    } else {
      const analysis::MemoryReport& m = runs.front().first->data()->memory;
      for (const auto& cat : m.by_category) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        category_label(cat.category);
        ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(cat.at_peak));
        ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(cat.max_live));
        ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(cat.allocated));
      }
    }
    ImGui::EndTable();
  }

  static void category_label(const std::string& category) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 3), ImVec2(p.x + h - 6, p.y + h - 3),
                                              category == "peak" ? IM_COL32(230, 230, 230, 255) : colors::category(category));
    ImGui::Dummy(ImVec2(h - 4, h));
    ImGui::SameLine();
    ImGui::TextUnformatted(category == "peak" ? "total (peak)" : category.c_str());
  }

  static void right_aligned(const std::string& text, ImU32 color = 0) {
    const float w = ImGui::CalcTextSize(text.c_str()).x;
    ImGui::SetCursorPosX(ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x - w);
    if (color) {
      ImGui::TextColored(colors::to_vec4(color), "%s", text.c_str());
    } else {
      ImGui::TextUnformatted(text.c_str());
    }
  }

  static void draw_delta_row(const analysis::MemoryDelta& d, const analysis::MemoryDelta* max_live) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    category_label(d.category);
    ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(d.a));
    ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(d.b));
    const int64_t diff = d.b - d.a;
    const ImU32 col = diff < 0 ? colors::kOkText : diff > 0 ? colors::kWarningText : colors::kDimText;
    ImGui::TableNextColumn(); right_aligned(analysis::human_bytes_delta(diff), col);
    ImGui::TableNextColumn();
    right_aligned(d.reduction_pct ? analysis::change_text(d) : std::string("-"), col);
    ImGui::TableNextColumn(); right_aligned(max_live ? analysis::human_bytes(max_live->a) : "");
    ImGui::TableNextColumn(); right_aligned(max_live ? analysis::human_bytes(max_live->b) : "");
  }

  void draw_largest(const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    heading("Largest allocations");
    if (!ImGui::BeginTable("largest_pair", static_cast<int>(runs.size()), ImGuiTableFlags_None)) return;
    for (const auto& [doc, index] : runs) {
      ImGui::TableNextColumn();
      ImGui::TextColored(colors::to_vec4(colors::run(index)), "%s", doc->name().c_str());
      ImGui::PushID(index);
      if (ImGui::BeginTable("largest", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
        for (const char* h : {"name", "category", "bytes", "times"}) ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
        for (size_t i = 0; i < doc->data()->memory.largest.size() && i < kLargestShown; ++i) {
          const analysis::Allocation& a = doc->data()->memory.largest[i];
          ImGui::TableNextRow();
          ImGui::TableNextColumn(); ImGui::TextUnformatted(a.name.c_str());
          ImGui::TableNextColumn(); ImGui::TextColored(colors::to_vec4(colors::category(a.category)), "%s", a.category.c_str());
          ImGui::TableNextColumn(); right_aligned(analysis::human_bytes(a.bytes));
          ImGui::TableNextColumn(); right_aligned(std::to_string(a.count));
        }
        ImGui::EndTable();
      }
      ImGui::PopID();
    }
    ImGui::EndTable();
  }

  void draw_over_time(ViewContext& ctx, const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    heading("Live bytes over time, by category");
    plot::legend_row(over_time_legend(runs));
    const float w = ImGui::GetContentRegionAvail().x / static_cast<float>(runs.size()) - 6;
    plot::Range bytes{0, 1};
    for (const auto& [doc, index] : runs) bytes.hi = std::max(bytes.hi, static_cast<double>(doc->data()->memory.peak_bytes) * 1.1);
    for (const auto& [doc, index] : runs) {
      ImGui::PushID(index);
      draw_run_over_time(ctx, *doc, index, bytes, w);
      ImGui::PopID();
      ImGui::SameLine();
    }
    ImGui::NewLine();
  }

  // The plots' one legend, above them (inside, it would cover the data, which fills every corner):
  // the total and each category that holds bytes at some moment of a run read whole.
  static std::vector<plot::LegendItem> over_time_legend(const std::vector<std::pair<const TraceDoc*, int>>& runs) {
    std::array<bool, analysis::kCategoryCount> used{};
    for (const auto& [doc, index] : runs) {
      const TraceData* d = loaded(doc);
      if (!d || !d->complete) continue;
      for (const auto& pt : d->memory_over_time)
        for (size_t c = 0; c < used.size(); ++c) used[c] = used[c] || pt.by_category[c] != 0;
    }
    std::vector<plot::LegendItem> legend{{"total", colors::kTotal}};
    for (size_t c = 0; c < used.size(); ++c)
      if (used[c]) legend.push_back({analysis::kCategoryNames[c], colors::category(analysis::kCategoryNames[c])});
    return legend;
  }

  void draw_run_over_time(ViewContext& ctx, const TraceDoc& doc, int index, plot::Range bytes, float width) {
    ImGui::BeginGroup();
    if (!draw_still_reading(doc, "memory over time")) draw_run_plot(ctx, doc, index, bytes, width);
    ImGui::EndGroup();
  }

  void draw_run_plot(ViewContext& ctx, const TraceDoc& doc, int index, plot::Range bytes, float width) {
    const TraceData& d = *doc.data();
    const int64_t origin = d.bounds ? d.bounds->first : 0;
    std::vector<double> t, total;
    std::array<std::vector<double>, analysis::kCategoryCount> by_cat;
    plot::Range tr = plot::Range::empty();
    for (const auto& p : d.memory_over_time) {
      t.push_back(static_cast<double>(p.t_ns - origin) / 1e9);
      total.push_back(static_cast<double>(p.total));
      for (size_t c = 0; c < by_cat.size(); ++c) by_cat[c].push_back(static_cast<double>(p.by_category[c]));
      tr.include(t.back());
    }
    plot::Plot p("over_time", ImVec2(width, 0),
                 plot::Axis{doc.name() + ": seconds from start", tr.padded(0.01), plot::Scale::kLinear, {}},
                 plot::Axis{"live bytes", bytes, plot::Scale::kLinear,
                            [](double v) { return analysis::human_bytes(static_cast<int64_t>(v)); }, true});
    for (size_t c = 0; c < by_cat.size(); ++c) {
      if (std::all_of(by_cat[c].begin(), by_cat[c].end(), [](double v) { return v == 0; })) continue;
      p.stairs(t, by_cat[c], colors::category(analysis::kCategoryNames[c]), 1.5f);
    }
    p.stairs(t, total, colors::kTotal, 2.0f);
    if (d.memory.peak_ns) {
      p.vline(static_cast<double>(*d.memory.peak_ns - origin) / 1e9, colors::kWarningText, "peak", 1.0f);
    }
    p.hover_readout([&](double x) {
      auto it = std::upper_bound(t.begin(), t.end(), x);
      if (it == t.begin()) return;
      const size_t i = static_cast<size_t>(it - t.begin()) - 1;
      const auto& pt = d.memory_over_time[i];
      ImGui::Text("t = %.4f s, step %s: %s live", t[i], pt.step ? std::to_string(*pt.step).c_str() : "-",
                  analysis::human_bytes(pt.total).c_str());
      for (size_t c = 0; c < by_cat.size(); ++c) {
        if (pt.by_category[c]) ImGui::TextColored(colors::to_vec4(colors::category(analysis::kCategoryNames[c])), "  %-16s %s",
                                                  analysis::kCategoryNames[c], analysis::human_bytes(pt.by_category[c]).c_str());
      }
    });
    if (p.clicked()) {
      auto it = std::upper_bound(t.begin(), t.end(), p.x_at(p.mouse().x));
      if (it != t.begin()) {
        const auto& pt = d.memory_over_time[static_cast<size_t>(it - t.begin()) - 1];
        if (pt.step) ctx.selection.select_step(*pt.step);
      }
    }
  }
};

}  // namespace

std::unique_ptr<View> make_memory_view() { return std::make_unique<MemoryView>(); }

}  // namespace fpscope::gui
