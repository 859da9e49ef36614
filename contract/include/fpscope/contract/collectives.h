// Collective kernels: launches that combine a tensor over the ranks of a multi-process run.
//
// Part of the trace contract (see contract.h). A collective's output can hold a NaN/Inf its own
// inputs did not: another rank's input held it (it was handed over), or the combination itself
// made it (an fp16 sum beyond 65504). One process cannot tell which; the trace can. When a trace is
// finished, a non-finite output of a collective made "from finite inputs" keeps origin = 1 only if
// the same collective (the same kernel's n-th launch on every rank: all ranks launch collectives in
// one order) had finite inputs on every rank; otherwise it becomes origin = 0, received.
#pragma once

#include <string_view>

namespace fpscope::contract {

// mptrain's all-reduce (docs/kernels.md).
inline constexpr std::string_view kCollectiveKernels[] = {"allreduce_sum"};

constexpr bool is_collective_kernel(std::string_view kernel) {
  for (std::string_view k : kCollectiveKernels)
    if (k == kernel) return true;
  return false;
}

}  // namespace fpscope::contract
