// mptrain training end to end (LABEL slow): determinism for a seed and thread count, the metrics
// file, loss scaling against a planted NaN, and accuracy on a FashionMNIST subset in each mode.
#include "run_mptrain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace mptrain_test;

namespace {

const std::string kData = std::string(" --data-dir ") + FPSCOPE_TEST_DATA_DIR + " ";

nlohmann::json train(const std::string& args) {
  const std::string metrics = temp_path("mptrain_metrics");
  RunOutcome r = run_mptrain(args + kData + " --threads 2 --metrics-json " + metrics);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return {};
  nlohmann::json j = read_json(metrics);
  std::remove(metrics.c_str());
  return j;
}

TEST(Training, SameSeedAndThreadsGiveBitIdenticalLosses) {
  const std::string args = "--train-subset 256 --test-subset 64 --precision amp-fp16 --loss-scale dynamic --seed 5";
  nlohmann::json a = train(args);
  nlohmann::json b = train(args);
  nlohmann::json other = train("--train-subset 256 --test-subset 64 --precision amp-fp16 --loss-scale dynamic --seed 6");
  ASSERT_EQ(a["losses"].size(), 8u);
  // JSON keeps a double's shortest round-trip form, so equal text means equal bits.
  EXPECT_EQ(a["losses"].dump(), b["losses"].dump());
  EXPECT_EQ(a["test_accuracy"], b["test_accuracy"]);
  EXPECT_NE(a["losses"].dump(), other["losses"].dump());
}

TEST(Training, MetricsHoldTheDocumentedKeys) {
  nlohmann::json m = train("--train-subset 96 --test-subset 40 --batch-size 32 --epochs 2 --precision bf16");
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["losses"].size(), 6u);
  ASSERT_EQ(m["epochs"].size(), 2u);
  for (const char* key : {"loss", "train_accuracy", "images_per_s"}) EXPECT_TRUE(m["epochs"][0].contains(key)) << key;
  for (const char* key : {"test_accuracy", "images_per_s", "step_time_ms", "skipped_steps", "final_loss_scale",
                          "kernel_launches", "allocations", "config"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  const nlohmann::json& peak = m["peak_memory_bytes"];
  // bf16: 2 bytes per parameter (5*9+5 + 12*5*25+12 + 12+12 + 100*972+100 + 10*100+10 = 99,896).
  EXPECT_EQ(peak["weight"], 99896 * 2);
  EXPECT_EQ(peak["gradient"], 99896 * 2);
  EXPECT_EQ(peak["master_weight"], 0);
  EXPECT_EQ(peak["optimizer_state"], 99896 * 4);  // one fp32 momentum buffer
  EXPECT_GE(peak["total"].get<int64_t>(), peak["weight"].get<int64_t>() + peak["activation"].get<int64_t>());
  EXPECT_EQ(m["config"]["precision"], "bf16");
  EXPECT_EQ(m["config"]["parameters"], "99896");
}

TEST(Training, AmpKeepsFp32MastersAnd16BitCopiesOnlyFor16BitOps) {
  nlohmann::json m = train("--train-subset 64 --test-subset 32 --precision amp-fp16 --optimizer adamw");
  ASSERT_FALSE(m.is_null());
  const nlohmann::json& peak = m["peak_memory_bytes"];
  // autocast keeps group_norm in fp32, so norm's 24 parameters have no fp16 working copy.
  EXPECT_EQ(peak["master_weight"], 99896 * 4);
  EXPECT_EQ(peak["weight"], (99896 - 24) * 2);
  EXPECT_EQ(peak["gradient"], 99896 * 4);
  EXPECT_EQ(peak["optimizer_state"], 99896 * 4 * 2);  // AdamW's two fp32 moments
  EXPECT_NE(m["config"]["op_precisions"].get<std::string>().find("norm.group_norm=fp32"), std::string::npos);
  EXPECT_NE(m["config"]["op_precisions"].get<std::string>().find("fc1.linear=fp16"), std::string::npos);
}

TEST(Training, DynamicScalingSkipsTheStepWithAPlantedNaN) {
  nlohmann::json m = train("--train-subset 320 --test-subset 64 --precision amp-fp16 --loss-scale dynamic "
                           "--fault nan@fc1:4:3");
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["skipped_steps"], 1);
  const auto& scales = m["loss_scales"];
  EXPECT_EQ(scales[4], 65536.0);
  EXPECT_EQ(scales[5], 32768.0);  // backoff 0.5 after the skipped step
  EXPECT_EQ(m["final_loss_scale"], 32768.0);
  EXPECT_TRUE(m["losses"][4].is_null());  // NaN loss at the planted step, finite after
  EXPECT_TRUE(m["losses"][5].is_number());
  EXPECT_GT(m["test_accuracy"].get<double>(), 30.0);
}

TEST(Training, ScaleGrowsAfterTheInterval) {
  nlohmann::json m = train("--train-subset 160 --test-subset 32 --precision amp-fp16 --loss-scale dynamic "
                           "--scale-init 256 --scale-interval 2 --scale-growth 4");
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["loss_scales"].dump(), "[256.0,256.0,1024.0,1024.0,4096.0]");
}

