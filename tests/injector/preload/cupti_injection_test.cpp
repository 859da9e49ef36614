// CUDA's injection entry (InitializeInjection) through a real `fpscope run`, on a machine with or
// without a GPU: a CUDA-free program calls the entry the way the CUDA driver would, and the trace's
// meta says whether CUPTI collection runs. Without a usable device (or without the GPU library) it
// must say why and the program must finish normally; a program that never reaches the entry gets
// no CUPTI status at all. Label `injection`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <optional>

#include "temp_path.h"
#include "traced_child.h"

namespace fpscope::inject {
namespace {

namespace fs = std::filesystem;
using testing::environment_with;
using testing::spawn_and_wait;

// The value of one meta key, or nothing when the key is absent.
std::optional<std::string> meta_value(const fs::path& trace, const std::string& key) {
  sqlite3* db = nullptr;
  std::optional<std::string> value;
  if (sqlite3_open_v2(trace.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << trace;
    sqlite3_close(db);
    return value;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW)
      value = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  } else {
    ADD_FAILURE() << sqlite3_errmsg(db);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return value;
}

class CuptiInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    trace_ = dir_ / "trace.sqlite";
  }

  // `fpscope run` of the target in `mode`; the exit status of fpscope (the program's).
  int trace_target(const std::string& mode) {
    const std::vector<std::string> argv = {FPSCOPE_CLI, "run", "-q", "-o", trace_.string(), "--",
                                           FPSCOPE_CUDA_INJECTION_TARGET, mode};
    int wait_status = 0;
    EXPECT_TRUE(spawn_and_wait(argv, environment_with({}), [] {}, &wait_status, &stderr_text_));
    return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  }

  fpscope::test::TempDir temp_{"fpscope-cupti"};  // gtest makes a fixture per test: one folder each
  fs::path dir_, trace_;
  std::string stderr_text_;
};

TEST_F(CuptiInjection, MissingGpuLibraryIsRecordedAsUnavailableWithThePath) {
  ASSERT_EQ(trace_target("inject-missing-gpu"), 0) << stderr_text_;
  const auto status = meta_value(trace_, "injector.cupti_status");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->rfind("unavailable: cannot load /nonexistent/libfpscope_gpu.so: ", 0), 0u) << *status;
  EXPECT_NE(stderr_text_.find("device activity (CUPTI) is not traced"), std::string::npos) << stderr_text_;
  // The program's own text still goes to config.*, and the trace ended normally.
  EXPECT_EQ(meta_value(trace_, "config.precision"), "fp32");
  EXPECT_EQ(meta_value(trace_, "end_reason"), "exited");
  EXPECT_EQ(meta_value(trace_, "config.injector.cupti_status"), std::nullopt);
}

TEST_F(CuptiInjection, StatusSaysWhetherCuptiRunsOnThisMachine) {
  ASSERT_EQ(trace_target("inject"), 0) << stderr_text_;
  const auto status = meta_value(trace_, "injector.cupti_status");
  ASSERT_TRUE(status.has_value());
  // Active only with a usable device; otherwise a reason follows the prefix.
  if (*status != "active") {
    EXPECT_EQ(status->rfind("unavailable: ", 0), 0u) << *status;
    EXPECT_GT(status->size(), std::string("unavailable: ").size());
  }
  EXPECT_EQ(meta_value(trace_, "end_reason"), "exited");
}

TEST_F(CuptiInjection, ProgramThatNeverUsesCudaHasNoCuptiStatus) {
  ASSERT_EQ(trace_target("cpu-only"), 0) << stderr_text_;
  EXPECT_EQ(meta_value(trace_, "config.precision"), "fp32");
  EXPECT_EQ(meta_value(trace_, "injector.cupti_status"), std::nullopt);
  EXPECT_EQ(stderr_text_.find("CUPTI"), std::string::npos) << stderr_text_;
}

}  // namespace
}  // namespace fpscope::inject
