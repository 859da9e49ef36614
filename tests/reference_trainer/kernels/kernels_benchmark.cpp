// Speed of the kernel library: the array conversions (elements per second; vector path and the
// scalar fallback) and conv2d / linear forward with f32 against f16 inputs and fp32 against fp16
// partials (wall time: OpenBLAS runs its own threads). Run: build/bin/kernels_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include "kernel_test_util.h"
#include "mpt/numerics.h"

namespace {

using mpt_test::HostTensor;

constexpr size_t kElements = 1 << 20;

struct ConversionData {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
  ConversionData() : f32(kElements), bits(kElements) {
    auto v = mpt_test::random_values(kElements, -1000.0, 1000.0, 1);
    for (size_t i = 0; i < kElements; ++i) f32[i] = static_cast<float>(v[i]);
  }
};

ConversionData& data() {
  static ConversionData d;
  return d;
}

// range(0): 1 = scalar fallback, 0 = the vector path this CPU supports.
template <typename Convert>
void run_conversion(benchmark::State& state, Convert convert) {
  mpt::force_scalar_conversions(state.range(0) == 1);
  state.SetLabel(mpt::conversion_isa());
  for (auto _ : state) {
    convert(data());
    benchmark::DoNotOptimize(data().bits.data());
    benchmark::ClobberMemory();
  }
  mpt::force_scalar_conversions(false);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kElements));
}

void BM_F32ToF16(benchmark::State& s) {
  run_conversion(s, [](ConversionData& d) { mpt::convert_f32_to_f16(d.f32.data(), d.bits.data(), kElements); });
}
void BM_F16ToF32(benchmark::State& s) {
  run_conversion(s, [](ConversionData& d) { mpt::convert_f16_to_f32(d.bits.data(), d.f32.data(), kElements); });
}
void BM_F32ToBf16(benchmark::State& s) {
  run_conversion(s, [](ConversionData& d) { mpt::convert_f32_to_bf16(d.f32.data(), d.bits.data(), kElements); });
}
void BM_F32ToF16Stochastic(benchmark::State& s) {
  run_conversion(s, [](ConversionData& d) {
    mpt::convert_f32_to_f16_stochastic(d.f32.data(), d.bits.data(), kElements, 12345, 0);
  });
}
void BM_F32ToBf16Stochastic(benchmark::State& s) {
  run_conversion(s, [](ConversionData& d) {
    mpt::convert_f32_to_bf16_stochastic(d.f32.data(), d.bits.data(), kElements, 12345, 0);
  });
}
BENCHMARK(BM_F32ToF16)->Arg(0)->Arg(1);
BENCHMARK(BM_F16ToF32)->Arg(0)->Arg(1);
BENCHMARK(BM_F32ToBf16)->Arg(0)->Arg(1);
BENCHMARK(BM_F32ToF16Stochastic)->Arg(0)->Arg(1);
BENCHMARK(BM_F32ToBf16Stochastic)->Arg(0)->Arg(1);

// range(0): input dtype (0 = f32, 1 = f16), range(1): partials_fp16.
void BM_Conv2dForward(benchmark::State& state) {
  const int64_t n = 32, c = 16, h = 14, w = 14, k = 32;
  int dtype = static_cast<int>(state.range(0));
  auto x = HostTensor::from_values({n, c, h, w}, mpt_test::random_values(n * c * h * w, -1, 1, 2), dtype, "x");
  auto wt = HostTensor::from_values({k, c, 3, 3}, mpt_test::random_values(k * c * 9, -1, 1, 3), dtype, "w");
  auto b = HostTensor::from_values({k}, mpt_test::random_values(k, -1, 1, 4), dtype, "b");
  HostTensor y({n, k, h, w}, dtype, "y");
  mpt_test::Scalars s{{"stride", 1}, {"padding", 1}, {"partials_fp16", static_cast<double>(state.range(1))}};
  for (auto _ : state)
    if (mpt_test::launch("conv2d_forward", {&x, &wt, &b}, {&y}, s) != MPT_OK) state.SkipWithError(mpt_last_error());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n * k * h * w * c * 9);  // multiply-adds
}
BENCHMARK(BM_Conv2dForward)->Args({0, 0})->Args({1, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearForward(benchmark::State& state) {
  const int64_t n = 64, in = 784, out = 256;
  int dtype = static_cast<int>(state.range(0));
  auto x = HostTensor::from_values({n, in}, mpt_test::random_values(n * in, -1, 1, 5), dtype, "x");
  auto w = HostTensor::from_values({out, in}, mpt_test::random_values(out * in, -1, 1, 6), dtype, "w");
  auto b = HostTensor::from_values({out}, mpt_test::random_values(out, -1, 1, 7), dtype, "b");
  HostTensor y({n, out}, dtype, "y");
  mpt_test::Scalars s{{"partials_fp16", static_cast<double>(state.range(1))}};
  for (auto _ : state)
    if (mpt_test::launch("linear_forward", {&x, &w, &b}, {&y}, s) != MPT_OK) state.SkipWithError(mpt_last_error());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n * in * out);
}
BENCHMARK(BM_LinearForward)->Args({0, 0})->Args({1, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
