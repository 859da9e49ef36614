// Events view: one sortable, filterable table of the open pair's events. It opens on what matters:
// every non-finite output (the origins say so), loss-scale event (backoff, growth, skipped step),
// the trap and the forecasts (ranges heading for fp16's edge, update/weight ratios falling toward
// their spacing). The fp16/bf16 what-ifs (an output a cast would overflow or flush to zero) are behind their
// two filters, and grouped: one row per run, kind and tensor name, with how many launches and the
// steps they span, since a run makes the same what-if at every step. Only the visible rows are
// drawn (ImGuiListClipper). A click selects the (first) event's kernel and step; a double click also
// shows it in the timeline.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "fpscope/units.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

constexpr int kKinds = analysis::kEventKindCount;

ImU32 kind_color(analysis::EventKind kind) {
  switch (kind) {
    case analysis::EventKind::NaN:
    case analysis::EventKind::Inf: return colors::kNaN;
    case analysis::EventKind::Overflow: return colors::kOverflow;
    case analysis::EventKind::Underflow: return colors::kUnderflow;
    case analysis::EventKind::ScaleBackoff: return colors::kScaleBackoff;
    case analysis::EventKind::ScaleGrowth: return colors::kScaleGrowth;
    case analysis::EventKind::SkippedStep: return colors::kSkipped;
    case analysis::EventKind::Trap: return colors::kErrorText;
    case analysis::EventKind::Forecast: return colors::kWarningText;
  }
  return colors::kDimText;
}

// Loss-scale events carry the scale after them where the others carry a count of values.
bool is_scale_event(analysis::EventKind kind) {
  return kind == analysis::EventKind::ScaleBackoff || kind == analysis::EventKind::ScaleGrowth ||
         kind == analysis::EventKind::SkippedStep;
}

enum Column { kRun, kTime, kStep, kKind, kKernel, kLayer, kAmount, kDetail, kTensor, kColumns };

class EventsView final : public View {
 public:
  const char* name() const override { return "events"; }
  const char* title() const override { return "Events"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    collect_sources(ctx);
    draw_filters();
    if (rows_dirty_) rebuild_rows();
    draw_table(ctx);
  }

 private:
  struct Source {
    const TraceDoc* doc;
    const TraceData* data;
    int index;
  };
  // One event, or a group of what-ifs (group >= 0: its first event is `event`).
  struct Row {
    uint32_t source;
    uint32_t event;
    int32_t group = -1;
  };
  struct Group {
    uint32_t events = 0;
    std::optional<int64_t> first_step, last_step;
    double largest = 0;  // the most values one launch involved
  };
  static bool what_if(analysis::EventKind kind) {
    return kind == analysis::EventKind::Overflow || kind == analysis::EventKind::Underflow;
  }

  void collect_sources(ViewContext& ctx) {
    std::vector<Source> now;
    for (int i = 0; i < 2 && i < static_cast<int>(ctx.traces.docs().size()); ++i) {
      const TraceDoc* doc = ctx.traces.docs()[static_cast<size_t>(i)].get();
      const TraceData* d = loaded(doc);
      if (d && !d->complete) ImGui::TextDisabled("%s: reading events... %.0f%%", doc->name().c_str(), 100.0 * doc->progress());
      if (d && d->complete) now.push_back({doc, d, i});
    }
    const bool same = now.size() == sources_.size() &&
                      std::equal(now.begin(), now.end(), sources_.begin(),
                                 [](const Source& a, const Source& b) { return a.data == b.data && a.index == b.index; });
    if (!same) {
      sources_ = std::move(now);
      rows_dirty_ = true;
    }
  }

  void draw_filters() {
    static constexpr std::array<analysis::EventKind, kKinds> kinds = {
        analysis::EventKind::NaN,      analysis::EventKind::Inf,     analysis::EventKind::Overflow, analysis::EventKind::Underflow,
        analysis::EventKind::ScaleBackoff,  analysis::EventKind::ScaleGrowth,  analysis::EventKind::SkippedStep,
        analysis::EventKind::Trap, analysis::EventKind::Forecast};
    for (size_t i = 0; i < kinds.size(); ++i) {
      ImGui::PushStyleColor(ImGuiCol_Text, colors::to_vec4(kind_color(kinds[i])));
      rows_dirty_ |= ImGui::Checkbox(analysis::event_kind_name(kinds[i]), &show_kind_[i]);
      ImGui::PopStyleColor();
      if (what_if(kinds[i]) && ImGui::IsItemHovered())
        ImGui::SetTooltip("What a cast of an output to fp16 or bf16 would %s: one row per tensor, with the launches "
                          "and steps", kinds[i] == analysis::EventKind::Overflow ? "overflow" : "flush to zero");
      ImGui::SameLine();
    }
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
    if (filter_.Draw("filter", ImGui::GetFontSize() * 12)) rows_dirty_ = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Matches kernel, layer, tensor or detail; e.g. conv1,-backward");
    size_t total = 0;
    bool truncated = false;
    for (const auto& s : sources_) {
      total += s.data->events.size();
      truncated |= s.data->events_truncated;
    }
    const std::string counts =
        fmt::format("{} rows of {} events{}{}", analysis::human_count(static_cast<int64_t>(rows_.size())),
                    analysis::human_count(static_cast<int64_t>(total)), groups_.empty() ? "" : " (what-ifs grouped by tensor)",
                    truncated ? " (the trace has more; the first 50,000 are listed)" : "");
    // Beside the filter when it fits, else on a line of its own.
    ImGui::SameLine();
    if (ImGui::CalcTextSize(counts.c_str()).x > ImGui::GetContentRegionAvail().x) ImGui::NewLine();
    ImGui::TextDisabled("%s", counts.c_str());
  }

