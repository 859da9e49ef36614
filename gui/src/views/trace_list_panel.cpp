// The trace list panel (see trace_list_panel.h).
#include "views/trace_list_panel.h"

#include <imgui.h>

#include <fpscope/units.h>

#include "views/view_util.h"

namespace fpscope::gui {
namespace {

// A multi-process trace: which rank the views show (all of them, or one as if traced alone).
void draw_rank_choice(TraceDoc& doc, Selection& selection) {
  if (doc.ranks().size() <= 1 && !doc.rank()) return;
  const std::string current = doc.rank() ? "rank " + std::to_string(*doc.rank()) : "all ranks";
  ImGui::SetNextItemWidth(-1);
  if (!ImGui::BeginCombo("##rank", current.c_str())) return;
  std::optional<std::optional<int32_t>> chosen;
  if (ImGui::Selectable("all ranks", !doc.rank())) chosen = std::optional<int32_t>();
  for (int32_t r : doc.ranks()) {
    if (ImGui::Selectable(("rank " + std::to_string(r)).c_str(), doc.rank() == r)) chosen = r;
  }
  ImGui::EndCombo();
  if (chosen && *chosen != doc.rank()) {
    // Launch ids and steps of the former choice may name nothing in the new one.
    if (selection.kernel && selection.kernel->trace_id == doc.id()) selection.kernel.reset();
    doc.set_rank(*chosen);
  }
}

void draw_doc(TraceSet& traces, TraceDoc& doc, int index, int* close_id, int* front_id, Selection& selection) {
  ImGui::PushID(doc.id());
  const ImU32 role_color = index < 2 ? colors::run(index) : colors::kDimText;
  ImGui::GetWindowDrawList()->AddRectFilled(
      ImGui::GetCursorScreenPos(),
      ImVec2(ImGui::GetCursorScreenPos().x + 4, ImGui::GetCursorScreenPos().y + ImGui::GetTextLineHeight() * 2.2f),
      role_color);
  ImGui::Indent(10);
  ImGui::TextUnformatted(doc.name().c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", doc.path().c_str());
  ImGui::SameLine(ImGui::GetContentRegionAvail().x - 10);
  if (ImGui::SmallButton("x")) *close_id = doc.id();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Close this trace");
  const char* role = index == 0 ? "source" : index == 1 ? "target" : "not compared";
  switch (doc.state()) {
    case LoadState::kLoading:
      ImGui::TextDisabled("%s", doc.stage().c_str());
      ImGui::ProgressBar(doc.progress(), ImVec2(-1, 0));
      break;
    case LoadState::kFailed:
      ImGui::PushTextWrapPos(0);
      ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", doc.error().c_str());
      ImGui::PopTextWrapPos();
      break;
    case LoadState::kReady: {
      const TraceData& d = *doc.data();
      const bool live = d.still_running();
      ImGui::TextColored(colors::to_vec4(live ? colors::kWarningText : colors::kDimText), "%s, %s%s", role,
                         d.summary.precision.empty() ? "precision ?" : d.summary.precision.c_str(),
                         live ? ", still running" : "");
      if (doc.refreshing()) {
        ImGui::SameLine();
        ImGui::TextDisabled("(re-reading)");
      }
      if (index >= 1 && ImGui::SmallButton("make source")) *front_id = doc.id();
      draw_rank_choice(doc, selection);
      break;
    }
  }
  (void)traces;
  ImGui::Unindent(10);
  ImGui::Separator();
  ImGui::PopID();
}

void draw_selection(Selection& selection, const TraceSet& traces) {
  heading("Selection");
  if (!selection.step && !selection.layer && !selection.kernel) {
    ImGui::TextDisabled("Click a step, layer, kernel or event");
    ImGui::TextDisabled("in any view; the others follow.");
    return;
  }
  if (selection.step) ImGui::Text("step   %lld", static_cast<long long>(*selection.step));
  if (selection.layer) ImGui::Text("layer  %s", selection.layer->c_str());
  if (selection.kernel) {
    std::string trace_name = "?";
    for (const auto& d : traces.docs()) {
      if (d->id() == selection.kernel->trace_id) trace_name = d->name();
    }
    ImGui::Text("launch %s", analysis::human_launch(selection.kernel->kernel_id).c_str());
    ImGui::TextDisabled("  in %s", trace_name.c_str());
  }
  if (selection.tensor_name) ImGui::Text("tensor %s", selection.tensor_name->c_str());
  if (ImGui::Button("Clear selection")) selection.clear();
}

}  // namespace

void draw_trace_list_panel(TraceSet& traces, Selection& selection) {
  heading("Traces");
  if (traces.docs().empty()) {
    ImGui::TextDisabled("None open.");
    ImGui::TextDisabled("File > Open, or drop files here.");
  }
  int close_id = 0, front_id = 0;
  for (size_t i = 0; i < traces.docs().size(); ++i) {
    draw_doc(traces, *traces.docs()[i], static_cast<int>(i), &close_id, &front_id, selection);
  }
  if (traces.docs().size() >= 2 && ImGui::Button("Swap source and target")) traces.swap_pair();
  if (close_id) {
    if (selection.kernel && selection.kernel->trace_id == close_id) selection.kernel.reset();
    traces.close(close_id);
  }
  if (front_id) traces.move_to_front(front_id);
  const PairComparison& cmp = traces.comparison();
  if (cmp.computing()) ImGui::TextDisabled("comparing the pair...");
  if (!cmp.error().empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(colors::to_vec4(colors::kErrorText), "comparison failed: %s", cmp.error().c_str());
    ImGui::PopTextWrapPos();
  }
  draw_selection(selection, traces);
}

}  // namespace fpscope::gui
