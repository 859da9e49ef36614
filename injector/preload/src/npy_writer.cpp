// The .npy writer (see npy_writer.h). Format: NumPy's "NEP 1" description of .npy version 1.0.
#include "npy_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mpt/abi.h"

namespace fpscope::inject {
namespace {

bool write_all(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

const char* npy_descr(int32_t dtype) {
  switch (dtype) {
    case MPT_DTYPE_F32: return "<f4";
    case MPT_DTYPE_F16: return "<f2";
    case MPT_DTYPE_BF16: return "<u2";
    case MPT_DTYPE_I32: return "<i4";
    case MPT_DTYPE_I64: return "<i8";
    case MPT_DTYPE_U8: return "|u1";
    case MPT_DTYPE_F64: return "<f8";
    // NumPy has no 8-bit floats: their bits, as for bf16 (ml_dtypes' types view them as values).
    case MPT_DTYPE_E4M3:
    case MPT_DTYPE_E5M2:
    case MPT_DTYPE_E4M3FNUZ:
    case MPT_DTYPE_E5M2FNUZ:
    case MPT_DTYPE_E8M0:
    case MPT_DTYPE_E2M1: return "|u1";
    default: return nullptr;
  }
}

std::string npy_header(const char* descr, const int64_t* shape, int ndim) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (int d = 0; d < ndim; ++d) dict += std::to_string(shape[d]) + (ndim == 1 ? ",)" : d + 1 < ndim ? ", " : ")");
  if (ndim == 0) dict += ")";
  dict += ", }";
  constexpr size_t kPrefix = 10;  // magic (6), version (2), header length (2)
  const size_t unpadded = kPrefix + dict.size() + 1;  // + the closing newline
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  const auto len = static_cast<uint16_t>(dict.size());
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(len & 0xff);
  header += static_cast<char>(len >> 8);
  return header + dict;
}

bool write_npy(const std::string& path, const char* descr, const int64_t* shape, int ndim,
               const void* data, size_t bytes, std::string* error) {
  const std::string header = npy_header(descr, shape, ndim);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = write_all(fd, header.data(), header.size()) && write_all(fd, data, bytes);
  const int saved = errno;
  if (::close(fd) != 0 || !ok) {
    *error = "cannot write " + path + ": " + std::strerror(ok ? errno : saved);
    return false;
  }
  return true;
}

}  // namespace fpscope::inject
