// Tests of the injector's options: every FPSCOPE_* variable, the selection they make, and the
// messages for invalid values.
#include "options.h"

#include <gtest/gtest.h>

#include "temp_path.h"
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

namespace fpscope::inject {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

Options parsed(const Env& env) {
  Options o;
  std::string error;
  EXPECT_TRUE(parse_options(env.lookup(), &o, &error)) << error;
  return o;
}

std::string rejection(const Env& env) {
  Options o;
  std::string error;
  EXPECT_FALSE(parse_options(env.lookup(), &o, &error));
  return error;
}

TEST(Options, DefaultsMeasureEverythingFully) {
  Options o = parsed(Env{{{"FPSCOPE_RING", "/fpscope-1-1"}}});
  EXPECT_EQ(o.ring_name, "/fpscope-1-1");
  EXPECT_EQ(o.every, 1);
  EXPECT_FALSE(o.steps);
  EXPECT_EQ(o.tensors, TensorRoles::Both);
  EXPECT_EQ(o.stats, StatsLevel::Full);
  EXPECT_EQ(o.trap, TrapKind::None);
  EXPECT_FALSE(o.dump.enabled);
  EXPECT_TRUE(o.selects("conv2d_forward", nullptr, -1));
  EXPECT_TRUE(o.selects("conv2d_forward", "conv1", 7));
  EXPECT_EQ(o.describe(), "every=1 steps=all ops=* tensors=both stats=full recipes=none updates=on stats_threads=auto trap=off dump=off allow=masked_fill*:-inf,full:-inf,fill_:-inf,scalar_tensor:-inf");
}

TEST(Options, AllowRulesParseAndRejectWhatTheyCannotRead) {
  Options def = parsed(Env{{}});
  ASSERT_EQ(def.allow.size(), 4u);  // masks are made of -inf on purpose
  EXPECT_EQ(def.allow[0].glob, "masked_fill*");
  EXPECT_EQ(def.allow[0].kinds, contract::kAllowNegInf);
  EXPECT_EQ(def.allow[1].glob, "full");
  EXPECT_EQ(def.allow[2].glob, "fill_");
  EXPECT_EQ(def.allow[2].kinds, contract::kAllowNegInf);
  EXPECT_EQ(def.allow[3].glob, "scalar_tensor");
  EXPECT_EQ(def.allow[3].kinds, contract::kAllowNegInf);
  Options o = parsed(Env{{{"FPSCOPE_ALLOW", "attn.*:-inf|nan,log_*:inf"}}});
  ASSERT_EQ(o.allow.size(), 2u);
  EXPECT_EQ(o.allow[0].kinds, contract::kAllowNegInf | contract::kAllowNan);
  EXPECT_EQ(o.allow[1].kinds, contract::kAllowNegInf | contract::kAllowPosInf);
  EXPECT_TRUE(o.describe().find("allow=attn.*:-inf|nan,log_*:inf") != std::string::npos);
  EXPECT_TRUE(parsed(Env{{{"FPSCOPE_ALLOW", "none"}}}).allow.empty());
  for (const char* bad : {"masked_fill", "x:", ":nan", "x:nan|bogus", "a:nan,,b:inf"}) {
    Options out;
    std::string error;
    Env env{{{"FPSCOPE_ALLOW", bad}}};
    EXPECT_FALSE(parse_options(env.lookup(), &out, &error)) << bad;
    EXPECT_EQ(error.rfind("FPSCOPE_ALLOW: allow rule", 0), 0u) << error;
  }
}

TEST(Options, EveryKeepsStepsDivisibleByN) {
  Options o = parsed(Env{{{"FPSCOPE_EVERY", "10"}}});
  EXPECT_TRUE(o.selects("relu_forward", "fc1", 0));
  EXPECT_TRUE(o.selects("relu_forward", "fc1", 30));
  EXPECT_FALSE(o.selects("relu_forward", "fc1", 31));
  EXPECT_FALSE(o.selects("relu_forward", "fc1", 9));
  // A step filter leaves out launches made outside any step range.
  EXPECT_FALSE(o.selects("relu_forward", nullptr, -1));
}

TEST(Options, StepsAreInclusiveRanges) {
  Options o = parsed(Env{{{"FPSCOPE_STEPS", "5-7"}}});
  EXPECT_FALSE(o.selects("k", nullptr, 4));
  EXPECT_TRUE(o.selects("k", nullptr, 5));
  EXPECT_TRUE(o.selects("k", nullptr, 7));
  EXPECT_FALSE(o.selects("k", nullptr, 8));
  Options single = parsed(Env{{{"FPSCOPE_STEPS", "12"}}});
  EXPECT_TRUE(single.selects("k", nullptr, 12));
  EXPECT_FALSE(single.selects("k", nullptr, 13));
  Options open = parsed(Env{{{"FPSCOPE_STEPS", "3-"}}});
  EXPECT_FALSE(open.selects("k", nullptr, 2));
  EXPECT_TRUE(open.selects("k", nullptr, 1000000));
  Options both = parsed(Env{{{"FPSCOPE_STEPS", "10-40"}, {"FPSCOPE_EVERY", "20"}}});
  EXPECT_FALSE(both.selects("k", nullptr, 0));
  EXPECT_TRUE(both.selects("k", nullptr, 20));
  EXPECT_TRUE(both.selects("k", nullptr, 40));
  EXPECT_FALSE(both.selects("k", nullptr, 30));
}

TEST(Options, OpsGlobsMatchKernelOrLayer) {
  Options o = parsed(Env{{{"FPSCOPE_OPS", "conv2d_*,fc2"}}});
  EXPECT_TRUE(o.selects("conv2d_backward_data", "conv2", 1));
  EXPECT_TRUE(o.selects("linear_forward", "fc2", 1));
  EXPECT_FALSE(o.selects("linear_forward", "fc1", 1));
  EXPECT_FALSE(o.selects("relu_forward", nullptr, 1));
  EXPECT_EQ(o.describe(), "every=1 steps=all ops=conv2d_*,fc2 tensors=both stats=full recipes=none updates=on stats_threads=auto trap=off dump=off allow=masked_fill*:-inf,full:-inf,fill_:-inf,scalar_tensor:-inf");
}

// The fp8 recipe forecast: off unless asked for, and only with full statistics.
TEST(Options, RecipesChooseTheForecastTensors) {
  EXPECT_FALSE(parsed(Env{}).forecasts_recipes());
  const Options operands = parsed(Env{{{"FPSCOPE_RECIPES", "operands"}}});
  EXPECT_EQ(operands.recipes, RecipeTensors::Operands);
  EXPECT_TRUE(operands.forecasts_recipes());
  EXPECT_NE(operands.describe().find(" recipes=operands "), std::string::npos);
  EXPECT_EQ(parsed(Env{{{"FPSCOPE_RECIPES", "all"}}}).recipes, RecipeTensors::All);
  EXPECT_FALSE(parsed(Env{{{"FPSCOPE_RECIPES", "none"}}}).forecasts_recipes());
  EXPECT_FALSE(parsed(Env{{{"FPSCOPE_RECIPES", "all"}, {"FPSCOPE_STATS", "basic"}}}).forecasts_recipes());
}

// Launch reports (parameter updates, store counts): on unless turned off; anything else is refused.
TEST(Options, UpdatesAreOnUnlessTurnedOff) {
  EXPECT_TRUE(parsed(Env{}).updates);
  EXPECT_FALSE(parsed(Env{{{"FPSCOPE_UPDATES", "off"}}}).updates);
  EXPECT_NE(parsed(Env{{{"FPSCOPE_UPDATES", "off"}}}).describe().find(" updates=off "), std::string::npos);
  const std::string error = rejection(Env{{{"FPSCOPE_UPDATES", "maybe"}}});
  EXPECT_NE(error.find("FPSCOPE_UPDATES"), std::string::npos) << error;
  EXPECT_NE(error.find("on or off"), std::string::npos) << error;
}

TEST(Options, TensorsStatsTrap) {
  Options o = parsed(Env{{{"FPSCOPE_TENSORS", "out"}, {"FPSCOPE_STATS", "basic"}, {"FPSCOPE_TRAP", "nan"}}});
  EXPECT_EQ(o.tensors, TensorRoles::Outputs);
  EXPECT_FALSE(o.measures_inputs());
  EXPECT_TRUE(o.measures_outputs());
  EXPECT_EQ(o.stats, StatsLevel::Basic);
  EXPECT_EQ(o.trap, TrapKind::NaN);
  EXPECT_EQ(parsed(Env{{{"FPSCOPE_TRAP", "inf"}}}).trap, TrapKind::Inf);
  EXPECT_EQ(parsed(Env{{{"FPSCOPE_TRAP", "nonfinite"}}}).trap, TrapKind::Nonfinite);
  Options in = parsed(Env{{{"FPSCOPE_TENSORS", "in"}}});
  EXPECT_TRUE(in.measures_inputs());
  EXPECT_FALSE(in.measures_outputs());
  // The trap watches outputs, so it measures them even when only inputs were asked for.
  EXPECT_TRUE(parsed(Env{{{"FPSCOPE_TENSORS", "in"}, {"FPSCOPE_TRAP", "nan"}}}).measures_outputs());
}

TEST(Options, StatsThreads) {
  EXPECT_EQ(parsed(Env{{}}).stats_threads, 0);
  const Options o = parsed(Env{{{"FPSCOPE_STATS_THREADS", "3"}}});
  EXPECT_EQ(o.stats_threads, 3);
  EXPECT_NE(o.describe().find(" stats_threads=3 "), std::string::npos) << o.describe();
  EXPECT_EQ(parsed(Env{{{"FPSCOPE_STATS_THREADS", "1"}}}).stats_threads, 1);
}

TEST(Options, EmptyValuesMeanUnset) {
  Options o = parsed(Env{{{"FPSCOPE_EVERY", ""}, {"FPSCOPE_OPS", ""}, {"FPSCOPE_TRAP", ""}}});
  EXPECT_EQ(o.every, 1);
  EXPECT_TRUE(o.ops.empty());
  EXPECT_EQ(o.trap, TrapKind::None);
}

TEST(Options, DumpSpecAllKeysMustMatch) {
  const fpscope::test::TempDir temp("fpscope-options-test");
  const auto dir = temp / "dump";
  Options o = parsed(Env{{{"FPSCOPE_DUMP", "op=conv2d_backward*,step=120,layer=conv2,tensor=*.grad"},
                          {"FPSCOPE_DUMP_DIR", dir.string()}}});
  EXPECT_TRUE(std::filesystem::is_directory(dir));  // created when missing
  EXPECT_EQ(o.dump_dir, dir.string());
  EXPECT_TRUE(o.dump.matches_launch("conv2d_backward_data", "conv2", 120));
  EXPECT_FALSE(o.dump.matches_launch("conv2d_backward_data", "conv2", 121));
  EXPECT_FALSE(o.dump.matches_launch("conv2d_backward_data", "conv1", 120));
  EXPECT_FALSE(o.dump.matches_launch("conv2d_backward_data", nullptr, 120));
  EXPECT_FALSE(o.dump.matches_launch("conv2d_forward", "conv2", 120));
  EXPECT_TRUE(o.dump.matches_tensor("conv2.weight.grad"));
  EXPECT_FALSE(o.dump.matches_tensor("conv2.out"));
  Options range = parsed(Env{{{"FPSCOPE_DUMP", "step=2-4"}, {"FPSCOPE_DUMP_DIR", dir.string()}}});
  EXPECT_TRUE(range.dump.matches_launch("anything", nullptr, 3));
  EXPECT_FALSE(range.dump.matches_launch("anything", nullptr, 5));
  std::filesystem::remove_all(dir);
}

TEST(Options, InvalidValuesAreRejectedWithTheVariableNamed) {
  EXPECT_NE(rejection(Env{{{"FPSCOPE_EVERY", "0"}}}).find("FPSCOPE_EVERY='0'"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_EVERY", "ten"}}}).find("positive integer"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_EVERY", "10x"}}}).find("FPSCOPE_EVERY"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STEPS", "9-3"}}}).find("FPSCOPE_STEPS='9-3'"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STEPS", "-3"}}}).find("FPSCOPE_STEPS"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STEPS", "a-b"}}}).find("FPSCOPE_STEPS"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_OPS", "conv,,relu"}}}).find("FPSCOPE_OPS"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_TENSORS", "all"}}}).find("in, out or both"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STATS", "fast"}}}).find("full or basic"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_RECIPES", "gemm"}}}).find("operands, all or none"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_TRAP", "zero"}}}).find("nonfinite, nan or inf"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STATS_THREADS", "-1"}}}).find("FPSCOPE_STATS_THREADS='-1'"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STATS_THREADS", "65"}}}).find("from 1 to 64"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_STATS_THREADS", "two"}}}).find("FPSCOPE_STATS_THREADS"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_DUMP", "kernel=relu"}, {"FPSCOPE_DUMP_DIR", "/tmp"}}})
                .find("unknown key 'kernel'"),
            std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_DUMP", "op"}, {"FPSCOPE_DUMP_DIR", "/tmp"}}}).find("not key=value"),
            std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_DUMP", "step=x"}, {"FPSCOPE_DUMP_DIR", "/tmp"}}}).find("step 'x'"),
            std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_DUMP", "op=relu_forward"}}}).find("FPSCOPE_DUMP_DIR"), std::string::npos);
  EXPECT_NE(rejection(Env{{{"FPSCOPE_DUMP", "op=relu_forward"}, {"FPSCOPE_DUMP_DIR", "relative/dir"}}})
                .find("not an absolute folder"),
            std::string::npos);
}

}  // namespace
}  // namespace fpscope::inject