  bool passes(const analysis::Event& e) const {
    if (!show_kind_[static_cast<size_t>(e.kind)]) return false;
    if (!filter_.IsActive()) return true;
    return filter_.PassFilter(e.kernel.c_str()) || filter_.PassFilter(e.layer.c_str()) ||
           filter_.PassFilter(e.tensor.c_str()) || filter_.PassFilter(e.detail.c_str());
  }

  void rebuild_rows() {
    rows_.clear();
    groups_.clear();
    for (uint32_t s = 0; s < sources_.size(); ++s) {
      const auto& events = sources_[s].data->events;
      std::map<std::pair<analysis::EventKind, std::string>, int32_t> group_of;  // this run's groups
      for (uint32_t i = 0; i < events.size(); ++i) {
        const analysis::Event& e = events[i];
        if (!passes(e)) continue;
        if (!what_if(e.kind)) {
          rows_.push_back({s, i});
          continue;
        }
        auto [it, fresh] = group_of.try_emplace({e.kind, e.tensor}, static_cast<int32_t>(groups_.size()));
        if (fresh) {
          groups_.emplace_back();
          rows_.push_back({s, i, it->second});
        }
        Group& g = groups_[static_cast<size_t>(it->second)];
        ++g.events;
        if (e.step && (!g.first_step || *e.step < *g.first_step)) g.first_step = e.step;
        if (e.step && (!g.last_step || *e.step > *g.last_step)) g.last_step = e.step;
        g.largest = std::max(g.largest, e.amount);
      }
    }
    rows_dirty_ = false;
    sort_dirty_ = true;
  }

  const analysis::Event& event(const Row& r) const { return sources_[r.source].data->events[r.event]; }
  double amount(const Row& r) const { return r.group >= 0 ? groups_[static_cast<size_t>(r.group)].largest : event(r).amount; }
  int64_t rel_time(const Row& r) const {
    const TraceData& d = *sources_[r.source].data;
    return event(r).t_ns - (d.bounds ? d.bounds->first : 0);
  }

  void sort_rows(const ImGuiTableSortSpecs* specs) {
    if (!specs || specs->SpecsCount == 0) return;
    const ImGuiTableColumnSortSpecs& s = specs->Specs[0];
    const bool asc = s.SortDirection == ImGuiSortDirection_Ascending;
    auto key_less = [&](const Row& a, const Row& b) {
      const analysis::Event& x = event(a);
      const analysis::Event& y = event(b);
      switch (s.ColumnUserID) {
        case kRun: return a.source < b.source;
        case kStep: return x.step.value_or(-1) < y.step.value_or(-1);
        case kKind: return x.kind < y.kind;
        case kKernel: return x.kernel < y.kernel;
        case kLayer: return x.layer < y.layer;
        case kTensor: return x.tensor < y.tensor;
        case kAmount: return amount(a) < amount(b);
        default: return rel_time(a) < rel_time(b);
      }
    };
    std::stable_sort(rows_.begin(), rows_.end(), [&](const Row& a, const Row& b) {
      return asc ? key_less(a, b) : key_less(b, a);
    });
  }

