/* How the backend's elementwise and layer kernels cover a tensor: a grid-stride loop over n
 * elements with kThreads threads a block and at most 65535 blocks, so huge tensors reuse threads.
 * Shared by every .cu file of the backend (and by their host emulation in the tests). */
#pragma once

#include <cstdint>

namespace mpt::cuda::detail {

inline constexpr int kThreads = 256;

/* Enough blocks for a grid-stride loop over n elements, capped at 65535. */
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 65535) b = 65535;
  return static_cast<unsigned>(b);
}

}  // namespace mpt::cuda::detail

#define MPT_FOR_EACH(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
