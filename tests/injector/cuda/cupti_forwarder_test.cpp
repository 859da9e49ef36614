// The injector-side forwarder of CUPTI activity (fpscope/cupti_forwarder.h): its callbacks turn
// activity into wire records with interned names and shifted times and publish them one at a
// time; start() through the built library fails cleanly without a device. Runs everywhere.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "built_paths.h"
#include "fpscope/cupti_forwarder.h"

namespace fpscope_gpu_test {
namespace {

struct FakeRing {
  std::vector<std::vector<unsigned char>> records;
  std::map<std::string, uint32_t> strings;
};

void publish(const fpscope::wire::RecordHeader* h, void* user) {
  auto* ring = static_cast<FakeRing*>(user);
  const auto* bytes = reinterpret_cast<const unsigned char*>(h);
  ring->records.emplace_back(bytes, bytes + h->slots * fpscope::wire::kSlotBytes);
}

uint32_t intern(const char* text, void* user) {
  auto* ring = static_cast<FakeRing*>(user);
  auto [it, added] = ring->strings.emplace(text, static_cast<uint32_t>(ring->strings.size() + 1));
  return it->second;
}

template <typename R>
R as(const std::vector<unsigned char>& bytes) {
  R r;
  std::memcpy(&r, bytes.data(), sizeof r);
  return r;
}

TEST(CuptiForwarder, PublishesEachActivityAsItsWireRecord) {
  FakeRing ring;
  fpscope::gpu::CuptiForwarder forwarder;
  forwarder.attach({publish, intern, &ring, 9}, 500);
  fpscope_gpu_kernel_activity k{1000, 2000, "kernel_a", 1, 0, 0, 7, {4, 1, 1}, {128, 1, 1}, 0, 32};
  fpscope::gpu::CuptiForwarder::on_kernel(&k, &forwarder);
  k.name = "kernel_b";
  fpscope::gpu::CuptiForwarder::on_kernel(&k, &forwarder);
  k.name = "kernel_a";
  fpscope::gpu::CuptiForwarder::on_kernel(&k, &forwarder);
  fpscope_gpu_memcpy_activity c{3000, 3500, 64, 2, 0, 7, 1, 0, 1};
  fpscope::gpu::CuptiForwarder::on_memcpy(&c, &forwarder);
  fpscope_gpu_memset_activity m{4000, 4100, 64, 3, 0, 7, 0};
  fpscope::gpu::CuptiForwarder::on_memset(&m, &forwarder);
  fpscope_gpu_memory_activity a{900, 64, 0x1000, 0, 7, 1, 2};
  fpscope::gpu::CuptiForwarder::on_memory(&a, &forwarder);

  ASSERT_EQ(ring.records.size(), 6u);
  EXPECT_EQ(ring.strings.size(), 2u) << "a kernel name is interned once";
  auto k0 = as<fpscope::wire::CudaKernelRecord>(ring.records[0]);
  auto k2 = as<fpscope::wire::CudaKernelRecord>(ring.records[2]);
  EXPECT_EQ(k0.h.type, fpscope::wire::RecordType::CudaKernel);
  EXPECT_EQ(k0.h.thread, 9u);
  EXPECT_EQ(k0.start_ns, 1500);
  EXPECT_EQ(k0.end_ns, 2500);
  EXPECT_EQ(k0.name, k2.name);
  EXPECT_EQ(as<fpscope::wire::CudaMemcpyRecord>(ring.records[3]).h.type, fpscope::wire::RecordType::CudaMemcpy);
  EXPECT_EQ(as<fpscope::wire::CudaMemcpyRecord>(ring.records[3]).start_ns, 3500);
  EXPECT_EQ(as<fpscope::wire::CudaMemsetRecord>(ring.records[4]).end_ns, 4600);
  auto mem = as<fpscope::wire::CudaMemoryRecord>(ring.records[5]);
  EXPECT_EQ(mem.t_ns, 1400);
  EXPECT_EQ(mem.address, 0x1000u);
  EXPECT_EQ(mem.operation, 1);
}

TEST(CuptiForwarder, CallbacksFromSeveralThreadsArePublishedOneAtATime) {
  FakeRing ring;
  fpscope::gpu::CuptiForwarder forwarder;
  forwarder.attach({publish, intern, &ring, 1}, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      fpscope_gpu_memset_activity m{1, 2, 8, 0, 0, 0, 0};
      for (int i = 0; i < 500; ++i) fpscope::gpu::CuptiForwarder::on_memset(&m, &forwarder);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ring.records.size(), 2000u);
}

TEST(CuptiForwarder, StartWithoutADeviceFailsWithCuptisReason) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    GTEST_SKIP() << "a GPU is present: the no-device path cannot be observed";
  }
  fpscope::gpu::GpuLibrary gpu;
  std::string error;
  ASSERT_TRUE(fpscope::gpu::load_gpu_library(gpu_library_dir(), &gpu, &error)) << error;
  FakeRing ring;
  fpscope::gpu::CuptiForwarder forwarder;
  EXPECT_FALSE(forwarder.start(gpu, {publish, intern, &ring, 1}, &error));
  EXPECT_NE(error.find("cupti"), std::string::npos) << error;
  forwarder.stop();  // harmless after a failed start
  EXPECT_TRUE(ring.records.empty());
}

}  // namespace
}  // namespace fpscope_gpu_test
