// Speed of compute_stats() per core against a plain read of the same bytes.
//
//   stats_benchmark [--benchmark_filter=...]
//
// For each element type (fp32, fp16, bf16; fp64 with the scalar kernel, the one it takes), level
// (Basic, Full) and kernel, on a tensor larger than the last-level cache (64 MiB) and one that fits
// in L2 (1 MiB): elements/s and bytes/s, plus
// `GBps` (bytes per second of this thread's CPU time), `read_GBps` (the best of several plain
// vectorized reads, XOR of every byte, of the same buffer, timed the same way just before) and
// `vs_read`, their ratio. CPU time, not wall time: the machine may be shared. BM_Recipes times the
// fp8 recipe forecast against the full statistics of the same tensor; BM_UpdateSums a parameter's
// update counted from its copy; BM_MaskedScores the statistics of causally masked attention scores
// (-inf above each 64 x 64 matrix's diagonal) against those of the same values unmasked;
// BM_SmallTensors the time of one call on the small tensors a training step has many of (biases,
// norms' weights, an optimizer's per-parameter operations), where what a call costs besides its
// elements shows.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <vector>

#include "fpscope/update_sums.h"
#include "kernels.h"

namespace {

using fpscope::ElementType;
using fpscope::StatsLevel;
using fpscope::stats::Kernel;

constexpr std::size_t kLargeBytes = std::size_t(64) << 20;
constexpr std::size_t kL2Bytes = std::size_t(1) << 20;

// Gaussian values over a few scales, with a sprinkling of zeros: a typical activation tensor.
__attribute__((target("f16c"))) std::vector<unsigned char> make_tensor(ElementType type,
                                                                       std::size_t bytes) {
  const std::size_t n = bytes / fpscope::element_bytes(type);
  std::vector<unsigned char> out(bytes);
  std::mt19937 rng(42);
  std::normal_distribution<float> gauss;
  if (fpscope::is_byte_type(type)) {
    // e4m3 as a scaled cast leaves it: patterns spread around 1.0 (0x38) over a few binades.
    for (std::size_t i = 0; i < n; ++i) {
      const int pattern = std::clamp(0x38 + int(std::lround(gauss(rng) * 8.0f)), 0, 0x7E);
      out[i] = (i % 7 == 0) ? 0 : uint8_t(pattern | ((rng() & 1) << 7));
    }
    return out;
  }
  for (std::size_t i = 0; i < n; ++i) {
    float v = (i % 7 == 0) ? 0.0f : gauss(rng) * ((i % 3 == 0) ? 0.01f : 1.0f);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (type == ElementType::F64) {
      const double d = v;
      std::memcpy(&out[8 * i], &d, 8);
    } else if (type == ElementType::F32) {
      std::memcpy(&out[4 * i], &bits, 4);
    } else {
      uint16_t half;
      if (type == ElementType::BF16) {
        half = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
      } else {
        half = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
      }
      std::memcpy(&out[2 * i], &half, 2);
    }
  }
  return out;
}

const std::vector<unsigned char>& tensor(ElementType type, std::size_t bytes) {
  static std::map<std::pair<int, std::size_t>, std::vector<unsigned char>> cache;
  auto& t = cache[{int(type), bytes}];
  if (t.empty()) t = make_tensor(type, bytes);
  return t;
}

// The plain read: XOR of all 64-byte lines, four independent chains.
__attribute__((target("avx2"))) uint64_t read_all(const unsigned char* p, std::size_t bytes) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (std::size_t i = 0; i + 128 <= bytes; i += 128) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_xor_si256(
          acc[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * k)));
    }
  }
  const __m256i x =
      _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
  return uint64_t(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

// CPU time of this thread: the machine may be shared, so rates are per core busy, not wall time.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best-of-N bytes/s of the plain read over `bytes` bytes.
double read_rate(const unsigned char* p, std::size_t bytes) {
  double best = 0;
  const int reps = bytes > kL2Bytes ? 8 : 200;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_seconds();
    benchmark::DoNotOptimize(read_all(p, bytes));
    const double s = thread_seconds() - t0;
    best = std::max(best, double(bytes) / s);
  }
  return best;
}

