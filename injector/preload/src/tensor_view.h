// Small facts about the kernel library's tensors that the launch path needs: which ones can be
// measured on the host, how many elements they hold, whether two of them share memory, and cheap
// finiteness scans (used for a launch's inputs when only its outputs are measured).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "fpscope/tensor_stats.h"
#include "fpscope/contract/wire.h"
#include "mpt/abi.h"

namespace fpscope::inject {

// f32, f16, bf16 and f64 map to an ElementType; every other dtype has none.
std::optional<ElementType> float_type(int32_t dtype);
size_t dtype_bytes(int32_t dtype);
uint64_t element_count(const mpt_tensor& t);
// A host tensor of a floating dtype whose data can be read.
bool measurable_on_host(const mpt_tensor& t);
// The tensors' bytes overlap (an in-place kernel lists one buffer as input and output).
bool overlaps(const mpt_tensor& a, const mpt_tensor& b);

// No NaN and no Inf among the n values.
bool all_finite(const void* data, ElementType type, size_t n);
// Index of the first NaN (want_nan) or first +-Inf (!want_nan), -1 if none.
int64_t first_of_kind(const void* data, ElementType type, size_t n, bool want_nan);
// Bit pattern of element i, zero-extended.
uint64_t element_bits(const void* data, ElementType type, size_t i);
// Kind of a non-finite bit pattern.
wire::NonfiniteKind nonfinite_kind(ElementType type, uint64_t bits);
// "NaN", "+Inf", "-Inf".
const char* nonfinite_word(wire::NonfiniteKind kind);

}  // namespace fpscope::inject
