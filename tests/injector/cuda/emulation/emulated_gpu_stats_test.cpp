// libfpscope_gpu.so's statistics path, submit() to poll(), with its kernels executed on the host
// by the emulation (tests/reference_trainer/cuda/emulation/host_emulation.h: blocks of real
// threads, shared memory, warp shuffles, atomics), against fpscope::compute_stats. Runs
// everywhere; it runs the scan, the block merges and the combine for real, over tensors that span
// many blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fpscope/gpu_stats.h"
#include "stats_test_data.h"

namespace fpscope_gpu_test {
namespace {

using fpscope::ElementType;
using fpscope::StatsLevel;
using fpscope::TensorStats;

void collect(uint64_t token, const TensorStats* stats, void* user) {
  (*static_cast<std::map<uint64_t, TensorStats>*>(user))[token] = *stats;
}

TEST(EmulatedGpuStats, MatchesComputeStatsOnEveryTypeAndLevel) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr) << fpscope_gpu_unavailable_reason();
  std::mt19937 rng(29);
  // `skip` leading elements are left out: the scan then starts off its 16-byte words' alignment.
  struct Case { ElementType type; StatsLevel level; size_t n; std::vector<uint8_t> data; size_t skip = 0; };
  std::vector<Case> cases;
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
      // 9001 elements take 3 blocks of the scan (each emulated block costs real time).
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{9001}}) {
        std::vector<size_t> bad = n > 10 ? std::vector<size_t>{n - 1, n / 2, n / 3 + 7} : std::vector<size_t>{};
        cases.push_back(Case{type, level, n, make_tensor(type, n, rng, bad)});
      }
      cases.push_back(Case{type, level, 9001, make_tensor(type, 9001, rng, {9000, 4500}), 1});
    }
  }
  auto start = [](const Case& c) { return c.data.data() + c.skip * fpscope::element_bytes(c.type); };
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_EQ(api->submit(start(cases[i]), int(cases[i].type), cases[i].n - cases[i].skip, int(cases[i].level), nullptr, i), 0)
        << api->last_error();
  }
  std::map<uint64_t, TensorStats> got;
  api->poll(1, collect, &got);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    TensorStats expected;
    fpscope::compute_stats(start(cases[i]), cases[i].type, cases[i].n - cases[i].skip, cases[i].level, &expected);
    EXPECT_EQ(compare_stats(got[i], expected), "")
        << type_name(cases[i].type) << " level " << int(cases[i].level) << " n " << cases[i].n << " skip " << cases[i].skip;
  }
}

TEST(EmulatedGpuStats, FirstNonfiniteIsTheSmallestIndexAcrossBlocks) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::mt19937 rng(31);
  const size_t n = 20000;  // 5 blocks
  for (size_t first : {size_t{0}, size_t{4095}, size_t{12345}, n - 1}) {
    std::vector<uint8_t> data = make_tensor(ElementType::F32, n, rng, {n - 1, first});
    ASSERT_EQ(api->submit(data.data(), 0, n, 0, nullptr, first), 0) << api->last_error();
    std::map<uint64_t, TensorStats> got;
    api->poll(1, collect, &got);
    ASSERT_EQ(got.count(first), 1u);
    EXPECT_EQ(got[first].first_nonfinite, static_cast<int64_t>(first));
    uint32_t bits;
    std::memcpy(&bits, data.data() + 4 * first, 4);
    EXPECT_EQ(got[first].first_nonfinite_bits, bits);
  }
}

/* A block's counts are 32-bit: a tensor too large for them is refused, not miscounted. */
TEST(EmulatedGpuStats, RefusesMoreElementsThanOneScanTakes) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::vector<float> data(16, 1.0f);
  EXPECT_NE(api->submit(data.data(), 0, size_t{1} << 42, 0, nullptr, 1), 0);
  EXPECT_NE(std::string(api->last_error()).find("more than one scan takes"), std::string::npos) << api->last_error();
  std::map<uint64_t, TensorStats> got;
  api->poll(1, collect, &got);
  EXPECT_TRUE(got.empty());
}

/* read() copies a few bytes back (the loss scaler's scalars); bad arguments are refused. */
TEST(EmulatedGpuStats, ReadCopiesBytesBack) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  ASSERT_EQ(api->version, uint32_t{FPSCOPE_GPU_API_VERSION});
  const float scale = 65536.0f;
  float got = 0.0f;
  ASSERT_EQ(api->read(&got, &scale, sizeof got, nullptr), 0) << api->last_error();
  EXPECT_EQ(got, scale);
  EXPECT_NE(api->read(nullptr, &scale, sizeof got, nullptr), 0);
  EXPECT_NE(std::string(api->last_error()).find("read"), std::string::npos) << api->last_error();
}

}  // namespace
}  // namespace fpscope_gpu_test
