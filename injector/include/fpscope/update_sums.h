// One optimizer step of one parameter, counted from its values before and after the step
// (docs/statistics.md, "Parameter updates"), for a front end that sees the step only from outside:
// it keeps a copy of the parameter and where its gradient is nonzero before the step
// (snapshot_update), and compares the parameter with that copy after it (update_sums).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/tensor_stats.h"

namespace fpscope {

struct UpdateSums {
  uint64_t changed = 0;  // elements whose bits differ
  uint64_t nonzero = 0;  // elements whose gradient was nonzero (either sign of zero is zero)
  uint64_t lost = 0;     // of those, elements whose bits did not change
  // Over the elements where new - old, taken in double, is finite (both values finite, and their
  // difference within double's range): sum |new - old|, sum (new - old)^2 and sum old^2.
  double applied_abs_sum = 0, applied_sq_sum = 0, weight_sq_sum = 0;
};

// The types update_sums() compares: fp32, fp16, bf16 and fp64.
constexpr bool update_sums_supported(ElementType type) {
  return type == ElementType::F32 || type == ElementType::F16 || type == ElementType::BF16 ||
         type == ElementType::F64;
}

// Before the step: copies the `count` elements of `param` into `old` (count * element_bytes(type)
// bytes) and sets nonzero[i] to 1 where gradient element i is nonzero, else 0. `grad` has the
// parameter's type and count. The type is update_sums_supported().
void snapshot_update(ElementType type, const void* param, const void* grad, std::size_t count, void* old,
                     uint8_t* nonzero);

// After the step: the counts and sums of `now` against the copy `old` and the gradient's
// `nonzero` flags that snapshot_update() made. Each sum adds its terms in blocks of 4096 elements,
// in order over four interleaved partial sums within a block, and the blocks' sums with the
// statistics' compensated addition (TwoSum, as for a tensor's mean): as every term is
// nonnegative, each sum is within 2^-42 of the exact sum of the exact terms, relatively, however
// many elements there are, unless terms underflow (squares below double's smallest subnormal). A
// sum that overflows is +Inf.
UpdateSums update_sums(ElementType type, const void* old, const void* now, const uint8_t* nonzero,
                       std::size_t count);

}  // namespace fpscope
