// CUPTI collection of libfpscope_gpu.so on a small workload: device allocation, a copy, a memset
// and the statistics kernels must each leave records, and stop() must flush them. Skipped without
// a GPU; skipped with a message when another profiler holds CUPTI (start() must then fail cleanly).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "fpscope/gpu_stats.h"

namespace fpscope_gpu_test {
namespace {

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

struct Seen {
  std::mutex mu;
  std::set<std::string> kernel_names;
  std::atomic<int> kernels{0}, copies{0}, sets{0}, allocations{0}, releases{0}, api_calls{0};
  std::atomic<bool> ordered_times{true};
};

void on_kernel(const fpscope_gpu_kernel_activity* k, void* user) {
  auto* s = static_cast<Seen*>(user);
  ++s->kernels;
  if (k->end_ns < k->start_ns) s->ordered_times = false;
  std::lock_guard<std::mutex> lock(s->mu);
  s->kernel_names.insert(k->name ? k->name : "");
}
void on_memcpy(const fpscope_gpu_memcpy_activity* m, void* user) {
  if (m->bytes == 4096) ++static_cast<Seen*>(user)->copies;
}
void on_memset(const fpscope_gpu_memset_activity* m, void* user) {
  if (m->bytes == 4096 && m->value == 0x3f) ++static_cast<Seen*>(user)->sets;
}
void on_memory(const fpscope_gpu_memory_activity* m, void* user) {
  auto* s = static_cast<Seen*>(user);
  if (m->bytes != 4096) return;
  if (m->operation == 1) ++s->allocations;
  if (m->operation == 2) ++s->releases;
}
void on_api(const fpscope_gpu_api_call* c, void* user) {
  if (c->name && std::string(c->name).rfind("cuda", 0) == 0) ++static_cast<Seen*>(user)->api_calls;
}

/* Without a device (or with another profiler attached) start fails, says which CUPTI call failed
 * where and why, and the caller can carry on: stop is harmless. */
TEST(GpuCupti, StartWithoutADeviceFailsCleanly) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-device path cannot be observed";
  fpscope_gpu_cupti_callbacks cb{};
  EXPECT_NE(fpscope_gpu_cupti_start(&cb), 0);
  std::string why = fpscope_gpu_cupti_error();
  EXPECT_NE(why.find("cupti"), std::string::npos) << why;
  EXPECT_NE(why.find("cupti_activity.cpp:"), std::string::npos) << "names file and line: " << why;
  fpscope_gpu_cupti_stop();
  EXPECT_NE(fpscope_gpu_cupti_start(nullptr), 0);
}

TEST(GpuCupti, RecordsKernelsCopiesSetsAndDeviceMemory) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  Seen seen;
  fpscope_gpu_cupti_callbacks cb{&seen, on_kernel, on_memcpy, on_memset, on_memory, on_api};
  if (fpscope_gpu_cupti_start(&cb) != 0) {
    std::string why = fpscope_gpu_cupti_error();
    ASSERT_NE(why, "");
    GTEST_SKIP() << "CUPTI unavailable here: " << why;
  }
  EXPECT_EQ(fpscope_gpu_cupti_start(&cb), 0) << "a second start is a no-op";
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 0x3f, 4096), cudaSuccess);
  std::vector<uint8_t> host(4096);
  ASSERT_EQ(cudaMemcpy(host.data(), device, 4096, cudaMemcpyDeviceToHost), cudaSuccess);
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  ASSERT_EQ(api->submit(device, 0, 1024, 1, nullptr, 1), 0) << api->last_error();
  api->poll(1, nullptr, nullptr);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  fpscope_gpu_cupti_stop();
  fpscope_gpu_cupti_stop();  // safe twice

  EXPECT_GE(seen.kernels.load(), 2) << "the scan and the combine kernels";
  EXPECT_TRUE(seen.ordered_times.load());
  EXPECT_GE(seen.copies.load(), 1);
  EXPECT_GE(seen.sets.load(), 1);
  EXPECT_GE(seen.allocations.load(), 1);
  EXPECT_GE(seen.releases.load(), 1);
  EXPECT_GT(seen.api_calls.load(), 0);
  bool scan_seen = false;
  for (const std::string& n : seen.kernel_names) scan_seen = scan_seen || n.find("scan_kernel") != std::string::npos;
  EXPECT_TRUE(scan_seen) << "kernel names come through";
  std::printf("cupti: %d kernels, clock offset %lld ns, note: %s\n", seen.kernels.load(),
              static_cast<long long>(fpscope_gpu_cupti_clock_offset()), fpscope_gpu_cupti_error());
}

}  // namespace
}  // namespace fpscope_gpu_test
