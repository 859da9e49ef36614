// Proves that mptrain reaches the kernel library only through its ABI (LABEL injection): a shim
// preloaded into the program counts every mpt_launch, mpt_alloc and mpt_free it sees, and the
// counts must equal the ones mptrain reports in its metrics, kernel by kernel.
#include "run_mptrain.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

using namespace mptrain_test;

namespace {

struct ShimCounts {
  uint64_t launches = 0;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t scratch_allocations = 0;  // the kernel library's own, through the same call
  std::map<std::string, uint64_t> kernels;
};

ShimCounts read_counts(const std::string& path) {
  ShimCounts counts;
  std::ifstream in(path);
  std::string key;
  while (in >> key) {
    if (key == "kernel") {
      std::string name;
      uint64_t n = 0;
      in >> name >> n;
      counts.kernels[name] = n;
    } else if (key == "launches") {
      in >> counts.launches;
    } else if (key == "allocations") {
      in >> counts.allocations;
    } else if (key == "frees") {
      in >> counts.frees;
    } else if (key == "scratch_allocations") {
      in >> counts.scratch_allocations;
    }
  }
  return counts;
}

void expect_shim_sees_everything(const std::string& args) {
  const std::string counts_path = temp_path("mptrain_shim_counts");
  const std::string metrics_path = temp_path("mptrain_shim_metrics");
  RunOutcome r = run_mptrain(args + " --data-dir " + FPSCOPE_TEST_DATA_DIR + " --threads 1 --metrics-json " + metrics_path,
                             std::string("LD_PRELOAD=") + COUNT_SHIM + " MPTRAIN_SHIM_OUT=" + counts_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ShimCounts shim = read_counts(counts_path);
  nlohmann::json metrics = read_json(metrics_path);
  std::remove(counts_path.c_str());
  std::remove(metrics_path.c_str());

  ASSERT_EQ(metrics["steps"], 2);
  EXPECT_GT(shim.launches, 0u);
  EXPECT_EQ(shim.launches, metrics["kernel_launches"].get<uint64_t>());
  EXPECT_EQ(shim.allocations - shim.scratch_allocations, metrics["allocations"].get<uint64_t>());
  EXPECT_GT(shim.scratch_allocations, 0u);  // the convolutions' im2col buffers at least
  EXPECT_EQ(shim.frees, shim.allocations);  // everything allocated was given back, scratch included
  std::map<std::string, uint64_t> reported = metrics["kernel_launches_by_kernel"].get<std::map<std::string, uint64_t>>();
  EXPECT_EQ(shim.kernels, reported);
}

TEST(Injection, ShimSeesEveryKernelAndAllocationOfFp32Steps) {
  expect_shim_sees_everything("--train-subset 64 --test-subset 32 --precision fp32");
}

TEST(Injection, ShimSeesEveryKernelAndAllocationOfAmpSteps) {
  expect_shim_sees_everything("--train-subset 64 --test-subset 32 --precision amp-fp16 --loss-scale dynamic "
                              "--fault inf@conv2:1");
}

TEST(Injection, KernelFailureNamesKernelAndReasonAndExitsWithOne) {
  RunOutcome r = run_mptrain(std::string("--train-subset 64 --test-subset 32 --data-dir ") + FPSCOPE_TEST_DATA_DIR,
                             std::string("LD_PRELOAD=") + COUNT_SHIM + " MPTRAIN_SHIM_FAIL=relu_backward");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'relu_backward'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("planted failure from count_shim"), std::string::npos) << r.output;
}

}  // namespace