// fp8 mode: every operand of the four matrix layers passes through a quantize and a dequantize
// kernel (forward: input and weight; backward: the output gradient), except in kept layers; the
// run is deterministic and differs from amp-bf16.
TEST(Training, Fp8QuantizesEveryMatrixOperandOutsideKeptLayers) {
  const std::string subset = "--train-subset 64 --test-subset 32 --batch-size 32 --seed 3 ";
  nlohmann::json all = train(subset + "--precision fp8 --fp8-recipe mxfp8");
  nlohmann::json again = train(subset + "--precision fp8 --fp8-recipe mxfp8");
  nlohmann::json kept = train(subset + "--precision fp8 --fp8-recipe mxfp8 --fp8-keep-bf16 conv1,fc2");
  nlohmann::json bf16 = train(subset + "--precision amp-bf16");
  ASSERT_FALSE(all.is_null() || kept.is_null() || bf16.is_null());
  // 2 training steps and 1 test batch: 4 layers x (2 forward + 1 backward) x 2 + 4 x 2 forward.
  EXPECT_EQ(all["kernel_launches_by_kernel"]["fp8_quantize_mx"], 4 * 3 * 2 + 4 * 2);
  EXPECT_EQ(all["kernel_launches_by_kernel"]["fp8_dequantize"], 4 * 3 * 2 + 4 * 2);
  EXPECT_EQ(kept["kernel_launches_by_kernel"]["fp8_quantize_mx"], 2 * 3 * 2 + 2 * 2);
  EXPECT_FALSE(bf16["kernel_launches_by_kernel"].contains("fp8_quantize_mx"));
  EXPECT_EQ(all["losses"].dump(), again["losses"].dump());
  EXPECT_NE(all["losses"].dump(), bf16["losses"].dump());
  EXPECT_EQ(all["config"]["fp8_recipe"], "mxfp8");
  EXPECT_EQ(all["config"]["fp8_format"], "hybrid");
  EXPECT_EQ(kept["config"]["fp8_keep_bf16"], "conv1,fc2");
  // fp8 keeps fp32 masters and bf16 working copies, and adds the 8-bit copies of the weights.
  EXPECT_EQ(all["peak_memory_bytes"]["master_weight"], 99896 * 4);
  EXPECT_GT(all["peak_memory_bytes"]["weight"].get<int64_t>(), bf16["peak_memory_bytes"]["weight"].get<int64_t>());
}

