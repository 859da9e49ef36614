// Element types as the trainer talks about them: names on the command line ("fp16", "bf16"),
// byte sizes, and the "widest type" rule used when an op mixes inputs of different precisions.
#pragma once

#include <mpt/abi.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mptrain {

using DType = mpt_dtype;

// "fp32", "fp16", "bf16", "i32", ...
std::string dtype_name(DType dtype);

// Parses "fp32" | "fp16" | "bf16" (also "float32", "float16", "bfloat16"); nullopt otherwise.
std::optional<DType> parse_float_dtype(std::string_view text);

std::size_t dtype_size(DType dtype);

bool is_float_dtype(DType dtype);

// The type both inputs can be cast to without losing range or precision. fp16 and bf16 each
// hold values the other cannot, so together they widen to fp32 (as torch.promote_types does).
DType widest(DType a, DType b);

}  // namespace mptrain
