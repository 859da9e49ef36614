// Precision policy tests: default op lists, op list files, the list / widest-input / layer
// override rules in every mode, and parsing of the precision-related options.
#include "cli.h"
#include "errors.h"
#include "fault_spec.h"
#include "op_lists.h"
#include "lr_schedule.h"
#include "precision_policy.h"

#include <gtest/gtest.h>

#include "temp_path.h"

#include <filesystem>
#include <fstream>

using namespace mptrain;

namespace {

constexpr DType F32 = MPT_DTYPE_F32;
constexpr DType F16 = MPT_DTYPE_F16;
constexpr DType BF16 = MPT_DTYPE_BF16;

TEST(OpLists, HmpDefaults) {
  OpLists lists = hmp_default_lists();
  for (const char* op : {"conv2d", "linear", "relu", "group_norm", "matmul", "mm", "addmm", "mul"}) {
    EXPECT_EQ(lists.low_precision.count(op), 1u) << op;
  }
  for (const char* op : {"log_softmax", "nll_loss", "softmax", "cross_entropy"}) EXPECT_EQ(lists.fp32.count(op), 1u) << op;
  EXPECT_EQ(lists.low_precision.size(), 25u);
  EXPECT_EQ(lists.fp32.size(), 15u);
  EXPECT_EQ(lists.low_precision.count("max_pool2d"), 0u);
  EXPECT_EQ(lists.fp32.count("max_pool2d"), 0u);
}

TEST(OpLists, AutocastDefaults) {
  OpLists lists = autocast_fp16_default_lists();
  for (const char* op : {"conv2d", "linear", "matmul"}) EXPECT_EQ(lists.low_precision.count(op), 1u) << op;
  for (const char* op : {"softmax", "log_softmax", "group_norm", "layer_norm", "nll_loss"}) {
    EXPECT_EQ(lists.fp32.count(op), 1u) << op;
  }
  EXPECT_EQ(lists.low_precision.count("relu"), 0u);
  EXPECT_EQ(lists.fp32.count("relu"), 0u);
}

TEST(OpLists, ParsesCommentsAndBlankLines) {
  OpSet ops = parse_op_list("# my list\n\nconv2d\n  linear  # the fcs\r\n\t\nrelu\n", "list.txt");
  EXPECT_EQ(ops, (OpSet{"conv2d", "linear", "relu"}));
}

TEST(OpLists, UnknownNameNamesFileAndLine) {
  try {
    parse_op_list("conv2d\nconv2dd\n", "my_ops.txt");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("my_ops.txt:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("conv2dd"), std::string::npos) << e.what();
  }
}

TEST(OpLists, UnreadableFileIsAUsageError) {
  EXPECT_THROW(read_op_list_file("/nonexistent/ops.txt"), UsageError);
}

TEST(OpLists, ReadsAFile) {
  const fpscope::test::TempDir dir("mptrain-ops");
  const auto path = dir / "ops.txt";
  std::ofstream(path) << "max_pool2d\nlinear\n";
  EXPECT_EQ(read_op_list_file(path.string()), (OpSet{"linear", "max_pool2d"}));
  std::filesystem::remove(path);
}

TEST(PrecisionPolicy, AmpBf16FollowsHmpLists) {
  PrecisionPolicy p(PrecisionMode::kAmpBf16);
  EXPECT_TRUE(p.is_amp());
  EXPECT_EQ(p.input_dtype(), F32);
  EXPECT_EQ(p.param_storage_dtype("conv1"), F32);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F32, F32).dtype, BF16);
  EXPECT_EQ(p.op_precision("relu", "conv1", BF16, std::nullopt).dtype, BF16);
  EXPECT_EQ(p.op_precision("group_norm", "norm", BF16, F32).dtype, BF16);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", BF16, std::nullopt).dtype, F32);
  EXPECT_EQ(p.op_precision("nll_loss", "loss", F32, std::nullopt).reason, "fp32 list");
}

TEST(PrecisionPolicy, AmpFp16FollowsAutocastLists) {
  PrecisionPolicy p(PrecisionMode::kAmpFp16);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F32, F32).dtype, F16);
  EXPECT_EQ(p.op_precision("linear", "fc1", F32, F32).dtype, F16);
  EXPECT_EQ(p.op_precision("group_norm", "norm", F16, F32).dtype, F32);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", F16, std::nullopt).dtype, F32);
}

