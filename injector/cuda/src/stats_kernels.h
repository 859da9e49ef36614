// The GPU reduction behind fpscope_gpu_api::submit(): host-callable launchers of the kernels in
// stats_kernels.cu.
#pragma once

#include <cstddef>

#if defined(MPT_HOST_EMULATION)
/* Tests run the kernels on the host through this shim (tests/reference_trainer/cuda/emulation). */
#include "host_emulation.h"
#define FPSCOPE_LAUNCH(kernel, blocks, threads, stream) ::mpt_emulation::launcher(kernel, blocks, threads, stream)
#else
#include <cuda_runtime.h>
#define FPSCOPE_LAUNCH(kernel, blocks, threads, stream) kernel<<<(blocks), (threads), 0, (stream)>>>
#endif

#include "stats_element.h"

namespace fpscope::gpu {

/* What one reduction leaves in device memory, and what is copied back to pinned host memory. */
struct StatsResult {
  GpuPartial total;
  uint64_t hist[kHistBins];
};

inline constexpr int kScanThreads = 256;
inline constexpr int kMaxScanBlocks = 512;
/* The most elements one scan takes: a block's histogram and a thread's counts are 32-bit, so a
 * block must see fewer than 2^32 elements (about 2^41 in all, far beyond any device's memory). A
 * block sees at most n / blocks elements plus one round of words (kScanThreads x 8 elements) plus
 * the last partial word's 7: the margin below covers both. */
inline constexpr uint64_t kMaxScanElements = uint64_t{kMaxScanBlocks} * ((uint64_t{1} << 32) - 16 * kScanThreads);

/* Blocks the scan uses for n elements (the partials buffer must hold this many). */
int scan_blocks(size_t n);

/* Queues the scan of n elements at `data` into `partials` (scan_blocks(n) entries), then the
 * combine into `result` (its histogram zeroed first), then nothing else: the caller copies
 * `result` back and records an event. cudaErrorInvalidValue for more than kMaxScanElements. */
cudaError_t queue_reduction(const void* data, size_t n, const StatsParams& params,
                            GpuPartial* partials, StatsResult* result, cudaStream_t stream);

}  // namespace fpscope::gpu
