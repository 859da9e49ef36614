// What the real-run tests share: mptrain traced by `fpscope run` on a small FashionMNIST subset
// (real_run_test.cpp: reports, memory, advice and cause chains; real_run_numerics_test.cpp: the fp8
// forecast and the learning report).
#ifndef FPSCOPE_TESTS_ANALYZER_REAL_RUN_H
#define FPSCOPE_TESTS_ANALYZER_REAL_RUN_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace fpscope::test {

inline const std::string kCommon = " --model cnn --epochs 1 --train-subset 320 --test-subset 100 --batch-size 32 --seed 1 --threads 1"
                            " --data-dir " FPSCOPE_DATA_DIR;

// The command that traces `mptrain kCommon ARGS` into PATH under `fpscope run -q --force OPTIONS`.
inline std::string traced_command(const std::string& path, const std::string& options, const std::string& args) {
  return std::string(FPSCOPE_BIN) + " run -q --force " + options + " -o " + path + " -- " + MPTRAIN_BIN + kCommon + " " +
         args + " > /dev/null 2>&1";
}

// Traces `mptrain ARGS` into DIR/NAME.sqlite and returns the path.
inline std::string traced(const std::string& name, const std::string& args) {
  const std::string path = fpscope::test::temp_dir() + "/" + name + ".sqlite";
  const std::string cmd = traced_command(path, "", args);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return path;
}

class RealRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(FPSCOPE_DATA_DIR) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "FashionMNIST not found in " << FPSCOPE_DATA_DIR;
    }
  }
};

}  // namespace fpscope::test

#endif