TEST(PrecisionPolicy, UnlistedOpsFollowTheirInput) {
  PrecisionPolicy p(PrecisionMode::kAmpFp16);
  OpPrecision relu = p.op_precision("relu", "fc1", F16, std::nullopt);
  EXPECT_EQ(relu.dtype, F16);
  EXPECT_EQ(relu.reason, "input type");
  EXPECT_EQ(p.op_precision("max_pool2d", "conv1", F32, std::nullopt).dtype, F32);
}

TEST(PrecisionPolicy, UnlistedOpsWithParametersTakeTheWidestInput) {
  PrecisionPolicy p(PrecisionMode::kAmpBf16);
  p.set_low_precision_ops({"relu"});
  p.set_fp32_ops({});
  OpPrecision linear = p.op_precision("linear", "fc1", BF16, F32);  // bf16 activation, fp32 master
  EXPECT_EQ(linear.dtype, F32);
  EXPECT_EQ(linear.reason, "widest input");
  EXPECT_EQ(widest(F16, BF16), F32);
  EXPECT_EQ(widest(BF16, BF16), BF16);
  EXPECT_EQ(widest(F16, F32), F32);
}

TEST(PrecisionPolicy, UserListsApplyToAmpFp16Too) {
  PrecisionPolicy p(PrecisionMode::kAmpFp16);
  p.set_low_precision_ops({"relu", "log_softmax"});
  p.set_fp32_ops({"conv2d"});
  EXPECT_EQ(p.op_precision("relu", "conv1", F32, std::nullopt).dtype, F16);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", F32, std::nullopt).dtype, F16);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F16, F32).dtype, F32);
  EXPECT_EQ(p.op_precision("linear", "fc1", F16, F32).dtype, F32);  // widest: the fp32 master
}

TEST(PrecisionPolicy, PureModesRunParameterOpsInTheirParameterType) {
  PrecisionPolicy p(PrecisionMode::kFp16);
  p.set_layer_overrides({{"conv1", F32}});
  EXPECT_EQ(p.input_dtype(), F16);
  EXPECT_EQ(p.param_storage_dtype("conv1"), F32);
  EXPECT_EQ(p.param_storage_dtype("conv2"), F16);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F16, F32).dtype, F32);
  // relu inside conv1 is overridden too; conv2's own conv casts back to its fp16 parameters.
  EXPECT_EQ(p.op_precision("relu", "conv1", F32, std::nullopt).dtype, F32);
  EXPECT_EQ(p.op_precision("conv2d", "conv2", F32, F16).dtype, F16);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", F16, std::nullopt).dtype, F16);
}

TEST(PrecisionPolicy, LayerOverrideBeatsLists) {
  PrecisionPolicy p(PrecisionMode::kAmpBf16);
  p.set_layer_overrides({{"fc1", F32}, {"loss", BF16}});
  OpPrecision fc1 = p.op_precision("linear", "fc1", BF16, F32);
  EXPECT_EQ(fc1.dtype, F32);
  EXPECT_EQ(fc1.reason, "layer override");
  EXPECT_EQ(p.op_precision("log_softmax", "loss", F32, std::nullopt).dtype, BF16);
  EXPECT_EQ(p.op_precision("linear", "fc2", F32, F32).dtype, BF16);
}

TEST(PrecisionPolicy, Fp32ModeKeepsEverythingFp32) {
  PrecisionPolicy p(PrecisionMode::kFp32);
  EXPECT_EQ(p.input_dtype(), F32);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F32, F32).dtype, F32);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", F32, std::nullopt).dtype, F32);
}

TEST(LayerPrecision, Parses) {
  auto overrides = parse_layer_precision("conv1=fp16,fc1=fp32,norm=bf16");
  EXPECT_EQ(overrides.size(), 3u);
  EXPECT_EQ(overrides.at("conv1"), F16);
  EXPECT_EQ(overrides.at("fc1"), F32);
  EXPECT_EQ(overrides.at("norm"), BF16);
  EXPECT_THROW(parse_layer_precision("conv1"), UsageError);
  EXPECT_THROW(parse_layer_precision("conv1=fp8"), UsageError);
  EXPECT_THROW(parse_layer_precision("=fp16"), UsageError);
}

TEST(PrecisionMode, ParsesAllNames) {
  for (const char* name : {"fp32", "fp16", "bf16", "amp-fp16", "amp-bf16", "fp8"}) {
    EXPECT_EQ(precision_mode_name(parse_precision_mode(name)), name);
  }
  for (const char* name : {"current", "delayed", "mxfp8", "mxfp8-ceil", "block", "mxfp4", "nvfp4"}) {
    EXPECT_EQ(fp8_recipe_name(parse_fp8_recipe(name)), name);
  }
  EXPECT_THROW(parse_fp8_recipe("nvfp8"), UsageError);
  EXPECT_THROW(parse_precision_mode("amp"), UsageError);
}

