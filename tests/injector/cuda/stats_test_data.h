// Tensors for the GPU statistics tests: random normal values at several scales mixed with the
// values the statistics treat specially (signed zeros, subnormals of the source format, NaN with
// payloads, infinities, the largest finite value, values at the cast thresholds of fp16, bf16 and
// the fp8 formats), stored in the element type under test; and a field-by-field comparison.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fpscope/tensor_stats.h"

namespace fpscope_gpu_test {

/* n elements of `type` as raw bytes; `nonfinite_at` lists indices forced to NaN/+Inf/-Inf. */
std::vector<uint8_t> make_tensor(fpscope::ElementType type, size_t n, std::mt19937& rng,
                                 const std::vector<size_t>& nonfinite_at = {});

/* "" when a and b agree: every count, extreme, bin and cast count exactly (NaN equals NaN), mean
 * and rms within 1e-12 relative to rms (the sums are compensated but ordered differently). */
std::string compare_stats(const fpscope::TensorStats& a, const fpscope::TensorStats& b);

inline const char* type_name(fpscope::ElementType t) {
  return t == fpscope::ElementType::F32 ? "f32" : t == fpscope::ElementType::F16 ? "f16" : "bf16";
}

}  // namespace fpscope_gpu_test
