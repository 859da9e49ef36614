// Small helpers shared by the views: finding the loaded pair, the "nothing to show yet" message,
// headings, clickable links and key-value rows.
#pragma once

#include <cstdio>

#include <cmath>

#include <imgui.h>

#include <string>
#include <utility>
#include <vector>

#include "trace_set.h"
#include "ui/colors.h"

namespace fpscope::gui {

inline const TraceData* loaded(const TraceDoc* doc) {
  return doc && doc->data() ? doc->data().get() : nullptr;
}

// Says why a view is empty (no trace, still loading, failed) and returns true when it is.
inline bool draw_empty_state(const TraceSet& traces) {
  const TraceDoc* source = traces.source();
  if (!source) {
    ImGui::TextDisabled("No trace open. Use File > Open trace..., drop a .sqlite file on the window,");
    ImGui::TextDisabled("or start with: fpscope-gui runs/fp32.sqlite runs/fp16.sqlite");
    return true;
  }
  if (source->data()) return false;
  if (source->state() == LoadState::kFailed) {
    ImGui::TextColored(colors::to_vec4(colors::kErrorText), "Cannot read %s:", source->name().c_str());
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", source->error().c_str());
    ImGui::PopTextWrapPos();
    ImGui::TextDisabled("Other traces are unaffected; close this one in the list on the left.");
  } else {
    ImGui::Text("Loading %s: %s", source->name().c_str(), source->stage().c_str());
    ImGui::ProgressBar(source->progress(), ImVec2(400, 0));
  }
  return true;
}

// The first two traces that are loaded, each with its index in the list (source 0, target 1): the
// runs a side-by-side view draws.
inline std::vector<std::pair<const TraceDoc*, int>> loaded_runs(const TraceSet& traces) {
  std::vector<std::pair<const TraceDoc*, int>> runs;
  for (int i = 0; i < 2 && i < static_cast<int>(traces.docs().size()); ++i) {
    const TraceDoc* doc = traces.docs()[static_cast<size_t>(i)].get();
    if (loaded(doc)) runs.push_back({doc, i});
  }
  return runs;
}

// With the early snapshot of a trace (reports only), says what is still being read; true then.
inline bool draw_still_reading(const TraceDoc& doc, const char* what) {
  const TraceData* d = loaded(&doc);
  if (!d || d->complete) return false;
  ImGui::TextDisabled("%s: reading %s... (%s, %.0f%%)", doc.name().c_str(), what, doc.stage().c_str(),
                      100.0 * doc.progress());
  return true;
}

// "2^e" for an exponent axis's tick at e.
inline std::string exp_label(double e) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "2^%d", static_cast<int>(std::lround(e)));
  return buf;
}

inline void heading(const char* text) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.62f, 0.78f, 1.0f, 1.0f));
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::Separator();
}

// Text drawn like a hyperlink; returns true when clicked.
inline bool link(const std::string& text, ImU32 color = IM_COL32(110, 180, 255, 255)) {
  ImGui::PushStyleColor(ImGuiCol_Text, colors::to_vec4(color));
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopStyleColor();
  const bool hovered = ImGui::IsItemHovered();
  if (hovered) {
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    ImGui::GetWindowDrawList()->AddLine(ImVec2(a.x, b.y), b, color);
    ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
  }
  return hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left);
}

// Name of a trace for legends: its file name, with the role when comparing.
inline std::string run_label(const TraceDoc& doc, int index) {
  const char* role = index == 0 ? "source" : index == 1 ? "target" : "";
  // One rank of a multi-process trace says which.
  const std::string name = doc.rank() ? doc.name() + " rank " + std::to_string(*doc.rank()) : doc.name();
  return *role ? name + " (" + role + ")" : name;
}

}  // namespace fpscope::gui
