// The host half of the GPU statistics: the StatsParams a reduction needs for a source format
// (read from fpscope_stats' constexpr tables), and the conversion of a finished reduction into
// fpscope::TensorStats through fpscope_stats' own finalize(), so derived numbers (cast outcomes,
// decoded extremes, mean, rms) are computed by exactly the CPU's code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/tensor_stats.h"
#include "stats_element.h"

namespace fpscope::gpu {

StatsParams stats_params(ElementType type, StatsLevel level);

/* `hist` has kHistBins entries (ignored at the Basic level). */
void partial_to_stats(const GpuPartial& total, const uint64_t* hist, uint64_t count,
                      ElementType type, StatsLevel level, TensorStats* out);

/* The whole reduction run on the host, one element at a time through the device rules: what the
 * GPU computes, for tests that have no GPU. */
void host_reduction(const void* data, ElementType type, size_t n, StatsLevel level,
                    TensorStats* out);

}  // namespace fpscope::gpu