  void draw_table(ViewContext& ctx) {
    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                  ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("events", kColumns, flags)) return;
    const float em = ImGui::GetFontSize();
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("run", 0, em * 4, kRun);
    ImGui::TableSetupColumn("time", ImGuiTableColumnFlags_DefaultSort, em * 4.5f, kTime);
    ImGui::TableSetupColumn("step", 0, em * 3.5f, kStep);
    ImGui::TableSetupColumn("kind", 0, em * 7, kKind);
    ImGui::TableSetupColumn("kernel", 0, em * 11, kKernel);
    ImGui::TableSetupColumn("layer", 0, em * 5.5f, kLayer);
    ImGui::TableSetupColumn("values", 0, em * 4.5f, kAmount);
    // The detail is the long text: it takes the width the fixed columns leave.
    ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_NoSort | ImGuiTableColumnFlags_WidthStretch, 0, kDetail);
    ImGui::TableSetupColumn("tensor", 0, em * 9, kTensor);
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && (specs->SpecsDirty || sort_dirty_)) {
      sort_rows(specs);
      specs->SpecsDirty = false;
      sort_dirty_ = false;
    }
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(rows_.size()));
    while (clipper.Step()) {
      for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) draw_row(ctx, rows_[static_cast<size_t>(r)], r);
    }
    ImGui::EndTable();
  }

  void draw_row(ViewContext& ctx, const Row& row, int r) {
    const analysis::Event& e = event(row);
    const Source& src = sources_[row.source];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::PushID(r);
    const bool selected = ctx.selection.kernel && ctx.selection.kernel->trace_id == src.doc->id() &&
                          ctx.selection.kernel->kernel_id == e.kernel_id;
    ImGui::PushStyleColor(ImGuiCol_Text, colors::to_vec4(colors::run(src.index)));
    if (ImGui::Selectable(src.index == 0 ? "source" : "target", selected,
                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
      ctx.selection.select_kernel(src.doc->id(), e.kernel_id, e.step,
                                  e.layer.empty() ? std::nullopt : std::optional<std::string>(e.layer));
      if (e.tensor_id) {
        ctx.selection.tensor_id = e.tensor_id;
        ctx.selection.tensor_name = e.tensor;
      }
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) ctx.selection.jump_to_timeline();
    }
    ImGui::PopStyleColor();
    ImGui::PopID();
    ImGui::TableNextColumn(); ImGui::TextUnformatted(analysis::human_duration(rel_time(row)).c_str());
    ImGui::TableNextColumn();
    const Group* g = row.group >= 0 ? &groups_[static_cast<size_t>(row.group)] : nullptr;
    if (g && g->first_step && g->last_step && *g->first_step != *g->last_step)
      ImGui::Text("%lld-%lld", static_cast<long long>(*g->first_step), static_cast<long long>(*g->last_step));
    else if (e.step) ImGui::Text("%lld", static_cast<long long>(*e.step));
    else ImGui::TextDisabled("-");
    ImGui::TableNextColumn();
    // An origin is where a NaN/Inf began: said in its kind, the rest passed it on.
    ImGui::TextColored(colors::to_vec4(kind_color(e.kind)), "%s%s", analysis::event_kind_name(e.kind),
                       e.origin ? " origin" : "");
    ImGui::TableNextColumn(); ImGui::TextUnformatted(e.kernel.c_str());
    ImGui::TableNextColumn(); ImGui::TextUnformatted(e.layer.c_str());
    ImGui::TableNextColumn();
    const double value = amount(row);
    const bool whole = value == std::floor(value) && std::fabs(value) < 1e15;
    if (e.kind == analysis::EventKind::Trap || e.kind == analysis::EventKind::Forecast)
      ImGui::TextDisabled("-");  // no values: where it stopped, or what is to come (said in the detail)
    else if (is_scale_event(e.kind))
      ImGui::Text("scale %s", analysis::human_scale(value).c_str());  // the scale after, not a count
    else ImGui::TextUnformatted((whole ? analysis::human_count(static_cast<int64_t>(value)) : analysis::human_number(value)).c_str());
    ImGui::TableNextColumn();
    const std::string detail =
        g && g->events > 1 ? fmt::format("{} launches (the largest count in values); the first: {}",
                                         analysis::human_count(g->events), e.detail)
                           : e.detail;
    ImGui::TextUnformatted(detail.c_str());
    // A detail wider than its column is shown whole on hover.
    if (ImGui::IsItemHovered() && ImGui::CalcTextSize(detail.c_str()).x > ImGui::GetColumnWidth())
      ImGui::SetTooltip("%s", detail.c_str());
    ImGui::TableNextColumn(); ImGui::TextUnformatted(e.tensor.c_str());
  }

  std::vector<Source> sources_;
  std::vector<Row> rows_;
  std::vector<Group> groups_;
  // By EventKind: the what-ifs (overflow, underflow) start hidden.
  std::array<bool, kKinds> show_kind_{true, true, false, false, true, true, true, true, true};
  ImGuiTextFilter filter_;
  bool rows_dirty_ = true;
  bool sort_dirty_ = true;
};

}  // namespace

std::unique_ptr<View> make_events_view() { return std::make_unique<EventsView>(); }

}  // namespace fpscope::gui
