// The C ABI itself: error statuses and the messages that say what was wrong, exactly the ABI
// functions exported by the shared object, allocation (alignment, zero fill, unique ids),
// the CUDA answer of a CPU-only build, and results that do not depend on the thread count.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernel_test_util.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;

std::string last_error() { return mpt_last_error(); }

TEST(Abi, UnknownKernel) {
  EXPECT_EQ(launch("conv3d_forward", {}, {}), MPT_ERR_UNKNOWN_KERNEL);
  EXPECT_NE(last_error().find("unknown kernel 'conv3d_forward'"), std::string::npos) << last_error();
}

TEST(Abi, WrongTensorCount) {
  HostTensor x({2, 3}, MPT_DTYPE_F32, "x");
  EXPECT_EQ(launch("relu_forward", {&x}, {}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(last_error(), "relu_forward: expected 1 input(s) and 1 output(s), got 1 and 0");
}

TEST(Abi, DtypeMismatch) {
  HostTensor logp({2, 3}, MPT_DTYPE_F32, "logp"), labels({2}, MPT_DTYPE_F32, "labels"), loss({1}, MPT_DTYPE_F32, "loss");
  EXPECT_EQ(launch("nll_loss_forward", {&logp, &labels}, {&loss}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(last_error(), "nll_loss_forward: input 1 labels ('labels'): expected dtype i32, got f32");
  HostTensor y({2, 3}, MPT_DTYPE_I32, "y");
  EXPECT_EQ(launch("relu_forward", {&logp}, {&y}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(last_error().find("output 0 y ('y'): expected a floating dtype"), std::string::npos) << last_error();
}

TEST(Abi, BadShapes) {
  HostTensor x({4, 784}, MPT_DTYPE_F32, "input"), w({10, 100}, MPT_DTYPE_F32, "fc1.weight");
  HostTensor b({10}, MPT_DTYPE_F32, "fc1.bias"), y({4, 10}, MPT_DTYPE_F32, "fc1.out");
  EXPECT_EQ(launch("linear_forward", {&x, &w, &b}, {&y}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(last_error(), "linear_forward: input 1 w ('fc1.weight'): expected shape [O,I] = [*,784], got [10,100]");

  HostTensor cx({1, 3, 8, 8}, MPT_DTYPE_F32, "x"), cw({4, 3, 3, 3}, MPT_DTYPE_F32, "w"), cb({4}, MPT_DTYPE_F32, "b");
  HostTensor cy({1, 4, 8, 8}, MPT_DTYPE_F32, "y");
  EXPECT_EQ(launch("conv2d_forward", {&cx, &cw, &cb}, {&cy}, {{"stride", 1}, {"padding", 0}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(last_error(), "conv2d_forward: output 0 y ('y'): expected shape [N,K,H',W'] = [1,4,6,6], got [1,4,8,8]");
}

TEST(Abi, BadScalars) {
  HostTensor cx({1, 3, 8, 8}, MPT_DTYPE_F32, "x"), cw({4, 3, 3, 3}, MPT_DTYPE_F32, "w"), cb({4}, MPT_DTYPE_F32, "b");
  HostTensor cy({1, 4, 6, 6}, MPT_DTYPE_F32, "y");
  EXPECT_EQ(launch("conv2d_forward", {&cx, &cw, &cb}, {&cy}, {{"padding", 0}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(last_error(), "conv2d_forward: missing scalar 'stride'");
  EXPECT_EQ(launch("conv2d_forward", {&cx, &cw, &cb}, {&cy}, {{"stride", 1.5}, {"padding", 0}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(last_error().find("scalar 'stride' must be an integer >= 1"), std::string::npos) << last_error();
  EXPECT_EQ(launch("conv2d_forward", {&cx, &cw, &cb}, {&cy}, {{"stride", 1}, {"padding", 0}, {"partials_fp16", 2}}),
            MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(last_error().find("'partials_fp16' must be 0 or 1"), std::string::npos) << last_error();
  auto labels = HostTensor::i32({2}, {0, 7});
  HostTensor logp({2, 3}, MPT_DTYPE_F32, "logp"), loss({1}, MPT_DTYPE_F32, "loss");
  EXPECT_EQ(launch("nll_loss_forward", {&logp, &labels}, {&loss}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(last_error().find("label 7 at index 1 is outside 0..2"), std::string::npos) << last_error();
}

TEST(Abi, VersionAndNullDescriptor) {
  EXPECT_EQ(mpt_launch(nullptr), MPT_ERR_BAD_ARGUMENTS);
  mpt_launch_desc d{};
  d.abi_version = 99;
  d.kernel = "fill";
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_ABI_VERSION);
  EXPECT_NE(last_error().find("abi_version 99"), std::string::npos);
}

// With CUDA built in: a device tensor goes to the CUDA side (fill on the device, copy back to the
// host through the cross-device copy); without a device, allocation fails with a reason.
TEST(Abi, CudaTensorsReachTheCudaSide) {
#ifndef MPT_TEST_LIBRARY_HAS_CUDA
  GTEST_SKIP() << "this library was built without CUDA";
#else
  uint64_t id = 0;
  void* device = mpt_alloc(4 * sizeof(float), MPT_DEVICE_CUDA, MPT_CAT_WORKSPACE, "device_buffer", &id);
  if (!device) {
    EXPECT_FALSE(last_error().empty());
    GTEST_SKIP() << "no usable CUDA device: " << last_error();
  }
  HostTensor host({4}, MPT_DTYPE_F32, "host");
  mpt_tensor on_device = host.view(), on_host = host.view();
  on_device.data = device;
  on_device.device = MPT_DEVICE_CUDA;
  on_device.id = id;
  mpt_scalar value{"value", 2.5};
  mpt_launch_desc fill{MPT_ABI_VERSION, 0, "fill", nullptr, 0, 1, &on_device, &value, 1, 0, nullptr, nullptr};
  ASSERT_EQ(mpt_launch(&fill), MPT_OK) << last_error();
  mpt_launch_desc copy{MPT_ABI_VERSION, 0, "copy", &on_device, 1, 1, &on_host, nullptr, 0, 0, nullptr, nullptr};
  ASSERT_EQ(mpt_launch(&copy), MPT_OK) << last_error();
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(host.value(i), 2.5);
  mpt_free(device, MPT_DEVICE_CUDA);
#endif
}

TEST(Abi, CudaTensorOnCpuOnlyBuild) {
#ifdef MPT_TEST_LIBRARY_HAS_CUDA
  GTEST_SKIP() << "this library was built with CUDA";
#else
  HostTensor x({4}, MPT_DTYPE_F32, "x"), y({4}, MPT_DTYPE_F32, "y");
  mpt_tensor in = x.view(), out = y.view();
  out.device = MPT_DEVICE_CUDA;
  mpt_launch_desc d{MPT_ABI_VERSION, 0, "copy", &in, 1, 1, &out, nullptr, 0, 0, nullptr, nullptr};
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_DEVICE);
  EXPECT_EQ(last_error(), "this libmpt_kernels was built without CUDA");
  uint64_t id = 0;
  EXPECT_EQ(mpt_alloc(64, MPT_DEVICE_CUDA, MPT_CAT_WEIGHT, "w", &id), nullptr);
  EXPECT_EQ(last_error(), "this libmpt_kernels was built without CUDA");
#endif
}

TEST(Abi, AllocationIsAlignedZeroedWithUniqueIds) {
  std::set<uint64_t> ids;
  for (size_t bytes : {0, 1, 63, 64, 1000, 1 << 20}) {
    uint64_t id = 0;
    auto* p = static_cast<unsigned char*>(mpt_alloc(bytes, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "buffer", &id));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(ids.insert(id).second) << "id " << id << " given twice";
    mpt_free(p, MPT_DEVICE_CPU);
  }
  mpt_free(nullptr, MPT_DEVICE_CPU);
  mpt_log_scalar("loss", 1.0, 0);
  mpt_log_text("precision", "fp32");
}

TEST(Abi, ExportsExactlyTheAbi) {
  std::string command = std::string("nm -D --defined-only ") + MPT_KERNELS_LIBRARY;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::set<std::string> exported;
  char line[512];
  while (fgets(line, sizeof line, pipe.get())) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    std::string name = s.substr(s.rfind(' ') + 1);
    char kind = s.size() > 17 ? s[17] : '?';
    if (kind == 'T' || kind == 'W' || kind == 'D' || kind == 'B' || kind == 'V' || kind == 'i') exported.insert(name);
  }
  std::set<std::string> abi{"mpt_launch", "mpt_abi_version", "mpt_last_error", "mpt_alloc", "mpt_free", "mpt_host_written",
                            "mpt_log_scalar", "mpt_log_text", "mpt_set_num_threads", "mpt_set_communicator",
                            "mpt_parallel_tasks"};
  EXPECT_EQ(exported, abi);
}

TEST(Abi, ResultsDoNotDependOnThreadCount) {
  const int64_t n = 3, c = 4, h = 10, w = 10, k = 5;
  auto x = HostTensor::from_values({n, c, h, w}, mpt_test::random_values(n * c * h * w, -1, 1, 9), MPT_DTYPE_F16, "x");
  auto wt = HostTensor::from_values({k, c, 3, 3}, mpt_test::random_values(k * c * 9, -1, 1, 10), MPT_DTYPE_F16, "w");
  auto b = HostTensor::from_values({k}, mpt_test::random_values(k, -1, 1, 11), MPT_DTYPE_F16, "b");
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    mpt_set_num_threads(threads);
    for (int partials : {0, 1}) {
      HostTensor y({n, k, h, w}, MPT_DTYPE_F16, "y");
      ASSERT_EQ(launch("conv2d_forward", {&x, &wt, &b}, {&y}, {{"stride", 1}, {"padding", 1}, {"partials_fp16", partials}}),
                MPT_OK);
      results.push_back(y.values());
    }
  }
  mpt_set_num_threads(0);
  for (size_t i = 2; i < results.size(); ++i) EXPECT_EQ(results[i], results[i % 2]) << "run " << i;
}

// Changing the thread count between launches restarts the pool's workers; a restarted worker must
// neither run a finished job nor miss the next one (a former race, found with -fsanitize=thread).
TEST(Abi, ThreadCountChangesBetweenParallelLaunches) {
  const int64_t n = 1 << 17;
  auto values = mpt_test::random_values(n, -1, 1, 12);
  auto x = HostTensor::from_values({n}, values, MPT_DTYPE_F32, "x");
  for (int round = 0; round < 40; ++round) {
    mpt_set_num_threads(1 + round % 4);
    HostTensor y({n}, MPT_DTYPE_F16, "y");
    ASSERT_EQ(launch("relu_forward", {&x}, {&y}), MPT_OK);
    for (int64_t i = 0; i < n; i += 997)
      ASSERT_EQ(y.value(i), mpt_test::reference_round_f16(values[static_cast<size_t>(i)] > 0 ? static_cast<float>(values[static_cast<size_t>(i)]) : 0.0))
          << "round " << round << " element " << i;
  }
  mpt_set_num_threads(0);
}

// mpt_parallel_tasks runs every task exactly once whatever the pool's size, back to back (a worker
// let off one job must take the next), with workers asleep or awake, and from inside a task.
TEST(Abi, ParallelTasksRunEachTaskOnce) {
  struct Count {
    std::vector<std::atomic<int>> runs;
    std::atomic<int> threads_seen{0};
    explicit Count(size_t n) : runs(n) {}
  };
  for (int threads : {1, 2, 3, 4}) {
    mpt_set_num_threads(threads);
    for (int64_t tasks : {0, 1, 2, 3, 7, 64}) {
      for (int round = 0; round < 30; ++round) {
        Count count(static_cast<size_t>(tasks));
        mpt_parallel_tasks(
            tasks, [](void* c, int64_t i) { static_cast<Count*>(c)->runs[static_cast<size_t>(i)]++; }, &count);
        for (int64_t i = 0; i < tasks; ++i)
          ASSERT_EQ(count.runs[static_cast<size_t>(i)].load(), 1)
              << threads << " threads, " << tasks << " tasks, round " << round << ", task " << i;
        // Every few rounds the workers fall asleep before the next job.
        if (round % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
  // A task that asks for more tasks runs them itself, and a kernel launched by a task runs.
  mpt_set_num_threads(2);
  Count outer(4);
  mpt_parallel_tasks(
      4,
      [](void* c, int64_t i) {
        auto* count = static_cast<Count*>(c);
        Count inner(3);
        mpt_parallel_tasks(3, [](void* d, int64_t j) { static_cast<Count*>(d)->runs[static_cast<size_t>(j)]++; }, &inner);
        for (auto& r : inner.runs) EXPECT_EQ(r.load(), 1);
        count->runs[static_cast<size_t>(i)]++;
      },
      &outer);
  for (auto& r : outer.runs) EXPECT_EQ(r.load(), 1);
  mpt_set_num_threads(0);
}

// A job of tasks between two parallel kernels leaves the kernels' results as they were.
TEST(Abi, ParallelTasksBetweenKernelsChangeNoResult) {
  const int64_t n = 1 << 17;
  auto values = mpt_test::random_values(n, -1, 1, 13);
  auto x = HostTensor::from_values({n}, values, MPT_DTYPE_F32, "x");
  mpt_set_num_threads(2);
  std::vector<double> first;
  for (int round = 0; round < 20; ++round) {
    HostTensor y({n}, MPT_DTYPE_F32, "y");
    ASSERT_EQ(launch("relu_forward", {&x}, {&y}), MPT_OK);
    std::atomic<int64_t> sum{0};
    mpt_parallel_tasks(
        16, [](void* s, int64_t i) { static_cast<std::atomic<int64_t>*>(s)->fetch_add(i); }, &sum);
    EXPECT_EQ(sum.load(), 120);
    if (round == 0)
      first = y.values();
    else
      ASSERT_EQ(y.values(), first) << "round " << round;
  }
  mpt_set_num_threads(0);
}

}  // namespace
