// mptrain's NVTX ranges (LABEL injection): a recorder loaded as NVTX injection library and
// preloaded over mpt_launch logs ranges and launches in order; every kernel must sit in the
// right step, phase and layer range (docs/kernels.md "NVTX ranges").
#include "run_mptrain.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

using namespace mptrain_test;

namespace {

struct OpenRange {
  unsigned category;
  long long payload;
  std::string message;
};

struct Launch {
  std::string kernel;
  std::string output;
  long long step = -1;      // payload of the innermost step range, -1 when none is open
  std::string phase;        // innermost phase range, "" when none
  std::string layer;        // innermost layer range, "" when none
};

struct Recording {
  std::vector<std::string> domains;
  std::vector<long long> step_payloads;
  std::vector<Launch> launches;
  bool balanced = true;
};

Recording record(const std::string& args) {
  const std::string log = temp_path("mptrain_nvtx_log");
  RunOutcome r = run_mptrain(args + " --data-dir " + FPSCOPE_TEST_DATA_DIR + " --threads 1",
                             std::string("LD_PRELOAD=") + NVTX_RECORDER + " NVTX_INJECTION64_PATH=" + NVTX_RECORDER +
                                 " MPTRAIN_NVTX_LOG=" + log);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  Recording rec;
  std::vector<OpenRange> stack;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string event;
    words >> event;
    if (event == "domain") {
      std::string name;
      words >> name;
      rec.domains.push_back(name);
    } else if (event == "push") {
      OpenRange range;
      words >> range.category >> range.payload >> range.message;
      if (range.category == 1) rec.step_payloads.push_back(range.payload);
      stack.push_back(range);
    } else if (event == "pop") {
      if (stack.empty()) rec.balanced = false;
      else stack.pop_back();
    } else if (event == "launch") {
      Launch launch;
      words >> launch.kernel >> launch.output;
      for (const OpenRange& range : stack) {
        if (range.category == 1) launch.step = range.payload;
        if (range.category == 2) launch.phase = range.message;
        if (range.category == 3) launch.layer = range.message;
      }
      rec.launches.push_back(launch);
    }
  }
  rec.balanced = rec.balanced && stack.empty();
  std::remove(log.c_str());
  return rec;
}

bool is_layer_kernel(const std::string& kernel) {
  for (const char* prefix : {"conv2d_", "linear_", "relu_", "maxpool2d_", "group_norm_", "log_softmax_", "nll_loss_"}) {
    if (kernel.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(NvtxRanges, EveryKernelSitsInItsStepPhaseAndLayer) {
  // 3 steps of 32 images, amp-bf16 so casts appear too.
  Recording rec = record("--train-subset 96 --test-subset 40 --precision amp-bf16 --loss-scale dynamic");
  ASSERT_EQ(rec.domains, std::vector<std::string>{"mptrain"});
  EXPECT_TRUE(rec.balanced);
  EXPECT_EQ(rec.step_payloads, (std::vector<long long>{0, 1, 2}));
  ASSERT_FALSE(rec.launches.empty());
  std::map<std::string, std::set<std::string>> layers_by_phase;
  int eval_launches = 0;
  for (const Launch& l : rec.launches) {
    SCOPED_TRACE(l.kernel + " -> " + l.output);
    if (l.phase == "eval") {
      EXPECT_EQ(l.step, -1);
      ++eval_launches;
    }
    if (is_layer_kernel(l.kernel)) {
      ASSERT_FALSE(l.layer.empty());
      // Forward kernels and weight-gradient kernels write tensors named after their own layer
      // (conv1.out, fc2.weight.grad); input-gradient kernels write the previous layer's.
      const bool own_output = l.phase != "backward" || l.kernel.find("backward_weight") != std::string::npos ||
                              l.kernel == "nll_loss_backward";
      if (own_output) {
        EXPECT_EQ(l.output.substr(0, l.output.find('.')), l.layer);
      }
      EXPECT_TRUE(l.phase == "forward" || l.phase == "backward" || l.phase == "eval");
      layers_by_phase[l.phase].insert(l.layer);
    }
    if (l.kernel == "sgd_step" || l.kernel.rfind("amp_", 0) == 0) {
      EXPECT_EQ(l.phase, "optimizer");
      EXPECT_TRUE(l.layer.empty());
      EXPECT_GE(l.step, 0);
    }
  }
  const std::set<std::string> all{"conv1", "conv2", "norm", "fc1", "fc2", "loss"};
  EXPECT_EQ(layers_by_phase["forward"], all);
  EXPECT_EQ(layers_by_phase["backward"], all);
  EXPECT_EQ(layers_by_phase["eval"], all);
  EXPECT_GT(eval_launches, 0);
}

}  // namespace
