// Device side of the GPU tensor statistics: a one-pass scan in which every block reduces its
// grid-stride share of the tensor into a GpuPartial (its histogram counted in shared memory, then
// added to the result with integer atomics), and a one-block combine that merges the partials in
// block order, so the sums are the same on every run for a given device, size and alignment. No
// host synchronisation: both kernels are queued on the caller's stream.
#include "stats_kernels.h"

namespace fpscope::gpu {
namespace {

/* Sixteen bytes, loaded at once. */
struct alignas(16) Words {
  uint32_t x, y, z, w;
};

/* The partial of lane+offset, field by field (warp shuffles move 32- and 64-bit values). */
__device__ GpuPartial shuffle_down(const GpuPartial& p, int offset) {
  GpuPartial q;
  const unsigned all = 0xffffffffu;
  q.nan = __shfl_down_sync(all, p.nan, offset);
  q.pos_inf = __shfl_down_sync(all, p.pos_inf, offset);
  q.neg_inf = __shfl_down_sync(all, p.neg_inf, offset);
  q.zero = __shfl_down_sync(all, p.zero, offset);
  q.subnormal = __shfl_down_sync(all, p.subnormal, offset);
  q.min_key = __shfl_down_sync(all, p.min_key, offset);
  q.max_key = __shfl_down_sync(all, p.max_key, offset);
  q.min_nonzero_abs = __shfl_down_sync(all, p.min_nonzero_abs, offset);
  q.first_nonfinite_bits = 0;
  q.sum_hi = __shfl_down_sync(all, p.sum_hi, offset);
  q.sum_lo = __shfl_down_sync(all, p.sum_lo, offset);
  q.squares_hi = __shfl_down_sync(all, p.squares_hi, offset);
  q.squares_lo = __shfl_down_sync(all, p.squares_lo, offset);
  q.first_nonfinite = __shfl_down_sync(all, p.first_nonfinite, offset);
  for (int t = 0; t < kMaxThresholds; ++t) q.at_least[t] = __shfl_down_sync(all, p.at_least[t], offset);
  return q;
}

/* Reduces the block's partials into thread 0's, warps first, then warp leaders in order. */
__device__ void block_merge(GpuPartial& p) {
  __shared__ GpuPartial warp_totals[kScanThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    GpuPartial other = shuffle_down(p, offset);
    merge(p, other);
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_totals[warp] = p;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) merge(p, warp_totals[w]);
  }
}

__device__ __forceinline__ uint32_t element_bits(const void* data, int bytes, uint64_t i) {
  return bytes == 4 ? static_cast<const uint32_t*>(data)[i]
                    : static_cast<uint32_t>(static_cast<const uint16_t*>(data)[i]);
}

/* Counts `bin` (-1: none) in the block's histogram with one shared atomic per distinct bin of the
 * warp: a tensor's values fall in few binades, so lanes that share a bin would otherwise queue on
 * one address. Every lane of the warp must call it. */
__device__ __forceinline__ void count_bin(uint32_t* bins, int bin) {
  unsigned peers = __match_any_sync(0xffffffffu, bin);
  if (bin >= 0 && static_cast<int>(threadIdx.x % 32) == __ffs(static_cast<int>(peers)) - 1) {
    atomicAdd(&bins[bin], static_cast<uint32_t>(__popc(static_cast<int>(peers))));
  }
}

/* Element j of a 16-byte word holding kBytes-wide elements. */
template <int kBytes>
__device__ __forceinline__ uint32_t word_element(const Words& w, int j) {
  uint32_t part = j * kBytes < 4 ? w.x : j * kBytes < 8 ? w.y : j * kBytes < 12 ? w.z : w.w;
  return kBytes == 4 ? part : (j % 2 ? part >> 16 : part & 0xffffu);
}

/* Each block reduces a grid-stride share of the tensor: 16-byte words when `data` is 16-byte
 * aligned (4 or 8 elements a load), the elements after the last whole word (or all of them, when
 * unaligned) one by one. Every loop's trip count is the same for the whole block, as count_bin()
 * and the block merge need. */
template <int kBytes>
__global__ void scan_kernel(const void* data, uint64_t n, StatsParams s, GpuPartial* partials,
                            StatsResult* result) {
  constexpr int kPerWord = 16 / kBytes;
  __shared__ uint32_t bins[kHistBins];
  if (s.full) {
    for (int i = threadIdx.x; i < kHistBins; i += blockDim.x) bins[i] = 0;
    __syncthreads();
  }
  ThreadTally p;
  partial_init(p);
  const uint64_t stride = static_cast<uint64_t>(blockDim.x) * gridDim.x;
  const uint64_t block_first = static_cast<uint64_t>(blockIdx.x) * blockDim.x;
  const bool aligned = reinterpret_cast<uintptr_t>(data) % 16 == 0;
  const uint64_t words = aligned ? n / kPerWord : 0;
  const Words* word_data = static_cast<const Words*>(data);
  for (uint64_t base = block_first; base < words; base += stride) {
    uint64_t w = base + threadIdx.x;
    Words word = w < words ? word_data[w] : Words{0, 0, 0, 0};
    FPSCOPE_UNROLL
    for (int j = 0; j < kPerWord; ++j) {
      int bin = w < words ? add_element(p, s, word_element<kBytes>(word, j), w * kPerWord + j) : -1;
      if (s.full) count_bin(bins, bin);
    }
  }
  for (uint64_t base = words * kPerWord + block_first; base < n; base += stride) {
    uint64_t i = base + threadIdx.x;
    int bin = i < n ? add_element(p, s, element_bits(data, kBytes, i), i) : -1;
    if (s.full) count_bin(bins, bin);
  }
  GpuPartial total = widen(p);
  block_merge(total);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
  if (s.full) {
    __syncthreads();
    for (int i = threadIdx.x; i < kHistBins; i += blockDim.x) {
      if (bins[i]) atomicAdd(reinterpret_cast<unsigned long long*>(&result->hist[i]),
                             static_cast<unsigned long long>(bins[i]));
    }
  }
}

/* One block: thread t merges partials t, t+256, ... in order, then the block merges the threads. */
__global__ void combine_kernel(const void* data, int bytes, const GpuPartial* partials, int count,
                               StatsResult* result) {
  GpuPartial p;
  partial_init(p);
  for (int i = threadIdx.x; i < count; i += blockDim.x) merge(p, partials[i]);
  block_merge(p);
  if (threadIdx.x == 0) {
    if (p.first_nonfinite != kNoIndex) p.first_nonfinite_bits = element_bits(data, bytes, p.first_nonfinite);
    result->total = p;
  }
}

}  // namespace

int scan_blocks(size_t n) {
  size_t per_block = static_cast<size_t>(kScanThreads) * 16;  // at least 16 elements a thread
  size_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > static_cast<size_t>(kMaxScanBlocks)) blocks = kMaxScanBlocks;
  return static_cast<int>(blocks);
}

cudaError_t queue_reduction(const void* data, size_t n, const StatsParams& params,
                            GpuPartial* partials, StatsResult* result, cudaStream_t stream) {
  if (n > kMaxScanElements) return cudaErrorInvalidValue;
  int blocks = scan_blocks(n);
  cudaError_t e = cudaMemsetAsync(result->hist, 0, sizeof(result->hist), stream);
  if (e != cudaSuccess) return e;
  if (params.bytes == 4) {
    FPSCOPE_LAUNCH(scan_kernel<4>, blocks, kScanThreads, stream)(data, n, params, partials, result);
  } else {
    FPSCOPE_LAUNCH(scan_kernel<2>, blocks, kScanThreads, stream)(data, n, params, partials, result);
  }
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  FPSCOPE_LAUNCH(combine_kernel, 1, kScanThreads, stream)(data, params.bytes, partials, blocks, result);
  return cudaGetLastError();
}

}  // namespace fpscope::gpu
