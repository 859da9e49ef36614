// Timeline view: steps, phases and layers (NVTX ranges) and kernel launches of each loaded trace
// on a shared time axis (each trace from its own start), zoomed with the mouse wheel and panned by
// dragging. Only what is visible is drawn: each lane is searched by time and drawn at the level of
// detail that puts about one block in a pixel. NaN/Inf outputs and loss-scale events are marked in
// an event lane; hovering a kernel shows its tensors' statistics; clicking selects it.
//
// [SECTION] View state and navigation
// [SECTION] Drawing lanes
// [SECTION] Hover and selection
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "ui/plot.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

constexpr double kMinSpanNs = 200;

std::string time_tick_label(double t, double step) {
  char buf[48];
  if (step < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", t);
  } else if (step < 1e6) {
    std::snprintf(buf, sizeof buf, "%.*f us", step < 1e4 ? 1 : 0, t / 1e3);
  } else if (step < 1e9) {
    std::snprintf(buf, sizeof buf, "%.*f ms", step < 1e7 ? 1 : 0, t / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f s", step < 1e10 ? 1 : 0, t / 1e9);
  }
  return buf;
}

struct Hover {
  const TraceDoc* doc = nullptr;
  const TimeLane* lane = nullptr;
  const TimeBlock* block = nullptr;
  const analysis::Event* event = nullptr;
};

class TimelineView final : public View {
 public:
  const char* name() const override { return "timeline"; }
  const char* title() const override { return "Timeline"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    collect_runs(ctx);
    if (runs_.empty()) return;
    draw_toolbar(ctx);
    if (ctx.selection.focus_timeline) {
      focus_selection(ctx.selection);
      ctx.selection.focus_timeline = false;
    }
    if (ctx.scripted_pan != 0) scripted_pan(ctx.scripted_pan);
    ImGui::BeginChild("timeline_canvas", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollWithMouse);
    draw_canvas(ctx);
    ImGui::EndChild();
  }

 private:
  struct Run {
    const TraceDoc* doc;
    const TraceData* data;
    int64_t origin;  // the trace's first timestamp: time 0 on the axis
    int index;
  };

  // [SECTION] View state and navigation ----------------------------------------------------------

  void collect_runs(ViewContext& ctx) {
    runs_.clear();
    total_ = 0;
    int index = 0;
    for (const auto& doc : ctx.traces.docs()) {
      const TraceData* d = loaded(doc.get());
      if (d && !d->complete) {
        ImGui::Text("%s: indexing the timeline... %.0f%%", doc->name().c_str(), 100.0 * doc->progress());
      }
      if (d && d->bounds && d->complete) {
        runs_.push_back(Run{doc.get(), d, d->bounds->first, index});
        total_ = std::max(total_, static_cast<double>(d->bounds->second - d->bounds->first));
      }
      ++index;
      if (index >= 2) break;  // the comparison pair
    }
    total_ = std::max(total_, 1000.0);
    align_at_step(ctx.selection);
    if (runs_.empty()) return;  // the first fit waits for an indexed run
    // A run indexed after the fit (the second trace loads later, and may be the longer) is fitted
    // in as well, until the user zooms, pans or goes somewhere.
    if (!navigated_ && runs_.size() > fitted_runs_) fit_pending_ = true;
    if (!(v1_ > v0_) || fit_pending_) {
      v0_ = -0.01 * total_;
      v1_ = total_ * 1.01;
      fit_pending_ = false;
      fitted_runs_ = runs_.size();
    }
  }

  // Shifts the second run so that the selected step starts at the same place in both: the two
  // runs' steps then line up however long their earlier steps took.
  void align_at_step(const Selection& sel) {
    if (!align_ || !sel.step || runs_.size() < 2) return;
    const analysis::StepRow* a = runs_[0].data->step_row(*sel.step);
    const analysis::StepRow* b = runs_[1].data->step_row(*sel.step);
    if (!a || !b || !a->start_ns || !b->start_ns) return;
    runs_[1].origin = *b->start_ns - (*a->start_ns - runs_[0].origin);
  }

  void draw_toolbar(ViewContext& ctx) {
    if (ImGui::Button("Fit")) {
      fit_pending_ = true;
      navigated_ = false;
    }
    ImGui::SameLine();
    ImGui::Checkbox("align runs at the selected step", &align_);
    ImGui::SameLine();
    if (ImGui::Button("Go to selection")) focus_selection(ctx.selection);
    const float legend_w = ImGui::GetFontSize() * 26.5f;
    ImGui::SameLine(std::max(ImGui::GetCursorPosX() + 20, ImGui::GetWindowContentRegionMax().x - legend_w));
    legend_chip(colors::kNaN, "NaN/Inf");
    legend_chip(colors::kScaleBackoff, "scale backoff", true, true);
    legend_chip(colors::kScaleGrowth, "scale growth", true, true);
    legend_chip(colors::kSkipped, "skipped", false);
    ImGui::PushTextWrapPos(0.0f);  // a narrow window wraps the hint instead of cutting it off
    ImGui::TextDisabled("wheel: zoom   drag: pan   click: select   hover: a kernel's tensor statistics   grey: too close together to draw apart   window %s, run %s",
                        analysis::human_duration(static_cast<int64_t>(std::llround(v1_ - v0_))).c_str(), analysis::human_duration(static_cast<int64_t>(std::llround(total_))).c_str());
    ImGui::PopTextWrapPos();
  }

  static void legend_chip(ImU32 color, const char* label, bool same_line = true, bool down = false) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    if (down) {
      ImGui::GetWindowDrawList()->AddTriangleFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + h * 0.8f, p.y + 2),
                                                    ImVec2(p.x + h * 0.4f, p.y + h), color);
    } else {
      ImGui::GetWindowDrawList()->AddTriangleFilled(ImVec2(p.x, p.y + h), ImVec2(p.x + h * 0.8f, p.y + h),
                                                    ImVec2(p.x + h * 0.4f, p.y + 2), color);
    }
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine(0, 4);
    ImGui::TextUnformatted(label);
    if (same_line) ImGui::SameLine(0, 14);
  }

  void zoom_around(double t, double factor) {
    navigated_ = true;
    double span = std::clamp((v1_ - v0_) * factor, kMinSpanNs, total_ * 1.2);
    const double u = (t - v0_) / (v1_ - v0_);
    v0_ = t - u * span;
    v1_ = v0_ + span;
  }

  void scripted_pan(double fraction) {
    navigated_ = true;
    if (v1_ - v0_ > total_ * 0.05) {  // benchmark from a zoomed-in window, as a person would pan
      v0_ = 0;
      v1_ = total_ / 50;
    }
    const double shift = fraction * (v1_ - v0_);
    v0_ += shift;
    v1_ += shift;
  }

  void show_interval(double a, double b) {
    navigated_ = true;
    const double pad = std::max((b - a) * 0.1, kMinSpanNs / 2);
    v0_ = a - pad;
    v1_ = b + pad;
  }

  void focus_selection(const Selection& sel) {
    for (const Run& run : runs_) {
      if (sel.kernel && sel.kernel->trace_id == run.doc->id()) {
        if (auto loc = run.data->timeline.find_kernel(sel.kernel->kernel_id)) {
          const TimeSpan& s = run.data->timeline.lanes[loc->lane].spans[loc->index];
          const double mid = static_cast<double>(s.start + s.end) / 2 - static_cast<double>(run.origin);
          const double half = std::max(50.0 * static_cast<double>(s.end - s.start), 20000.0);
          show_interval(mid - half, mid + half);
          return;
        }
      }
    }
    if (!sel.step) return;
    for (const Run& run : runs_) {
      const analysis::StepRow* row = run.data->step_row(*sel.step);
      if (row && row->start_ns && row->end_ns) {
        show_interval(static_cast<double>(*row->start_ns - run.origin), static_cast<double>(*row->end_ns - run.origin));
        return;
      }
    }
  }

  // [SECTION] Drawing lanes -----------------------------------------------------------------------

  float x_of(double t) const { return left_ + static_cast<float>((t - v0_) / (v1_ - v0_)) * (right_ - left_); }
  double t_at(float x) const { return v0_ + (x - left_) / (right_ - left_) * (v1_ - v0_); }

  void draw_canvas(ViewContext& ctx) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float line = ImGui::GetTextLineHeight();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float width = ImGui::GetContentRegionAvail().x;
    bool ranked = false;  // lane labels then carry "rank N"
    for (const Run& run : runs_) ranked = ranked || run.data->timeline.several_ranks;
    label_w_ = ImGui::GetFontSize() * (ranked ? 13 : 10);
    left_ = origin.x + label_w_;
    right_ = origin.x + width - 4;
    lane_h_ = line * 1.45f;
    float total_h = line * 2;
    for (const Run& run : runs_) total_h += (line + 8) + lane_h_ * static_cast<float>(run.data->timeline.lanes.size() + 1);
    total_h = std::max(total_h, ImGui::GetContentRegionAvail().y);
    ImGui::InvisibleButton("canvas", ImVec2(width, total_h));
    const bool hovered = ImGui::IsItemHovered();
    handle_input(hovered);

    dl->PushClipRect(origin, ImVec2(origin.x + width, origin.y + total_h), true);
    draw_ruler(dl, origin.y, total_h);
    float y = origin.y + line * 1.6f;
    Hover hover;
    for (const Run& run : runs_) y = draw_run(ctx, dl, run, y, hover);
    dl->PopClipRect();
    if (hovered && !ImGui::IsMouseDragging(ImGuiMouseButton_Left)) handle_hover(ctx, hover);
  }

  void handle_input(bool hovered) {
    const ImGuiIO& io = ImGui::GetIO();
    if (hovered && io.MouseWheel != 0 && io.MousePos.x >= left_) {
      zoom_around(t_at(io.MousePos.x), std::pow(0.8, io.MouseWheel));
    }
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
      const double shift = -io.MouseDelta.x / (right_ - left_) * (v1_ - v0_);
      v0_ += shift;
      v1_ += shift;
      dragged_ = true;
      navigated_ = true;
    }
    if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && !ImGui::IsItemHovered()) dragged_ = false;
  }

  void draw_ruler(ImDrawList* dl, float top, float height) {
    const float line = ImGui::GetTextLineHeight();
    double step = 1;
    const auto ticks = plot::nice_ticks(v0_, v1_, std::max(2, static_cast<int>((right_ - left_) / 120)), &step);
    dl->AddRectFilled(ImVec2(left_, top), ImVec2(right_, top + line * 1.4f), IM_COL32(30, 32, 40, 255));
    for (double t : ticks) {
      const float x = x_of(t);
      dl->AddLine(ImVec2(x, top + line * 1.0f), ImVec2(x, top + height), IM_COL32(255, 255, 255, 18));
      dl->AddLine(ImVec2(x, top + line * 0.9f), ImVec2(x, top + line * 1.4f), IM_COL32(200, 200, 210, 255));
      dl->AddText(ImVec2(x + 3, top), IM_COL32(200, 200, 210, 255), time_tick_label(t, step).c_str());
    }
  }

  float draw_run(ViewContext& ctx, ImDrawList* dl, const Run& run, float y, Hover& hover) {
    const float line = ImGui::GetTextLineHeight();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    dl->AddRectFilled(ImVec2(left_ - label_w_, y), ImVec2(right_, y + line + 4), IM_COL32(40, 44, 56, 255));
    dl->AddRectFilled(ImVec2(left_ - label_w_, y), ImVec2(left_ - label_w_ + 5, y + line + 4), colors::run(run.index));
    const std::string title = run_label(*run.doc, run.index) + "   " + run.data->summary.precision;
    dl->AddText(ImVec2(left_ - label_w_ + 10, y + 2), IM_COL32(235, 235, 240, 255), title.c_str());
    y += line + 8;
    const double ns_per_px = (v1_ - v0_) / (right_ - left_);
    draw_selected_step(ctx, dl, run, y, static_cast<float>(run.data->timeline.lanes.size() + 1) * lane_h_);
    for (const TimeLane& lane : run.data->timeline.lanes) {
      // A multi-rank trace: each rank's lanes together, named by their rank.
      const std::string label =
          run.data->timeline.several_ranks ? "rank " + std::to_string(lane.rank) + "  " + lane.label : lane.label;
      dl->AddText(ImVec2(left_ - label_w_ + 10, y + 3), IM_COL32(170, 170, 180, 255), label.c_str());
      const bool mouse_in = mouse.y >= y && mouse.y < y + lane_h_ && mouse.x >= left_;
      draw_lane(ctx, dl, run, lane, y, ns_per_px, mouse_in ? &hover : nullptr);
      y += lane_h_;
    }
    dl->AddText(ImVec2(left_ - label_w_ + 10, y + 3), IM_COL32(170, 170, 180, 255), "events");
    const bool mouse_in = mouse.y >= y && mouse.y < y + lane_h_ && mouse.x >= left_;
    draw_events(dl, run, y, mouse_in ? &hover : nullptr);
    return y + lane_h_ + line * 0.8f;
  }

  void draw_selected_step(ViewContext& ctx, ImDrawList* dl, const Run& run, float y, float height) {
    if (!ctx.selection.step) return;
    const analysis::StepRow* row = run.data->step_row(*ctx.selection.step);
    if (!row || !row->start_ns || !row->end_ns) return;
    const float x0 = std::max(left_, x_of(static_cast<double>(*row->start_ns - run.origin)));
    const float x1 = std::min(right_, x_of(static_cast<double>(*row->end_ns - run.origin)));
    if (x1 > x0) dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + height), IM_COL32(255, 255, 255, 16));
  }

  void draw_lane(ViewContext& ctx, ImDrawList* dl, const Run& run, const TimeLane& lane, float y, double ns_per_px,
                 Hover* hover) {
    if (lane.spans.empty()) return;
    const size_t level = lane.level_for(ns_per_px);
    const std::vector<TimeBlock>& blocks = lane.lod[level];
    const double t0 = v0_ + static_cast<double>(run.origin);
    const double t1 = v1_ + static_cast<double>(run.origin);
    size_t i = level == 0 ? lane.first_visible(static_cast<int64_t>(t0))
                          : static_cast<size_t>(std::partition_point(blocks.begin(), blocks.end(),
                                                                     [&](const TimeBlock& b) { return b.end <= t0; }) -
                                                blocks.begin());
    const float mouse_x = ImGui::GetIO().MousePos.x;
    const float h = lane_h_ - 2;
    const auto& sel = ctx.selection;
    const bool kernels = lane.kind == TimeLane::Kind::kKernels;
    const TimelineIndex& index = run.data->timeline;
    // Neighbouring blocks narrower than two pixels are coalesced into one rectangle, which costs one
    // rectangle instead of one per block (llvmpipe fills every one). It keeps their colour when they
    // share it and is grey (kMixed) when they do not: one kernel's colour over a stretch of many
    // would say that kernel ran all that time.
    struct Pending {
      float x0 = 0, x1 = 0;
      ImU32 fill = 0;
      uint8_t flags = 0;
      bool open = false;
    } pend;
    auto flush = [&] {
      if (!pend.open) return;
      dl->AddRectFilled(ImVec2(pend.x0, y + 1), ImVec2(pend.x1, y + 1 + h), pend.fill);
      if (pend.flags & TimeSpan::kNonfinite) dl->AddRect(ImVec2(pend.x0, y + 1), ImVec2(pend.x1, y + 1 + h), colors::kNaN, 0, 0, 2.0f);
      pend.open = false;
    };
    for (; i < blocks.size() && static_cast<double>(blocks[i].start) < t1; ++i) {
      const TimeBlock& b = blocks[i];
      const float x0 = std::max(left_, x_of(static_cast<double>(b.start - run.origin)));
      const float x1 = std::min(right_, std::max(x0 + 1.0f, x_of(static_cast<double>(b.end - run.origin))));
      ImU32 fill = colors::for_name(index.name(b.name), b.count > 1 ? 0.3 : 0.55, b.count > 1 ? 0.6 : 0.72);
      if (b.flags & TimeSpan::kFailed) fill = colors::kErrorText;
      if (hover && mouse_x >= x0 - 1 && mouse_x <= x1 + 1) {
        hover->doc = run.doc;
        hover->lane = &lane;
        hover->block = &b;
      }
      if (b.count == 1 && is_selected(sel, run, lane, lane.spans[b.first])) {
        dl->AddRect(ImVec2(x0 - 2, y), ImVec2(x1 + 2, y + h + 2), colors::kSelection, 0, 0, 2.0f);
      }
      const bool narrow = x1 - x0 < 2.0f;
      if (narrow && pend.open && x0 <= pend.x1 + 0.5f) {
        pend.x1 = std::max(pend.x1, x1);
        pend.flags |= b.flags;
        if (fill != pend.fill) pend.fill = colors::kMixed;
        continue;
      }
      flush();
      if (narrow) {
        pend = Pending{x0, x1, fill, b.flags, true};
        continue;
      }
      dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x1, y + 1 + h), fill);
      if (b.flags & TimeSpan::kNonfinite) dl->AddRect(ImVec2(x0, y + 1), ImVec2(x1, y + 1 + h), colors::kNaN, 0, 0, 2.0f);
      if (x1 - x0 > 30) {
        const std::string& label = index.name(b.name);
        const std::string text =
            b.count > 1 ? std::to_string(b.count) + (kernels ? " kernels" : " " + lane.label + "s") : label;
        dl->PushClipRect(ImVec2(x0 + 2, y), ImVec2(x1 - 2, y + h), true);
        dl->AddText(ImVec2(x0 + 3, y + 3), colors::contrast_text(fill), text.c_str());
        dl->PopClipRect();
      }
    }
    flush();
  }

  bool is_selected(const Selection& sel, const Run& run, const TimeLane& lane, const TimeSpan& s) const {
    if (lane.kind == TimeLane::Kind::kKernels) {
      return sel.kernel && sel.kernel->trace_id == run.doc->id() && sel.kernel->kernel_id == s.id;
    }
    if (lane.label == "layer") return sel.layer && *sel.layer == run.data->timeline.name(s.name) && sel.step && s.step == -1;
    return false;
  }

  void draw_events(ImDrawList* dl, const Run& run, float y, Hover* hover) {
    const auto& events = run.data->events;
    const double t0 = v0_ + static_cast<double>(run.origin);
    const double t1 = v1_ + static_cast<double>(run.origin);
    auto it = std::lower_bound(events.begin(), events.end(), t0,
                               [](const analysis::Event& e, double t) { return static_cast<double>(e.t_ns) < t; });
    const float h = lane_h_ - 3;
    const float mouse_x = ImGui::GetIO().MousePos.x;
    std::array<float, analysis::kEventKindCount> last_x;  // per kind: one mark a pixel, but every kind keeps its marks
    last_x.fill(-1e9f);
    for (; it != events.end() && static_cast<double>(it->t_ns) < t1; ++it) {
      ImU32 color;
      switch (it->kind) {
        case analysis::EventKind::NaN:
        case analysis::EventKind::Inf: color = colors::kNaN; break;
        case analysis::EventKind::ScaleBackoff: color = colors::kScaleBackoff; break;
        case analysis::EventKind::ScaleGrowth: color = colors::kScaleGrowth; break;
        case analysis::EventKind::SkippedStep: color = colors::kSkipped; break;
        case analysis::EventKind::Trap: color = colors::kErrorText; break;
        case analysis::EventKind::Forecast: color = colors::kWarningText; break;
        default: continue;  // overflow/underflow rows are too many to mark; the table lists them
      }
      const float x = x_of(static_cast<double>(it->t_ns - run.origin));
      float& last = last_x[static_cast<size_t>(it->kind)];
      if (x - last < 1.0f) continue;
      last = x;
      // Loss-scale changes point down from the top half, the rest up from the bottom, so a
      // backoff and the skipped step at the same moment both show.
      const bool scale_change = it->kind == analysis::EventKind::ScaleBackoff || it->kind == analysis::EventKind::ScaleGrowth;
      if (scale_change) {
        dl->AddTriangleFilled(ImVec2(x - h * 0.3f, y + 1), ImVec2(x + h * 0.3f, y + 1), ImVec2(x, y + h * 0.55f), color);
      } else {
        dl->AddTriangleFilled(ImVec2(x - h * 0.3f, y + h), ImVec2(x + h * 0.3f, y + h), ImVec2(x, y + h * 0.45f), color);
      }
      if (hover && std::fabs(mouse_x - x) <= h * 0.4f) hover->event = &*it;
    }
  }

  // [SECTION] Hover and selection -----------------------------------------------------------------

  void handle_hover(ViewContext& ctx, const Hover& hover) {
    const bool click = ImGui::IsMouseReleased(ImGuiMouseButton_Left) && !dragged_;
    if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) dragged_ = false;
    if (hover.event) {
      ImGui::BeginTooltip();
      ImGui::Text("%s, step %s", analysis::event_kind_name(hover.event->kind),
                  hover.event->step ? std::to_string(*hover.event->step).c_str() : "-");
      ImGui::TextUnformatted(hover.event->detail.c_str());
      if (!hover.event->kernel.empty()) ImGui::TextDisabled("%s %s", hover.event->kernel.c_str(), hover.event->layer.c_str());
      ImGui::EndTooltip();
      if (click) ctx.selection.select_kernel(hover.doc ? hover.doc->id() : 0, hover.event->kernel_id, hover.event->step);
      return;
    }
    if (!hover.block || !hover.lane || !hover.doc) return;
    const TraceData& data = *hover.doc->data();
    if (hover.block->count > 1) {
      ImGui::SetTooltip("%u %s merged at this zoom (%s); zoom in to see each", hover.block->count,
                        hover.lane->kind == TimeLane::Kind::kKernels ? "kernels" : "ranges",
                        analysis::human_duration(hover.block->end - hover.block->start).c_str());
      return;
    }
    const TimeSpan& s = hover.lane->spans[hover.block->first];
    if (hover.lane->kind == TimeLane::Kind::kKernels) {
      kernel_tooltip(data, s);
      if (click) {
        ctx.selection.select_kernel(hover.doc->id(), s.id, s.step >= 0 ? std::optional<int64_t>(s.step) : std::nullopt,
                                    s.layer ? std::optional<std::string>(data.timeline.name(s.layer)) : std::nullopt);
      }
    } else {
      ImGui::SetTooltip("%s %s\n%s%s", hover.lane->label.c_str(), data.timeline.name(s.name).c_str(),
                        analysis::human_duration(s.end - s.start).c_str(),
                        (s.flags & TimeSpan::kOpenEnded) ? " (never closed)" : "");
      if (click && s.step >= 0) ctx.selection.select_step(s.step);
      if (click && hover.lane->label == "layer") ctx.selection.layer = data.timeline.name(s.name);
    }
  }

  void kernel_tooltip(const TraceData& data, const TimeSpan& s) {
    ImGui::BeginTooltip();
    ImGui::Text("%s  (launch %s)", data.timeline.name(s.name).c_str(), analysis::human_launch(s.id).c_str());
    ImGui::TextDisabled("layer %s, step %s, %s", s.layer ? data.timeline.name(s.layer).c_str() : "-",
                        s.step >= 0 ? std::to_string(s.step).c_str() : "-",
                        analysis::human_duration(s.end - s.start).c_str());
    std::string error;
    const auto* tensors = details_.tensors(data, s.id, &error);
    if (!tensors) {
      ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", error.c_str());
    } else if (tensors->empty()) {
      ImGui::TextDisabled("tensors not measured for this launch");
    } else if (ImGui::BeginTable("tensors", 9, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
      for (const char* h : {"tensor", "role", "dtype", "shape", "absmax", "min nonzero", "rms", "NaN/Inf", "fp16 over/under"}) {
        ImGui::TableSetupColumn(h);
      }
      ImGui::TableHeadersRow();
      for (const auto& t : *tensors) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn(); ImGui::TextUnformatted(t.name.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(t.role.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(t.dtype.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(t.shape.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(analysis::human_optional(t.absmax).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(analysis::human_optional(t.min_nonzero).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(analysis::human_optional(t.rms).c_str());
        ImGui::TableNextColumn();
        const int64_t bad = t.nan + t.pos_inf + t.neg_inf;
        if (bad) ImGui::TextColored(colors::to_vec4(colors::kNaN), "%lld/%lld", static_cast<long long>(t.nan),
                                    static_cast<long long>(t.pos_inf + t.neg_inf));
        else ImGui::TextDisabled("0");
        ImGui::TableNextColumn();
        const auto& f16 = t.formats[static_cast<size_t>(analysis::Format::F16)];
        if (f16.measured) ImGui::Text("%lld / %lld", static_cast<long long>(f16.overflow), static_cast<long long>(f16.underflow));
        else ImGui::TextDisabled("-");
      }
      ImGui::EndTable();
    }
    ImGui::TextDisabled("click to select");
    ImGui::EndTooltip();
  }

  std::vector<Run> runs_;
  double total_ = 0;
  double v0_ = 0, v1_ = 0;  // visible window, ns from each trace's start
  bool fit_pending_ = true;
  size_t fitted_runs_ = 0;  // runs the last fit covered
  bool navigated_ = false;  // zoomed, panned or sent somewhere since the last fit
  bool align_ = true;
  bool dragged_ = false;
  float left_ = 0, right_ = 0, label_w_ = 0, lane_h_ = 20;
  KernelDetailCache details_;
};

}  // namespace

std::unique_ptr<View> make_timeline_view() { return std::make_unique<TimelineView>(); }

}  // namespace fpscope::gui