TEST(FaultSpecParse, Forms) {
  FaultSpec a = parse_fault_spec("nan@fc1:5");
  EXPECT_EQ(a.kind, 0);
  EXPECT_EQ(a.layer, "fc1");
  EXPECT_EQ(a.step, 5);
  EXPECT_EQ(a.index, 0);
  FaultSpec b = parse_fault_spec("-inf@conv2:0:17");
  EXPECT_EQ(b.kind, 2);
  EXPECT_EQ(b.index, 17);
  EXPECT_EQ(parse_fault_spec("inf@norm:3").kind, 1);
  for (const char* bad : {"nan", "nan@fc1", "nan@:3", "zero@fc1:1", "nan@fc1:x", "nan@fc1:1:-2", "nan@fc1:-1"}) {
    EXPECT_THROW(parse_fault_spec(bad), UsageError) << bad;
  }
}

TEST(LossScaleParse, Forms) {
  LossScaleConfig s;
  parse_loss_scale("static:1024", s);
  EXPECT_EQ(s.kind, LossScaleKind::kStatic);
  EXPECT_EQ(s.init, 1024.0);
  parse_loss_scale("dynamic", s);
  EXPECT_EQ(s.kind, LossScaleKind::kDynamic);
  parse_loss_scale("none", s);
  EXPECT_EQ(s.kind, LossScaleKind::kNone);
  for (const char* bad : {"static:", "static:0", "static:-4", "static:12x", "auto"}) {
    EXPECT_THROW(parse_loss_scale(bad, s), UsageError) << bad;
  }
}

TEST(LrScheduleParse, FormsAndTheRateOfEachUpdate) {
  OptimizerConfig c;
  c.lr = 0.5;
  c.schedule = parse_lr_schedule("constant");
  EXPECT_EQ(c.schedule.kind, LrScheduleKind::kConstant);
  EXPECT_EQ(learning_rate(c, 1), 0.5);
  EXPECT_EQ(learning_rate(c, 1000), 0.5);
  c.schedule = parse_lr_schedule("exponential:0.5");
  EXPECT_EQ(c.schedule.kind, LrScheduleKind::kExponential);
  EXPECT_EQ(learning_rate(c, 1), 0.5);  // the first update at the full rate
  EXPECT_EQ(learning_rate(c, 4), 0.0625);
  c.schedule = parse_lr_schedule("cosine:4");
  EXPECT_EQ(c.schedule.kind, LrScheduleKind::kCosine);
  EXPECT_EQ(learning_rate(c, 1), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 3), 0.25);  // halfway: cos(pi/2) = 0
  EXPECT_EQ(learning_rate(c, 5), 0.0);
  EXPECT_EQ(learning_rate(c, 50), 0.0);  // stays at 0 after STEPS updates
  for (const char* bad : {"exponential", "exponential:", "exponential:0", "exponential:1.5", "exponential:0.9x",
                          "cosine:0", "cosine:-3", "cosine:2.5", "linear:10", "Constant"})
    EXPECT_THROW(parse_lr_schedule(bad), UsageError) << bad;
}

ParsedCommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mptrain");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLine, Defaults) {
  ParsedCommandLine p = parse({});
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->model, "cnn");
  EXPECT_EQ(p.config->batch_size, 32);
  EXPECT_EQ(p.config->epochs, 1);
  EXPECT_EQ(p.config->image_size, 28);
  EXPECT_EQ(p.config->hidden, 4096);
  EXPECT_EQ(p.config->precision, PrecisionMode::kFp32);
  EXPECT_EQ(p.config->loss_scale.kind, LossScaleKind::kNone);
  EXPECT_EQ(p.config->loss_scale.init, 65536.0);
  EXPECT_EQ(p.config->loss_scale.growth, 2.0);
  EXPECT_EQ(p.config->loss_scale.backoff, 0.5);
  EXPECT_EQ(p.config->loss_scale.interval, 2000);
  EXPECT_EQ(p.config->optimizer.momentum, 0.9);
  EXPECT_EQ(p.config->optimizer.lr, 0.01);
  EXPECT_EQ(p.config->data_dir, "/usr/share/datasets/fashion-mnist");
}

TEST(CommandLine, AdamWDefaultsFollowPyTorch) {
  ParsedCommandLine p = parse({"--optimizer", "adamw"});
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->optimizer.lr, 0.001);
  EXPECT_EQ(p.config->optimizer.weight_decay, 0.01);
  EXPECT_EQ(p.config->optimizer.beta1, 0.9);
  EXPECT_EQ(p.config->optimizer.beta2, 0.999);
  EXPECT_EQ(p.config->optimizer.eps, 1e-8);
}

