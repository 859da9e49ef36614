/* Device scratch for the CUDA kernels (column buffers, fp32 accumulators, widened copies), from
 * the library's own allocation call: mpt_alloc(..., MPT_CAT_WORKSPACE, "<kernel>.scratch"), so a
 * tool that interposes the allocation calls sees every byte the device kernels hold, as it does
 * for the CPU kernels' scratch (src/scratch.h).
 *
 * mpt_alloc of device memory is cudaMalloc, which synchronises; a trainer launches thousands of
 * kernels a step, so blocks are kept in a small per-thread cache and reused. A block remembers the
 * stream it was last used on and is reused only on that stream: work queued on one stream runs in
 * order, so the next launch there cannot touch the block before the previous one is done with it.
 */
#ifndef MPT_CUDA_DEVICE_SCRATCH_H
#define MPT_CUDA_DEVICE_SCRATCH_H

#include <cstddef>

#if defined(MPT_HOST_EMULATION)
#include "host_emulation.h"
#else
#include <cuda_runtime.h>
#endif

namespace mpt::cuda::detail {

/* While one lives, scratch allocated on this thread is named after `kernel` (launch() opens one). */
class ScratchKernelScope {
 public:
  explicit ScratchKernelScope(const char* kernel);
  ~ScratchKernelScope();
  ScratchKernelScope(const ScratchKernelScope&) = delete;
  ScratchKernelScope& operator=(const ScratchKernelScope&) = delete;

 private:
  const char* previous_;
};

/* One scratch block for work queued on `stream`, handed back to the thread's cache when destroyed
 * (the work queued on the stream before then may still read it; later work on the same stream is
 * ordered after it). */
class Scratch {
 public:
  explicit Scratch(cudaStream_t stream) : stream_(stream) {}
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  /* At least `bytes` bytes (contents unspecified); a second call may return a different block. */
  cudaError_t get(size_t bytes, void** out);

 private:
  void release();
  cudaStream_t stream_;
  void* memory_ = nullptr;
  size_t capacity_ = 0;
};

/* Frees this thread's cached blocks (they are freed anyway when the thread ends). */
void drop_scratch_cache();

}  // namespace mpt::cuda::detail

#endif
