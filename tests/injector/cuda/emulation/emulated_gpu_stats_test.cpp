// libfpscope_gpu.so's statistics path, submit() to poll(), with its kernels executed on the host
// by the emulation (tests/reference_trainer/cuda/emulation/host_emulation.h: blocks of real
// threads, shared memory, warp shuffles, atomics), against fpscope::compute_stats. Runs
// everywhere; it runs the scan, the block merges and the combine for real, over tensors that span
// many blocks. The queue's tests make the emulated device asynchronous (work waits on its stream
// until the test runs it), as a GPU is.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fpscope/gpu_stats.h"
#include "host_emulation.h"  // the emulated device's streams, which the queue's tests run by hand
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

// [SECTION] The queue on an asynchronous device

/* While it lives, work queued on the emulated device's streams waits until it is run. At its end,
 * whatever the test did, every result still in flight is run and taken from the library (so that
 * the next test starts with none), and the device is immediate again. Declared after the memory
 * the queued work reads and writes, so that it ends first. */
struct AsynchronousDevice {
  mpt_emulation::Streams& streams = mpt_emulation::Streams::instance();
  AsynchronousDevice() { streams.set_deferred(true); }
  ~AsynchronousDevice() {
    fpscope_gpu_api_v1()->poll(1, nullptr, nullptr);
    streams.set_deferred(false);
  }
};

/* The results poll() handed out, in the order it handed them out. */
struct Results {
  std::vector<uint64_t> order;
  std::map<uint64_t, TensorStats> stats;
  static void add(uint64_t token, const TensorStats* s, void* user) {
    auto* r = static_cast<Results*>(user);
    r->order.push_back(token);
    r->stats[token] = *s;
  }
  std::vector<uint64_t> take() {
    std::vector<uint64_t> out;
    out.swap(order);
    return out;
  }
};

TensorStats host_stats(const std::vector<uint8_t>& data, ElementType type, StatsLevel level) {
  TensorStats s;
  fpscope::compute_stats(data.data(), type, data.size() / fpscope::element_bytes(type), level, &s);
  return s;
}

/* A result is handed out once its stream has run the reduction, and not before; the results of one
 * stream come back in the order they were submitted, whatever another stream does; poll() with
 * wait hands out everything still in flight (what the injector does when the program ends). */
TEST(EmulatedGpuStatsQueue, AResultComesBackOnceItsStreamHasRunItAndEachStreamInOrder) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  void* const streams[2] = {reinterpret_cast<void*>(0xA0), reinterpret_cast<void*>(0xB0)};  // any distinct handles
  std::mt19937 rng(37);
  std::vector<std::vector<uint8_t>> tensors;
  tensors.reserve(6);  // queued work reads them where they are
  AsynchronousDevice device;
  uint64_t first_on_a_queued = 0;  // stream A's operations once its first reduction was queued
  for (uint64_t token = 0; token < 6; ++token) {
    tensors.push_back(make_tensor(ElementType::F32, 100 + 7 * token, rng, {3}));
    ASSERT_EQ(api->submit(tensors.back().data(), 0, tensors.back().size() / 4, 1, streams[token % 2], token), 0)
        << api->last_error();
    if (token == 0) first_on_a_queued = device.streams.queued(streams[0]);
  }
  Results got;
  api->poll(0, Results::add, &got);
  EXPECT_EQ(got.take(), std::vector<uint64_t>{}) << "nothing has run on the device yet";

  device.streams.run(streams[1]);
  api->poll(0, Results::add, &got);
  EXPECT_EQ(got.take(), (std::vector<uint64_t>{1, 3, 5})) << "stream B ran; A did not";

  device.streams.run(streams[0], first_on_a_queued);
  api->poll(0, Results::add, &got);
  EXPECT_EQ(got.take(), std::vector<uint64_t>{0}) << "A ran its first reduction only";

  api->poll(1, Results::add, &got);
  EXPECT_EQ(got.take(), (std::vector<uint64_t>{2, 4})) << "waiting hands out the rest, in A's order";
  for (uint64_t token = 0; token < 6; ++token)
    EXPECT_EQ(compare_stats(got.stats[token], host_stats(tensors[token], ElementType::F32, StatsLevel::Full)), "")
        << "token " << token;
}

/* Every result in flight keeps the memory it is written to until it is handed out: dozens of
 * reductions queued before any runs each come back with their own tensor's statistics, and so do
 * the next dozens, queued on the slots the first ones gave back. */
