// The loss scaler's kernels: the launches a tool reads loss-scale events off.
//
// Part of the trace contract (see contract.h). Both producers lay the update out the same way:
// inputs scale (f32, one value), growth tracker (i32, one value), found-inf flag (f32, one value);
// outputs scale and growth tracker, updated in place. mptrain's kernel is "amp_update_scale";
// PyTorch's GradScaler calls the operator "_amp_update_scale_", whose first three arguments and
// two written arguments are exactly these.
#pragma once

#include <string_view>

namespace fpscope::contract {

inline constexpr std::string_view kScaleUpdateKernels[] = {"amp_update_scale", "_amp_update_scale_"};

constexpr bool is_scale_update_kernel(std::string_view kernel) {
  for (std::string_view k : kScaleUpdateKernels)
    if (k == kernel) return true;
  return false;
}

}  // namespace fpscope::contract
