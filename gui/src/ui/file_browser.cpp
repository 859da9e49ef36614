// The trace file browser (see file_browser.h).
#include "ui/file_browser.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <system_error>

#include "ui/colors.h"
#include "fpscope/units.h"

namespace fpscope::gui {
namespace fs = std::filesystem;

namespace {
constexpr const char* kPopup = "Open trace";

bool is_trace_name(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".sqlite" || ext == ".sqlite3" || ext == ".db";
}
}  // namespace

FileBrowser::FileBrowser(fs::path start) { enter(start); }

void FileBrowser::open() {
  open_requested_ = true;
  enter(folder_);
}

void FileBrowser::enter(const fs::path& folder) {
  std::error_code ec;
  fs::path target = fs::weakly_canonical(folder, ec);
  if (ec) target = folder;
  std::vector<Entry> entries;
  fs::directory_iterator it(target, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    error_ = "cannot list " + target.string() + ": " + ec.message();
    return;
  }
  for (const auto& e : it) {
    std::error_code entry_ec;
    const bool folder_entry = e.is_directory(entry_ec);
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (!folder_entry && !show_all_files_ && !is_trace_name(e.path())) continue;
    const uintmax_t bytes = folder_entry ? 0 : e.file_size(entry_ec);
    entries.push_back({name, folder_entry, entry_ec ? 0 : bytes});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.is_folder != b.is_folder ? a.is_folder : a.name < b.name;
  });
  folder_ = target;
  entries_ = std::move(entries);
  error_.clear();
  selected_ = -1;
  std::snprintf(path_field_, sizeof path_field_, "%s", folder_.string().c_str());
}

std::vector<fs::path> FileBrowser::draw() {
  std::vector<fs::path> picked;
  if (open_requested_) {
    ImGui::OpenPopup(kPopup);
    open_requested_ = false;
  }
  const ImVec2 size(ImGui::GetMainViewport()->Size.x * 0.6f, ImGui::GetMainViewport()->Size.y * 0.65f);
  ImGui::SetNextWindowSize(size, ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(kPopup, nullptr)) return picked;

  if (ImGui::Button("Up")) enter(folder_.parent_path());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##path", path_field_, sizeof path_field_, ImGuiInputTextFlags_EnterReturnsTrue)) {
    const fs::path typed(path_field_);
    std::error_code ec;
    if (fs::is_directory(typed, ec)) {
      enter(typed);
    } else {
      picked.push_back(typed);  // a typed file name opens directly; errors show in the trace list
    }
  }
  if (!error_.empty()) ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", error_.c_str());
  draw_entries(picked);

  if (ImGui::Checkbox("Show all files", &show_all_files_)) enter(folder_);
  ImGui::SameLine(ImGui::GetContentRegionAvail().x - 180);
  const bool can_open = selected_ >= 0 && !entries_[static_cast<size_t>(selected_)].is_folder;
  if (!can_open) ImGui::BeginDisabled();
  if (ImGui::Button("Open", ImVec2(80, 0))) picked.push_back(folder_ / entries_[static_cast<size_t>(selected_)].name);
  if (!can_open) ImGui::EndDisabled();
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(80, 0)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ImGui::CloseCurrentPopup();
  if (!picked.empty()) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
  return picked;
}

void FileBrowser::draw_entries(std::vector<fs::path>& picked) {
  const float footer = ImGui::GetFrameHeightWithSpacing() + 4;
  if (!ImGui::BeginTable("entries", 2, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter,
                         ImVec2(0, -footer))) {
    return;
  }
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("Name", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("Size", ImGuiTableColumnFlags_WidthFixed, 110);
  ImGui::TableHeadersRow();
  fs::path enter_folder;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const std::string label = (e.is_folder ? "[dir] " : "") + e.name;
    if (ImGui::Selectable(label.c_str(), selected_ == static_cast<int>(i),
                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
      selected_ = static_cast<int>(i);
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
        if (e.is_folder) {
          enter_folder = folder_ / e.name;
        } else {
          picked.push_back(folder_ / e.name);
        }
      }
    }
    ImGui::TableNextColumn();
    if (!e.is_folder) ImGui::TextUnformatted(analysis::human_bytes(static_cast<int64_t>(e.bytes)).c_str());
  }
  ImGui::EndTable();
  if (!enter_folder.empty()) enter(enter_folder);
}

}  // namespace fpscope::gui
