// Writes a tensor as a NumPy .npy file (format version 1.0), the form --dump leaves tensors in.
//
// f32 is stored as '<f4' and f16 as '<f2'. NumPy has no bfloat16, so bf16 is stored as its raw
// bits, '<u2': (bits.astype('<u4') << 16).view('<f4') recovers the values exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fpscope::inject {

// The NumPy descr for an mpt_dtype ("<f4", "<f2", "<u2", ...), or null if there is none.
const char* npy_descr(int32_t dtype);

// The complete header: magic, version 1.0, length, and the dict padded with spaces and a newline
// so that the data starts at a multiple of 64 bytes.
std::string npy_header(const char* descr, const int64_t* shape, int ndim);

// Writes header and `bytes` of data to `path` (replacing it). On failure returns false with *error
// naming the file and the reason.
bool write_npy(const std::string& path, const char* descr, const int64_t* shape, int ndim,
               const void* data, size_t bytes, std::string* error);

}  // namespace fpscope::inject
