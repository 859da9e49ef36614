// IDX parsing over zlib's gzread: the whole file is inflated into memory, then the header is
// checked against the byte count so a truncated download is caught before training starts.
#include "idx_file.h"

#include "errors.h"

#include <fmt/format.h>
#include <zlib.h>

#include <filesystem>

namespace mptrain {

std::string dataset_hint() {
  return "install the dataset-fashion-mnist package or pass --data-dir";
}

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw DataError(fmt::format("{}: {}; {}", path, what, dataset_hint()));
}

std::vector<uint8_t> inflate_file(const std::string& path) {
  if (!std::filesystem::exists(path)) fail(path, "file not found");
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) fail(path, "cannot open");
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int got = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      fail(path, "corrupt gzip data (" + message + ")");
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  // gzread stops quietly at a truncated stream; gzclose_r reports it as a buffer error.
  if (gzclose_r(file) != Z_OK) fail(path, "truncated or corrupt gzip stream");
  return bytes;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx_gz(const std::string& path, int expected_ndim) {
  std::vector<uint8_t> bytes = inflate_file(path);
  if (bytes.size() < 4) fail(path, "too short for an IDX header");
  uint32_t magic = big_endian_u32(bytes.data());
  uint32_t expected_magic = 0x0800u | static_cast<uint32_t>(expected_ndim);
  if (magic != expected_magic) {
    fail(path, fmt::format("bad magic number 0x{:08X} (expected 0x{:08X}, unsigned bytes in {} "
                           "dimensions)", magic, expected_magic, expected_ndim));
  }
  std::size_t header = 4 + 4 * static_cast<std::size_t>(expected_ndim);
  if (bytes.size() < header) fail(path, "truncated IDX header");
  IdxArray array;
  uint64_t count = 1;
  for (int d = 0; d < expected_ndim; ++d) {
    array.dims.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
    count *= array.dims.back();
  }
  if (bytes.size() - header != count) {
    fail(path, fmt::format("holds {} data bytes but its header announces {}", bytes.size() - header,
                           count));
  }
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace mptrain