TEST(Progress, BarOnATerminalOneLinePerEpochOtherwise) {
  const std::string args = std::string(MPTRAIN_BIN) + " --train-subset 128 --test-subset 32 --epochs 2 --threads 2" + kData;
  RunOutcome piped = run_command(args);
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos);
  EXPECT_NE(piped.output.find("epoch 1/2: 4 steps, loss "), std::string::npos) << piped.output;
  EXPECT_NE(piped.output.find("epoch 2/2: 4 steps, loss "), std::string::npos) << piped.output;
  if (run_command("command -v script").exit_code != 0) GTEST_SKIP() << "no 'script' to give mptrain a terminal";
  RunOutcome terminal = run_command("script -qec '" + args + "' /dev/null");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.output;
  EXPECT_NE(terminal.output.find("\repoch 1/2 [##############################] 4/4 loss "), std::string::npos)
      << terminal.output;
  EXPECT_NE(terminal.output.find("img/s"), std::string::npos);
}

// One epoch on 6000 training images (1000 test images, 28 px, seed 1, 2 threads). Measured: fp32
// 81.2%, fp16 81.0%, amp-fp16 81.5%, amp-bf16 80.8%; the fp32 bound leaves room for another
// kernel build (a different summation order changes the run).
TEST(Accuracy, LowPrecisionModesStayWithinOnePointOfFp32) {
  const std::string subset = "--train-subset 6000 --test-subset 1000 --epochs 1 --seed 1 ";
  const double fp32 = train(subset + "--precision fp32")["test_accuracy"].get<double>();
  EXPECT_GE(fp32, 78.0);
  std::map<std::string, std::string> modes{{"fp16", "--precision fp16 --loss-scale dynamic"},
                                           {"amp-fp16", "--precision amp-fp16 --loss-scale dynamic"},
                                           {"amp-bf16", "--precision amp-bf16"}};
  for (const auto& [name, flags] : modes) {
    const double accuracy = train(subset + flags)["test_accuracy"].get<double>();
    EXPECT_NEAR(accuracy, fp32, 1.0) << name;
  }
}

// Each fp8 recipe against amp-bf16 on 6000 training images (1000 test images, seed 1, hybrid
// format). On 20,000 images and seeds 1-3 (bench/fp8_accuracy.sh) every 8-bit recipe's mean
// training loss was within 0.004 of amp-bf16's and its test accuracy within 0.75 points on every
// seed; the 4-bit ones lost 0.021 (nvfp4) and 0.032 (mxfp4) in mean loss and at most 1.2 points.
// On this run the 4-bit ones measured +0.033 and +0.049 in loss, +0.3 and -2.3 points. The bounds
// leave room for a smaller run's noise.
TEST(Accuracy, Fp8RecipesStayCloseToAmpBf16) {
  const std::string subset = "--train-subset 6000 --test-subset 1000 --epochs 1 --seed 1 ";
  const nlohmann::json bf16 = train(subset + "--precision amp-bf16");
  ASSERT_FALSE(bf16.is_null());
  for (const char* recipe : {"current", "delayed", "mxfp8", "mxfp8-ceil", "block"}) {
    const nlohmann::json fp8 = train(subset + "--precision fp8 --fp8-recipe " + recipe);
    ASSERT_FALSE(fp8.is_null()) << recipe;
    EXPECT_NEAR(fp8["test_accuracy"].get<double>(), bf16["test_accuracy"].get<double>(), 1.5) << recipe;
    EXPECT_NEAR(fp8["epochs"][0]["loss"].get<double>(), bf16["epochs"][0]["loss"].get<double>(), 0.05) << recipe;
  }
  for (const char* recipe : {"mxfp4", "nvfp4"}) {
    const nlohmann::json fp4 = train(subset + "--precision fp8 --fp8-recipe " + recipe);
    ASSERT_FALSE(fp4.is_null()) << recipe;
    EXPECT_NEAR(fp4["test_accuracy"].get<double>(), bf16["test_accuracy"].get<double>(), 3.5) << recipe;
    EXPECT_NEAR(fp4["epochs"][0]["loss"].get<double>(), bf16["epochs"][0]["loss"].get<double>(), 0.1) << recipe;
  }
}

}  // namespace
