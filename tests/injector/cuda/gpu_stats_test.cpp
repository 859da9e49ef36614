// GPU tensor statistics against fpscope::compute_stats. The per-element rules and the merging of
// block partials are checked on the host everywhere (the same code the kernels compile); the
// kernels themselves, the result queue and the error paths are checked on a GPU, skipped without.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <random>

#include "fpscope/gpu_stats.h"
#include "partial_to_stats.h"
#include "stats_element.h"
#include "stats_test_data.h"

namespace fpscope_gpu_test {
namespace {

using fpscope::ElementType;
using fpscope::StatsLevel;
using fpscope::TensorStats;

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

const ElementType kTypes[] = {ElementType::F32, ElementType::F16, ElementType::BF16};
const StatsLevel kLevels[] = {StatsLevel::Basic, StatsLevel::Full};

// [SECTION] host run of the device rules (everywhere)

TEST(GpuStatsRules, HostRunMatchesComputeStats) {
  std::mt19937 rng(11);
  for (ElementType type : kTypes) {
    for (StatsLevel level : kLevels) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{37}, size_t{5000}}) {
        std::vector<uint8_t> data = make_tensor(type, n, rng, {n / 2, n / 3, n / 2 + 1});
        TensorStats expected, actual;
        fpscope::compute_stats(data.data(), type, n, level, &expected);
        fpscope::gpu::host_reduction(data.data(), type, n, level, &actual);
        EXPECT_EQ(compare_stats(actual, expected), "")
            << type_name(type) << " level " << int(level) << " n " << n;
      }
    }
  }
}

TEST(GpuStatsRules, AllNonfiniteTensorHasNoExtremes) {
  std::mt19937 rng(2);
  std::vector<size_t> everywhere = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<uint8_t> data = make_tensor(ElementType::F16, 8, rng, everywhere);
  TensorStats expected, actual;
  fpscope::compute_stats(data.data(), ElementType::F16, 8, StatsLevel::Full, &expected);
  fpscope::gpu::host_reduction(data.data(), ElementType::F16, 8, StatsLevel::Full, &actual);
  EXPECT_EQ(compare_stats(actual, expected), "");
  EXPECT_EQ(actual.first_nonfinite, 0);
  EXPECT_TRUE(std::isnan(actual.min));
}

/* Blocks reduce their own shares and are merged in order: the result must not depend on how the
 * tensor was split (exactly, for everything the GPU promises exactly). */
TEST(GpuStatsRules, MergingPartialsGivesTheWholeTensorsResult) {
  namespace gpu = fpscope::gpu;
  std::mt19937 rng(5);
  for (ElementType type : kTypes) {
    const size_t n = 3000;
    std::vector<uint8_t> data = make_tensor(type, n, rng, {2500, 1700, 2999});
    gpu::StatsParams s = gpu::stats_params(type, StatsLevel::Full);
    // 7 interleaved "threads", as the grid-stride loop assigns elements.
    std::vector<gpu::GpuPartial> parts(7);
    std::vector<uint64_t> hist(gpu::kHistBins, 0);
    for (auto& p : parts) gpu::partial_init(p);
    for (size_t i = 0; i < n; ++i) {
      uint32_t b = 0;
      std::memcpy(&b, data.data() + i * s.bytes, static_cast<size_t>(s.bytes));
      int bin = gpu::add_element(parts[i % 7], s, b, i);
      if (bin >= 0) ++hist[bin];
    }
    gpu::GpuPartial total;
    gpu::partial_init(total);
    for (const auto& p : parts) gpu::merge(total, p);
    TensorStats expected, actual;
    fpscope::compute_stats(data.data(), type, n, StatsLevel::Full, &expected);
    // Large test values overflow f16 and bf16 on conversion, so the first one may come earlier.
    ASSERT_LE(total.first_nonfinite, 1700u);
    ASSERT_EQ(static_cast<int64_t>(total.first_nonfinite), expected.first_nonfinite);
    std::memcpy(&total.first_nonfinite_bits, data.data() + total.first_nonfinite * s.bytes,
                static_cast<size_t>(s.bytes));
    gpu::partial_to_stats(total, hist.data(), n, type, StatsLevel::Full, &actual);
    EXPECT_EQ(compare_stats(actual, expected), "") << type_name(type);
  }
}

// [SECTION] the library's table

TEST(GpuStatsApi, TableIsAvailableExactlyWhenAGpuIs) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  if (gpu_present()) {
    ASSERT_NE(api, nullptr);
    EXPECT_EQ(api->version, uint32_t{FPSCOPE_GPU_API_VERSION});
  } else {
    EXPECT_EQ(api, nullptr);
    std::string reason = fpscope_gpu_unavailable_reason();
    EXPECT_NE(reason.find("CUDA"), std::string::npos) << reason;
    std::printf("libfpscope_gpu reports: %s\n", reason.c_str());
  }
}

// [SECTION] on the GPU

struct Collected {
  std::map<uint64_t, TensorStats> by_token;
  std::vector<uint64_t> order;
};

