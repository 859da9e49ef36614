// The writer tests' fixture: a fresh trace in a folder of its own per test, fed synthetic wire
// records (wire_builder.h), and the strings of the full round trip.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fpscope/collector/trace_writer.h"
#include "temp_path.h"
#include "wire_builder.h"

namespace fpscope::test {

namespace fs = std::filesystem;

// The strings of the full round trip.
inline const char* const kStrings[] = {nullptr,          "mptrain",      "step",           "forward",
                                "conv1",          "conv2d_forward", "conv1.weight", "conv1.out",
                                "loss",           "precision",    "amp-fp16",       "/usr/bin/mptrain",
                                "every=1",        "first NaN in conv1.out", "conv1.out.npy"};

class WriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    path_ = (dir_ / "t.sqlite").string();
    std::string error;
    writer_ = TraceWriter::create(path_, "t.sqlite.dumps", &error);
    ASSERT_TRUE(writer_) << error;
  }

  void feed(const Record& r) {
    writer_->on_record(test::header(r));
    ++fed_;
  }
  template <typename R>
  void feed(const R& r) { feed(pack(r)); }
  void finish() { ASSERT_TRUE(writer_->finish()) << writer_->error(); }

  fpscope::test::TempDir temp_{"fpscope-writer"};  // gtest makes a fixture per test: one folder each
  fs::path dir_;
  std::string path_;
  std::unique_ptr<TraceWriter> writer_;
  uint64_t fed_ = 0;
};

}  // namespace fpscope::test
