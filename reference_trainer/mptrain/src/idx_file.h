// Reads the gzip-compressed IDX files FashionMNIST ships in (train-images-idx3-ubyte.gz, ...):
// a big-endian header (magic 0x0000080D with D dimensions, then D sizes) followed by unsigned
// bytes. Every failure is a DataError naming the file and how to get a good one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mptrain {

struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> values; // product(dims) bytes, row-major
};

// `expected_ndim` is 3 for images and 1 for labels.
IdxArray read_idx_gz(const std::string& path, int expected_ndim);

// The hint every dataset error ends with.
std::string dataset_hint();

}  // namespace mptrain
