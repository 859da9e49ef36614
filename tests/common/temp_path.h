// Temporary folders and files for the test suite, made only by mkdtemp and mkstemp.
//
// Every test that needs a file or folder takes it from here. Names built from the pid, a seed or
// the clock collide: ctest runs many test processes at once (two can start in the same millisecond
// and share a clock-derived seed), and a pid comes back in a later run to meet a stale folder.
// mkdtemp and mkstemp create the name atomically, so no two holders ever get the same one.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <utility>
#include <vector>

namespace fpscope::test {

// A fresh empty folder under the system's temporary folder, removed with its contents when the
// object goes away. `prefix` makes a leftover folder recognisable; it must not contain '/'.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "fpscope-test")
      : TempDir(std::filesystem::temp_directory_path(), prefix) {}
  // The same, inside `parent` (which must exist).
  TempDir(const std::filesystem::path& parent, std::string_view prefix) {
    std::string pattern = (parent / std::string(prefix)).string() + "-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    path_ = buffer.data();
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir& operator=(TempDir&& other) noexcept {
    if (this != &other) {
      this->~TempDir();
      path_ = std::exchange(other.path_, {});
    }
    return *this;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(std::string_view name) const { return path_ / std::string(name); }

  // The random part of the folder's name: unique among live TempDirs, so it can name things that
  // live outside the file system (a POSIX shared-memory object) for as long as this folder exists.
  std::string token() const {
    const std::string name = path_.filename().string();
    return name.substr(name.rfind('-') + 1);
  }

  // A new empty file in this folder made by mkstemps: "<stem>-XXXXXX<suffix>".
  std::filesystem::path make_file(std::string_view stem, std::string_view suffix = "") const {
    std::string pattern = (path_ / std::string(stem)).string() + "-XXXXXX" + std::string(suffix);
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const int fd = ::mkstemps(buffer.data(), static_cast<int>(suffix.size()));
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "mkstemps " + pattern);
    ::close(fd);
    return buffer.data();
  }

 private:
  std::filesystem::path path_;
};

// One folder for the whole test process, made on first use and removed at exit: for helpers that
// hand out paths without a fixture to own them.
inline const TempDir& process_temp_dir() {
  static const TempDir dir("fpscope-tests");
  return dir;
}

// A shared-memory object name ("/prefix-<token>-<n>") that no other live test process can use: it
// carries the process folder's unique token and a counter.
inline std::string unique_shm_name(std::string_view prefix) {
  static std::atomic<int> serial{0};
  return "/" + std::string(prefix) + "-" + process_temp_dir().token() + "-" + std::to_string(serial++);
}

}  // namespace fpscope::test
