// Names, sizes and promotion of the element types of the kernel ABI.
#include "dtype.h"

namespace mptrain {

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case MPT_DTYPE_F32: return "fp32";
    case MPT_DTYPE_F16: return "fp16";
    case MPT_DTYPE_BF16: return "bf16";
    case MPT_DTYPE_I32: return "i32";
    case MPT_DTYPE_I64: return "i64";
    case MPT_DTYPE_U8: return "u8";
    case MPT_DTYPE_F64: return "fp64";
    case MPT_DTYPE_E4M3: return "fp8-e4m3";
    case MPT_DTYPE_E5M2: return "fp8-e5m2";
    case MPT_DTYPE_E4M3FNUZ: return "fp8-e4m3fnuz";
    case MPT_DTYPE_E5M2FNUZ: return "fp8-e5m2fnuz";
    case MPT_DTYPE_E8M0: return "e8m0";
    case MPT_DTYPE_E2M1: return "fp4-e2m1";
  }
  return "dtype" + std::to_string(static_cast<int>(dtype));
}

std::optional<DType> parse_float_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32" || text == "float") return MPT_DTYPE_F32;
  if (text == "fp16" || text == "float16" || text == "half") return MPT_DTYPE_F16;
  if (text == "bf16" || text == "bfloat16") return MPT_DTYPE_BF16;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  const std::size_t bytes = mpt_dtype_bytes(dtype);
  return bytes != 0 ? bytes : 4;
}

bool is_float_dtype(DType dtype) {
  return dtype == MPT_DTYPE_F32 || dtype == MPT_DTYPE_F16 || dtype == MPT_DTYPE_BF16 ||
         dtype == MPT_DTYPE_F64;
}

DType widest(DType a, DType b) {
  if (a == b) return a;
  if (a == MPT_DTYPE_F64 || b == MPT_DTYPE_F64) return MPT_DTYPE_F64;
  return MPT_DTYPE_F32;  // fp32 with anything narrower, or fp16 with bf16
}

}  // namespace mptrain
