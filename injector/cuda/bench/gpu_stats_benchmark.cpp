// Elements per second of the GPU tensor statistics (one submit, then poll with wait, so the time
// covers the kernels, the copy back and the host finalisation) next to fpscope::compute_stats on
// the host, for 16M-element tensors of each type at both levels. Without a GPU the GPU rows
// report "no GPU".   build/bin/gpu_stats_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "fpscope/gpu_stats.h"

namespace {

constexpr size_t kElements = size_t{1} << 24;

std::vector<uint8_t> host_tensor(fpscope::ElementType type) {
  size_t es = type == fpscope::ElementType::F32 ? 4 : 2;
  std::vector<uint8_t> bytes(kElements * es);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  for (size_t i = 0; i < kElements; ++i) {
    float v = normal(rng);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    if (es == 2) b >>= 16;  // a bf16 pattern; as f16 bits it is just another mix of values
    std::memcpy(bytes.data() + i * es, &b, es);
  }
  return bytes;
}

void ignore(uint64_t, const fpscope::TensorStats* s, void*) { benchmark::DoNotOptimize(s->count); }

// range(0): ElementType, range(1): StatsLevel.
void BM_GpuStats(benchmark::State& state) {
  const fpscope_gpu_api* api = fpscope_gpu_api_v1();
  if (!api) return state.SkipWithError(fpscope_gpu_unavailable_reason());
  auto type = static_cast<fpscope::ElementType>(state.range(0));
  std::vector<uint8_t> host = host_tensor(type);
  void* device = nullptr;
  if (cudaMalloc(&device, host.size()) != cudaSuccess) return state.SkipWithError("cudaMalloc failed");
  cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice);
  for (auto _ : state) {
    if (api->submit(device, int(state.range(0)), kElements, int(state.range(1)), nullptr, 0) != 0) {
      state.SkipWithError(api->last_error());
      break;
    }
    api->poll(1, ignore, nullptr);
  }
  cudaFree(device);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kElements));
}

void BM_CpuStats(benchmark::State& state) {
  auto type = static_cast<fpscope::ElementType>(state.range(0));
  std::vector<uint8_t> host = host_tensor(type);
  fpscope::TensorStats stats;
  for (auto _ : state) {
    fpscope::compute_stats(host.data(), type, kElements, static_cast<fpscope::StatsLevel>(state.range(1)), &stats);
    benchmark::DoNotOptimize(stats.count);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kElements));
}

}  // namespace

BENCHMARK(BM_GpuStats)->ArgNames({"type", "full"})->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CpuStats)->ArgNames({"type", "full"})->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