void BM_PlainRead(benchmark::State& state) {
  const auto& t = tensor(ElementType::F32, std::size_t(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(read_all(t.data(), t.size()));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(t.size()));
}

void BM_Stats(benchmark::State& state) {
  const auto type = ElementType(state.range(0));
  const auto level = StatsLevel(state.range(1));
  const auto kernel = Kernel(state.range(2));
  const std::size_t bytes = std::size_t(state.range(3));
  if (!fpscope::stats::kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const auto& t = tensor(type, bytes);
  const std::size_t n = bytes / fpscope::element_bytes(type);
  const double read = read_rate(t.data(), bytes);
  fpscope::TensorStats s;
  const double t0 = thread_seconds();
  for (auto _ : state) {
    fpscope::stats::compute_stats_with(kernel, t.data(), type, n, level, &s);
    benchmark::DoNotOptimize(s);
  }
  const double rate = double(bytes) * double(state.iterations()) / (thread_seconds() - t0);
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["GBps"] = rate / 1e9;
  state.counters["read_GBps"] = read / 1e9;
  state.counters["vs_read"] = rate / read;
}

// The fp8 recipe forecast (compute_recipes) over the same tensors, viewed as rows of 4096 values
// (an activation) or as a weight's 2D tiles, with each of its kernels; beside
// it `vs_full_stats`: its time per element over the full statistics' with the best kernel, measured
// just before on the same buffer.
void BM_Recipes(benchmark::State& state) {
  const auto type = ElementType(state.range(0));
  const auto kernel = fpscope::stats::RecipeKernel(state.range(1));
  const bool weight = state.range(2) != 0;
  if (!fpscope::stats::recipe_kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const std::size_t bytes = std::size_t(state.range(3));
  const auto& t = tensor(type, bytes);
  const std::size_t n = bytes / fpscope::element_bytes(type);
  fpscope::TensorStats s;
  double stats_seconds = 1e30;
  for (int r = 0; r < (bytes > kL2Bytes ? 3 : 50); ++r) {
    const double t0 = thread_seconds();
    fpscope::stats::compute_stats_with(fpscope::stats::best_kernel(), t.data(), type, n, StatsLevel::Full, &s);
    stats_seconds = std::min(stats_seconds, thread_seconds() - t0);
  }
  fpscope::RecipeRequest q;
  q.cols = 4096;
  q.rows = n / q.cols;
  q.weight = weight;
  q.history_amax.fill(1.0);
  fpscope::RecipeResult out;
  const double t0 = thread_seconds();
  for (auto _ : state) {
    fpscope::stats::compute_recipes_with(kernel, t.data(), type, q, &out);
    benchmark::DoNotOptimize(out);
  }
  const double per_call = (thread_seconds() - t0) / double(state.iterations());
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(q.rows * q.cols));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["ns_per_element"] = 1e9 * per_call / double(q.rows * q.cols);
  state.counters["vs_full_stats"] = per_call / stats_seconds;
}

// A parameter's optimizer step counted from its copy (fpscope/update_sums.h): the copy before the
// step (snapshot_update) and the pass after it (update_sums), each in ns per element, over a
// parameter whose every element moved a little and whose gradient is nonzero on two thirds.
void BM_UpdateSums(benchmark::State& state) {
  const auto type = ElementType(state.range(0));
  const std::size_t n = std::size_t(state.range(1));
  const auto& before = tensor(type, n * fpscope::element_bytes(type));
  std::vector<uint8_t> after(before.begin(), before.end()), grad(before.size()), old(before.size()), nonzero(n);
  for (std::size_t i = 0; i < after.size(); i += fpscope::element_bytes(type)) after[i] ^= 1;  // the lowest bit
  for (std::size_t i = 0; i < grad.size(); i += 3 * fpscope::element_bytes(type)) grad[i] = 1;
  double snapshot_seconds = 0, sums_seconds = 0;
  for (auto _ : state) {
    const double t0 = thread_seconds();
    fpscope::snapshot_update(type, before.data(), grad.data(), n, old.data(), nonzero.data());
    const double t1 = thread_seconds();
    benchmark::DoNotOptimize(fpscope::update_sums(type, old.data(), after.data(), nonzero.data(), n));
    sums_seconds += thread_seconds() - t1;
    snapshot_seconds += t1 - t0;
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
  state.counters["snapshot_ns_per_element"] = 1e9 * snapshot_seconds / double(state.iterations()) / double(n);
  state.counters["sums_ns_per_element"] = 1e9 * sums_seconds / double(state.iterations()) / double(n);
}

// Attention scores as a causal mask leaves them: the tensor's values seen as 64 x 64 matrices,
// -inf above each one's diagonal (every row but the last of each matrix holds one), the statistics
// of the whole at the Full level with kernel `kernel`; `vs_unmasked`, the time per element over the
// same kernel's on the values before masking, measured just before.
void BM_MaskedScores(benchmark::State& state) {
  const auto type = ElementType(state.range(0));
  const auto kernel = Kernel(state.range(1));
  if (!fpscope::stats::kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const auto& plain = tensor(type, kL2Bytes);
  const std::size_t width = fpscope::element_bytes(type);
  const std::size_t n = kL2Bytes / width;
  std::vector<unsigned char> masked(plain);
  const uint32_t minus_inf = type == ElementType::F32 ? 0xFF800000u : type == ElementType::F16 ? 0xFC00u : 0xFF80u;
  for (std::size_t i = 0; i < n; ++i)
    if (i % 64 > (i / 64) % 64) std::memcpy(&masked[i * width], &minus_inf, width);  // column > row
  fpscope::TensorStats s;
  double plain_seconds = 1e30;
  for (int r = 0; r < 50; ++r) {
    const double t0 = thread_seconds();
    fpscope::stats::compute_stats_with(kernel, plain.data(), type, n, StatsLevel::Full, &s);
    plain_seconds = std::min(plain_seconds, thread_seconds() - t0);
  }
  const double t0 = thread_seconds();
  for (auto _ : state) {
    fpscope::stats::compute_stats_with(kernel, masked.data(), type, n, StatsLevel::Full, &s);
    benchmark::DoNotOptimize(s);
  }
  const double per_call = (thread_seconds() - t0) / double(state.iterations());
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
  state.counters["ns_per_element"] = 1e9 * per_call / double(n);
  state.counters["vs_unmasked"] = per_call / plain_seconds;
}

// One call of compute_stats() at the Full level with the best kernel on the first `elements` values
// of the tensor (in cache): ns per call and per element.
void BM_SmallTensors(benchmark::State& state) {
  const auto type = ElementType(state.range(0));
  const std::size_t n = std::size_t(state.range(1));
  const auto& t = tensor(type, kL2Bytes);
  fpscope::TensorStats s;
  const double t0 = thread_seconds();
  for (auto _ : state) {
    fpscope::stats::compute_stats_with(fpscope::stats::best_kernel(), t.data(), type, n, StatsLevel::Full, &s);
    benchmark::DoNotOptimize(s);
  }
  const double per_call = (thread_seconds() - t0) / double(state.iterations());
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
  state.counters["ns_per_call"] = 1e9 * per_call;
  state.counters["ns_per_element"] = 1e9 * per_call / double(n);
}

void stats_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "full", "kernel", "bytes"});
  for (int64_t bytes : {int64_t(kLargeBytes), int64_t(kL2Bytes)})
    for (int type : {0, 1, 2, 6, 7})
      for (int level : {0, 1})
        for (Kernel kernel : {Kernel::Avx512Gfni, Kernel::Avx512, Kernel::Avx2, Kernel::Scalar})
          // fp64 always takes the scalar kernel, and the 8-bit formats none (one row for them)
          if ((type != int(ElementType::F64) && type != int(ElementType::E4M3)) || kernel == Kernel::Scalar)
            b->Args({type, level, int64_t(kernel), bytes});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_PlainRead)
    ->Arg(int64_t(kLargeBytes))
    ->Arg(int64_t(kL2Bytes))
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Stats)->Apply(stats_args);
BENCHMARK(BM_UpdateSums)
    ->ArgNames({"type", "elements"})
    ->ArgsProduct({{0, 1, 2, 6}, {97200, 1 << 24}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskedScores)
    ->ArgNames({"type", "kernel"})  // kernel: 1 AVX2, 2 AVX-512, 3 AVX-512 with GFNI
    ->ArgsProduct({{0, 1, 2}, {3, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmallTensors)
    ->ArgNames({"type", "elements"})
    ->ArgsProduct({{0, 2}, {64, 256, 1024, 4096, 16384}});
BENCHMARK(BM_Recipes)
    ->ArgNames({"type", "kernel", "weight", "bytes"})  // kernel: 0 portable, 1 AVX2, 2 AVX-512
    ->ArgsProduct({{0, 1, 2}, {2, 1, 0}, {0, 1}, {int64_t(kLargeBytes), int64_t(kL2Bytes)}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
