// A small Dear ImGui file browser for opening traces: a path field, the folders and *.sqlite files
// of the current folder (sorted, folders first), double-click to enter a folder or pick a file.
// It draws as a modal popup; the chosen paths come back from draw().
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace fpscope::gui {

class FileBrowser {
 public:
  explicit FileBrowser(std::filesystem::path start);

  void open();  // shows the popup from the next draw()
  // Draws the popup when open; returns the files picked this frame (empty most frames).
  std::vector<std::filesystem::path> draw();

 private:
  struct Entry {
    std::string name;
    bool is_folder;
    uintmax_t bytes;
  };
  void enter(const std::filesystem::path& folder);
  void draw_entries(std::vector<std::filesystem::path>& picked);

  std::filesystem::path folder_;
  std::vector<Entry> entries_;
  std::string error_;
  char path_field_[1024] = {};
  int selected_ = -1;
  bool show_all_files_ = false;
  bool open_requested_ = false;
};

}  // namespace fpscope::gui