TEST(CommandLine, ReadsEveryPrecisionOption) {
  ParsedCommandLine p = parse({"--precision", "amp-bf16", "--layer-precision", "conv1=fp16", "--partials", "fp16",
                               "--loss-scale", "static:1024", "--optimizer-state", "fp16", "--stochastic-rounding",
                               "--fault", "inf@fc1:2:3"});
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->precision, PrecisionMode::kAmpBf16);
  EXPECT_EQ(p.config->layer_precision.at("conv1"), F16);
  EXPECT_TRUE(p.config->partials_fp16);
  EXPECT_EQ(p.config->loss_scale.kind, LossScaleKind::kStatic);
  EXPECT_EQ(p.config->optimizer.state_dtype, F16);
  EXPECT_TRUE(p.config->optimizer.stochastic_rounding);
  ASSERT_TRUE(p.config->fault);
  EXPECT_EQ(p.config->fault->index, 3);
}

TEST(PrecisionPolicy, Fp8RunsAsAmpBf16) {
  PrecisionPolicy p(PrecisionMode::kFp8);
  EXPECT_TRUE(p.is_amp());
  EXPECT_EQ(p.low_dtype(), BF16);
  EXPECT_EQ(p.param_storage_dtype("conv1"), F32);
  EXPECT_EQ(p.op_precision("conv2d", "conv1", F32, F32).dtype, BF16);
  EXPECT_EQ(p.op_precision("log_softmax", "loss", BF16, std::nullopt).dtype, F32);
}

TEST(CommandLine, ReadsTheFp8Options) {
  ParsedCommandLine d = parse({"--precision", "fp8"});
  ASSERT_TRUE(d.config);
  EXPECT_EQ(d.config->fp8.recipe, Fp8Recipe::kCurrent);
  EXPECT_TRUE(d.config->fp8.hybrid);
  EXPECT_EQ(d.config->fp8.amax_history, 1024);
  EXPECT_TRUE(d.config->fp8.keep_bf16.empty());
  ParsedCommandLine p = parse({"--precision", "fp8", "--fp8-recipe", "delayed", "--fp8-format", "e4m3",
                               "--fp8-amax-history", "16", "--fp8-keep-bf16", "conv1,fc2"});
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->fp8.recipe, Fp8Recipe::kDelayed);
  EXPECT_FALSE(p.config->fp8.hybrid);
  EXPECT_EQ(p.config->fp8.amax_history, 16);
  EXPECT_EQ(p.config->fp8.keep_bf16, (std::set<std::string>{"conv1", "fc2"}));
}

TEST(CommandLine, ReadsTheLayersToKeepFromAFile) {
  const fpscope::test::TempDir dir("mptrain-keep");
  const std::string path = (dir.path() / "keep.txt").string();
  std::ofstream(path) << "# written by fpscope advise\n# weight: 0.04% saturated\nfc2\n\n  conv1  # trailing\n";
  ParsedCommandLine p = parse({"--precision", "fp8", "--fp8-keep-bf16", "@" + path});
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->fp8.keep_bf16, (std::set<std::string>{"conv1", "fc2"}));
  ParsedCommandLine missing = parse({"--precision", "fp8", "--fp8-keep-bf16", "@" + path + ".gone"});
  EXPECT_FALSE(missing.config);
  EXPECT_EQ(missing.exit_code, 2);
}

TEST(CommandLine, BadValuesExitWithTwo) {
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"--precision", "fp4"}, {"--fp8-recipe", "current"}, {"--precision", "fp8", "--fp8-recipe", "nvfp8"},
           {"--precision", "fp8", "--fp8-amax-history", "16"}, {"--precision", "fp8", "--fp8-keep-bf16", "conv1,"},
           {"--precision", "fp8", "--fp8-format", "e5m2"},
           {"--model", "resnet"}, {"--batch-size", "0"}, {"--image-size", "16"},
           {"--loss-scale", "static:abc"}, {"--layer-precision", "conv1"}, {"--fault", "nan@fc1"},
           {"--no-such-flag"}, {"--bf16-ops", "x.txt"}, {"--lr", "-1"}, {"--device", "tpu"}}) {
    ParsedCommandLine p = parse(bad);
    EXPECT_FALSE(p.config) << bad[0];
    EXPECT_EQ(p.exit_code, 2) << bad[0];
  }
}

}  // namespace
