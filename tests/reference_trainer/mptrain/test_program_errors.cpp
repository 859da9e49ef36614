// mptrain's command-line errors end to end: every bad input stops the program with exit code 2
// and a message saying what was wrong; --help lists the options.
#include "run_mptrain.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace mptrain_test;

namespace {

const std::string kData = std::string(" --data-dir ") + FPSCOPE_TEST_DATA_DIR + " ";

TEST(ProgramErrors, HelpListsTheOptions) {
  RunOutcome r = run_mptrain("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--model", "--precision", "--loss-scale", "--layer-precision", "--bf16-ops", "--fp32-ops",
                             "--partials", "--optimizer-state", "--stochastic-rounding", "--fault", "--metrics-json",
                             "--device", "--threads", "--image-size", "--train-subset", "--scale-interval"}) {
    EXPECT_NE(r.output.find(option), std::string::npos) << option;
  }
}

TEST(ProgramErrors, UnknownFlag) {
  RunOutcome r = run_mptrain("--precisoin fp16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--precisoin"), std::string::npos) << r.output;
}

TEST(ProgramErrors, BadValue) {
  RunOutcome r = run_mptrain("--loss-scale static:zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("static:zero"), std::string::npos) << r.output;
}

TEST(ProgramErrors, MissingDataDirNamesFileAndPackage) {
  RunOutcome r = run_mptrain("--data-dir /nonexistent/fashion");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/fashion/train-images-idx3-ubyte.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("install the dataset-fashion-mnist package or pass --data-dir"), std::string::npos) << r.output;
}

TEST(ProgramErrors, OpListWithUnknownOp) {
  const std::string path = temp_path("mptrain_bad_ops");
  std::ofstream(path) << "# ops in bf16\nconv2d\nlinaer\n";
  RunOutcome r = run_mptrain("--precision amp-bf16 --bf16-ops " + path + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(path + ":3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("linaer"), std::string::npos) << r.output;
  std::remove(path.c_str());
}

TEST(ProgramErrors, OpListFileMissing) {
  RunOutcome r = run_mptrain("--precision amp-fp16 --fp32-ops /nonexistent/ops.txt" + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/ops.txt"), std::string::npos) << r.output;
}

TEST(ProgramErrors, OpOnBothLists) {
  const std::string path = temp_path("mptrain_fp32_ops");
  std::ofstream(path) << "conv2d\n";
  RunOutcome r = run_mptrain("--precision amp-bf16 --fp32-ops " + path + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("'conv2d' is on both"), std::string::npos) << r.output;
  std::remove(path.c_str());
}

TEST(ProgramErrors, UnknownLayer) {
  RunOutcome r = run_mptrain("--layer-precision conv3=fp16 --train-subset 32 --test-subset 32" + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no layer 'conv3'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("conv1, conv2, norm, fc1, fc2, loss"), std::string::npos) << r.output;
}

TEST(ProgramErrors, Fp8KeepsOnlyLayersTheModelHas) {
  RunOutcome r = run_mptrain("--precision fp8 --fp8-keep-bf16 conv1,fc3 --train-subset 32 --test-subset 32" + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--fp8-keep-bf16: the model has no layer 'fc3'"), std::string::npos) << r.output;
  RunOutcome norm = run_mptrain("--precision fp8 --fp8-keep-bf16 norm --train-subset 32 --test-subset 32" + kData);
  EXPECT_EQ(norm.exit_code, 2);
  EXPECT_NE(norm.output.find("layer 'norm' has no linear or conv2d op"), std::string::npos) << norm.output;
  EXPECT_NE(norm.output.find("conv1, conv2, fc1, fc2"), std::string::npos) << norm.output;
  RunOutcome alone = run_mptrain("--fp8-recipe block --train-subset 32 --test-subset 32" + kData);
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.output.find("apply to --precision fp8 only"), std::string::npos) << alone.output;
}

TEST(ProgramErrors, FaultInUnknownLayer) {
  RunOutcome r = run_mptrain("--model mlp --fault nan@conv1:0 --train-subset 32 --test-subset 32" + kData);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("fc1, fc2, fc3, loss"), std::string::npos) << r.output;
}

TEST(ProgramErrors, CudaWithoutAUsableDeviceIsExplained) {
  RunOutcome r = run_mptrain("--device cuda --train-subset 32 --test-subset 32" + kData);
  // On a machine with a GPU and a CUDA build this trains; anywhere else it must say why and exit 2.
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is available";
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--device cpu"), std::string::npos) << r.output;
}

}  // namespace