void collect(uint64_t token, const TensorStats* stats, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->by_token[token] = *stats;
  c->order.push_back(token);
}

void* to_device(const std::vector<uint8_t>& bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes.size() + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

TEST(GpuStatsDevice, MatchesComputeStatsOnEveryTypeAndLevel) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::mt19937 rng(17);
  // `skip` leading elements are left out: the scan then starts off its 16-byte words' alignment.
  struct Case { ElementType type; StatsLevel level; size_t n; std::vector<uint8_t> data; void* device; size_t skip; };
  std::vector<Case> cases;
  // Sizes from empty to more elements than the scan's 512 blocks x 256 threads x 16 cover.
  for (ElementType type : kTypes) {
    for (StatsLevel level : kLevels) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{100003}, size_t{3000017}}) {
        std::vector<size_t> bad = n > 10 ? std::vector<size_t>{n - 1, n / 2, n / 3 + 7} : std::vector<size_t>{};
        for (size_t skip : {size_t{0}, size_t{1}}) {
          if (skip > n) continue;
          Case c{type, level, n, make_tensor(type, n, rng, bad), nullptr, skip};
          c.device = to_device(c.data);
          cases.push_back(std::move(c));
        }
      }
    }
  }
  auto on_device = [](const Case& c) {
    return static_cast<const void*>(static_cast<const uint8_t*>(c.device) + c.skip * fpscope::element_bytes(c.type));
  };
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_EQ(api->submit(on_device(cases[i]), int(cases[i].type), cases[i].n - cases[i].skip, int(cases[i].level),
                          stream, 100 + i), 0)
        << api->last_error();
  }
  Collected got;
  api->poll(1, collect, &got);
  ASSERT_EQ(got.order.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got.order[i], 100 + i) << "results of one stream come back in submission order";
    TensorStats expected;
    fpscope::compute_stats(cases[i].data.data() + cases[i].skip * fpscope::element_bytes(cases[i].type),
                           cases[i].type, cases[i].n - cases[i].skip, cases[i].level, &expected);
    EXPECT_EQ(compare_stats(got.by_token[100 + i], expected), "")
        << type_name(cases[i].type) << " level " << int(cases[i].level) << " n " << cases[i].n << " skip "
        << cases[i].skip;
    cudaFree(cases[i].device);
  }
  cudaStreamDestroy(stream);
}

TEST(GpuStatsDevice, FirstNonfiniteIsTheSmallestIndexAcrossBlocks) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::mt19937 rng(23);
  const size_t n = 2000000;
  for (size_t first : {size_t{0}, size_t{4095}, size_t{1234567}, n - 1}) {
    std::vector<size_t> bad = {n - 1, first};  // none before `first`
    std::vector<uint8_t> data = make_tensor(ElementType::F32, n, rng, bad);
    void* device = to_device(data);
    ASSERT_EQ(api->submit(device, 0, n, 0, nullptr, first), 0) << api->last_error();
    Collected got;
    api->poll(1, collect, &got);
    ASSERT_EQ(got.by_token.count(first), 1u);
    EXPECT_EQ(got.by_token[first].first_nonfinite, static_cast<int64_t>(first));
    uint32_t bits;
    std::memcpy(&bits, data.data() + 4 * first, 4);
    EXPECT_EQ(got.by_token[first].first_nonfinite_bits, bits);
    cudaFree(device);
  }
}

/* read() copies device bytes back once the stream's earlier work has run. */
TEST(GpuStatsDevice, ReadReturnsWhatTheStreamWrote) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 8), cudaSuccess);
  const float values[2] = {65536.0f, 1.0f};
  ASSERT_EQ(cudaMemcpyAsync(device, values, sizeof values, cudaMemcpyHostToDevice, stream), cudaSuccess);
  float got[2] = {0, 0};
  ASSERT_EQ(api->read(got, device, sizeof got, stream), 0) << api->last_error();
  EXPECT_EQ(got[0], 65536.0f);
  EXPECT_EQ(got[1], 1.0f);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

TEST(GpuStatsDevice, RejectsHostMemoryAndBadArguments) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::vector<float> host(16, 1.0f);
  EXPECT_NE(api->submit(host.data(), 0, host.size(), 0, nullptr, 1), 0);
  EXPECT_NE(std::string(api->last_error()).find("not device memory"), std::string::npos) << api->last_error();
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  EXPECT_NE(api->submit(device, 7, 16, 0, nullptr, 2), 0);
  EXPECT_NE(std::string(api->last_error()).find("element type"), std::string::npos);
  EXPECT_NE(api->submit(device, 0, 16, 3, nullptr, 3), 0);
  EXPECT_NE(api->submit(device, 0, size_t{1} << 42, 0, nullptr, 4), 0);
  EXPECT_NE(std::string(api->last_error()).find("more than one scan takes"), std::string::npos) << api->last_error();
  Collected got;
  api->poll(1, collect, &got);
  EXPECT_TRUE(got.order.empty()) << "rejected submissions produce no result";
  cudaFree(device);
}

}  // namespace
}  // namespace fpscope_gpu_test