TEST(EmulatedGpuStatsQueue, ResultsInFlightEachKeepTheirOwnSlot) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  std::mt19937 rng(41);
  const ElementType types[3] = {ElementType::F32, ElementType::F16, ElementType::BF16};
  for (int round = 0; round < 2; ++round) {
    const uint64_t count = 48;  // each emulated reduction takes milliseconds
    std::vector<std::vector<uint8_t>> tensors;
    tensors.reserve(count);  // queued work reads them where they are
    AsynchronousDevice device;
    for (uint64_t token = 0; token < count; ++token) {
      const ElementType type = types[token % 3];
      tensors.push_back(make_tensor(type, 16 + token % 50, rng, token % 7 == 0 ? std::vector<size_t>{token % 16} : std::vector<size_t>{}));
      ASSERT_EQ(api->submit(tensors.back().data(), int(type), tensors.back().size() / fpscope::element_bytes(type),
                            int(token % 2), nullptr, token), 0)
          << api->last_error();
    }
    Results got;
    api->poll(0, Results::add, &got);
    ASSERT_TRUE(got.take().empty());
    device.streams.run(nullptr);
    api->poll(0, Results::add, &got);
    const std::vector<uint64_t> order = got.take();
    ASSERT_EQ(order.size(), count);
    for (uint64_t token = 0; token < count; ++token) {
      EXPECT_EQ(order[token], token);
      const TensorStats expected = host_stats(tensors[token], types[token % 3], StatsLevel(token % 2));
      EXPECT_EQ(compare_stats(got.stats[token], expected), "") << "round " << round << " token " << token;
    }
  }
}

/* A stream runs its work in order: while one of its results is not done, a poll asks about none of
 * its later ones. A poll without wait costs one event query per stream still running and one per
 * result it hands over, however many results are in flight. */
TEST(EmulatedGpuStatsQueue, APollAsksOnlyUntilEachStreamsFirstResultNotDone) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  void* const streams[2] = {reinterpret_cast<void*>(0xD0), reinterpret_cast<void*>(0xE0)};
  std::mt19937 rng(43);
  std::vector<std::vector<uint8_t>> tensors;
  tensors.reserve(24);  // queued work reads them where they are
  AsynchronousDevice device;
  std::vector<uint64_t> queued_after;  // each stream's operations once a reduction was queued
  for (uint64_t token = 0; token < 24; ++token) {
    tensors.push_back(make_tensor(ElementType::BF16, 40, rng, {}));
    void* stream = streams[token % 2];
    ASSERT_EQ(api->submit(tensors.back().data(), 2, 40, 0, stream, token), 0) << api->last_error();
    queued_after.push_back(device.streams.queued(stream));
  }
  Results got;
  auto queries_of_a_poll = [&] {
    const uint64_t before = device.streams.event_queries();
    api->poll(0, Results::add, &got);
    return device.streams.event_queries() - before;
  };
  EXPECT_EQ(queries_of_a_poll(), 2u) << "24 in flight on two streams, none done";
  EXPECT_TRUE(got.take().empty());
  device.streams.run(streams[0], queued_after[10]);  // stream A's first six: tokens 0, 2, ..., 10
  EXPECT_EQ(queries_of_a_poll(), 6u + 2u) << "six handed over, then one query per stream";
  EXPECT_EQ(got.take(), (std::vector<uint64_t>{0, 2, 4, 6, 8, 10}));
  device.streams.run(streams[1]);
  EXPECT_EQ(queries_of_a_poll(), 12u + 1u);
  const std::vector<uint64_t> b = got.take();
  ASSERT_EQ(b.size(), 12u);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], 2 * i + 1);
  api->poll(1, Results::add, &got);
  EXPECT_EQ(got.take(), (std::vector<uint64_t>{12, 14, 16, 18, 20, 22}));
  for (uint64_t token = 0; token < 24; ++token)
    EXPECT_EQ(compare_stats(got.stats[token], host_stats(tensors[token], ElementType::BF16, StatsLevel::Basic)), "")
        << "token " << token;
}

/* read() returns what the stream holds after the work queued on it before the read: it waits for
 * that work, on an asynchronous device too. */
TEST(EmulatedGpuStatsQueue, ReadSeesTheWorkQueuedBeforeIt) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  ASSERT_NE(api, nullptr);
  void* const stream = reinterpret_cast<void*>(0xC0);
  uint32_t on_device = 0;
  AsynchronousDevice device;
  ASSERT_EQ(cudaMemsetAsync(&on_device, 0x3F, sizeof on_device, stream), cudaSuccess);
  EXPECT_EQ(on_device, 0u) << "the memset waits on its stream";
  uint32_t got = 0;
  ASSERT_EQ(api->read(&got, &on_device, sizeof got, stream), 0) << api->last_error();
  EXPECT_EQ(got, 0x3F3F3F3Fu);
}

}  // namespace
}  // namespace fpscope_gpu_test
