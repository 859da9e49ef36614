// Device time of the CUDA kernels, launched through mpt_launch() on device tensors and timed with
// CUDA events (manual time): the MLP's linear layer (N=256, 1024 -> 4096) in fp32, fp16 and bf16
// with fp32 partials and with the fp16-accumulator emulation, the CNN's first convolution at 128
// pixels, an elementwise kernel and AdamW. Without a GPU every benchmark reports "no GPU".
//   build/bin/cuda_kernels_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "mpt/abi.h"

namespace {

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

size_t element_size(int dtype) { return dtype == MPT_DTYPE_F32 || dtype == MPT_DTYPE_I32 ? 4 : 2; }

/* A device tensor filled with small values by the library's own `fill`. */
struct DeviceTensor {
  mpt_tensor t{};
  DeviceTensor(std::vector<int64_t> shape, int dtype, double value) {
    t.ndim = static_cast<int32_t>(shape.size());
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i) n *= (t.shape[i] = shape[i]);
    t.dtype = dtype;
    t.device = MPT_DEVICE_CUDA;
    t.name = "bench";
    t.data = mpt_alloc(static_cast<size_t>(n) * element_size(dtype), MPT_DEVICE_CUDA,
                       MPT_CAT_WORKSPACE, "bench", nullptr);
    mpt_scalar s{"value", value};
    mpt_launch_desc d{MPT_ABI_VERSION, 0, "fill", nullptr, 0, 1, &t, &s, 1, 0, nullptr, nullptr};
    if (t.data) mpt_launch(&d);
  }
  ~DeviceTensor() { mpt_free(t.data, MPT_DEVICE_CUDA); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
};

/* Times `launch` per iteration with CUDA events on the default stream. */
template <typename Launch>
void time_on_device(benchmark::State& state, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  if (launch() != MPT_OK) {  // warm-up: cuBLAS handles, memory pools
    state.SkipWithError(mpt_last_error());
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    int status = launch();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    if (status != MPT_OK) {
      state.SkipWithError(mpt_last_error());
      break;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

int launch(const char* kernel, std::vector<mpt_tensor> in, std::vector<mpt_tensor> out,
           std::vector<mpt_scalar> scalars) {
  mpt_launch_desc d{MPT_ABI_VERSION, 0, kernel, in.data(), static_cast<int32_t>(in.size()),
                    static_cast<int32_t>(out.size()), out.data(), scalars.data(),
                    static_cast<int32_t>(scalars.size()), 0, nullptr, nullptr};
  return mpt_launch(&d);
}

// range(0): dtype of x, w and y; range(1): partials_fp16.
void BM_LinearForward(benchmark::State& state) {
  if (!gpu_present()) return state.SkipWithError("no GPU");
  int dtype = static_cast<int>(state.range(0));
  const int64_t N = 256, I = 1024, O = 4096;
  DeviceTensor x({N, I}, dtype, 0.01), w({O, I}, dtype, 0.02), b({O}, dtype, 0.1), y({N, O}, dtype, 0);
  double fp16 = static_cast<double>(state.range(1));
  time_on_device(state, [&] {
    return launch("linear_forward", {x.t, w.t, b.t}, {y.t}, {{"partials_fp16", fp16}});
  });
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * N * I * O * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["TFLOP/s"].value /= 1e12;
}

// The CNN's conv1 at 128 pixels: x[64,1,128,128], w[5,1,3,3]; and conv2: [64,5,63,63] x [12,5,5,5].
void BM_ConvForward(benchmark::State& state) {
  if (!gpu_present()) return state.SkipWithError("no GPU");
  int dtype = static_cast<int>(state.range(0));
  bool second = state.range(1) != 0;
  int64_t C = second ? 5 : 1, H = second ? 63 : 128, K = second ? 12 : 5, R = second ? 5 : 3;
  int64_t P = H - R + 1;
  DeviceTensor x({64, C, H, H}, dtype, 0.5), w({K, C, R, R}, dtype, 0.1), b({K}, dtype, 0.0),
      y({64, K, P, P}, dtype, 0);
  time_on_device(state, [&] {
    return launch("conv2d_forward", {x.t, w.t, b.t}, {y.t},
                  {{"stride", 1}, {"padding", 0}, {"partials_fp16", 0}});
  });
}

void BM_ReluForward(benchmark::State& state) {
  if (!gpu_present()) return state.SkipWithError("no GPU");
  int dtype = static_cast<int>(state.range(0));
  const int64_t n = int64_t{1} << 24;
  DeviceTensor x({n}, dtype, -0.5), y({n}, dtype, 0);
  time_on_device(state, [&] { return launch("relu_forward", {x.t}, {y.t}, {}); });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 2 *
                          static_cast<int64_t>(element_size(dtype)));
}

void BM_AdamW(benchmark::State& state) {
  if (!gpu_present()) return state.SkipWithError("no GPU");
  bool stochastic = state.range(0) != 0;
  const int64_t n = int64_t{1} << 24;
  DeviceTensor p({n}, MPT_DTYPE_F16, 0.5), g({n}, MPT_DTYPE_F16, 0.01), m({n}, MPT_DTYPE_F32, 0),
      v({n}, MPT_DTYPE_F32, 0);
  time_on_device(state, [&] {
    return launch("adamw_step", {p.t, g.t, m.t, v.t}, {p.t, m.t, v.t},
                  {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"step", 1},
                   {"stochastic_rounding", stochastic ? 1.0 : 0.0}, {"seed", 1}});
  });
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
}

}  // namespace

BENCHMARK(BM_LinearForward)
    ->ArgNames({"dtype", "partials_fp16"})
    ->Args({MPT_DTYPE_F32, 0})->Args({MPT_DTYPE_F16, 0})->Args({MPT_DTYPE_BF16, 0})
    ->Args({MPT_DTYPE_F16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvForward)
    ->ArgNames({"dtype", "conv2"})
    ->Args({MPT_DTYPE_F32, 0})->Args({MPT_DTYPE_F16, 0})->Args({MPT_DTYPE_F32, 1})->Args({MPT_DTYPE_F16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluForward)->ArgName("dtype")->Arg(MPT_DTYPE_F32)->Arg(MPT_DTYPE_F16)
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdamW)->ArgName("stochastic_rounding")->Arg(0)->Arg(1)
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
