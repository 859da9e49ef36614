// Tests of the .npy writer: NumPy (the independent reference) reads each file back with the
// dtype, shape and bytes that were written.
#include "npy_writer.h"

#include <gtest/gtest.h>

#include "temp_path.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mpt/abi.h"

namespace fpscope::inject {
namespace {

// What numpy makes of a file: "<dtype.str> <shape> <data offset % 64> <bytes in hex>".
std::string numpy_view(const std::string& path) {
  const std::string cmd = std::string(FPSCOPE_REFERENCE_PYTHON) +
                          " -c \"import sys, numpy as np\n"
                          "f = open(sys.argv[1], 'rb')\n"
                          "v = np.lib.format.read_magic(f)\n"
                          "np.lib.format.read_array_header_1_0(f)\n"
                          "off = f.tell()\n"
                          "a = np.load(sys.argv[1])\n"
                          "print(a.dtype.str, list(a.shape), off % 64, v, a.tobytes().hex())\" " + path;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  while (pipe && fgets(buf, sizeof buf, pipe.get())) out += buf;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string hex_of(const void* data, size_t bytes) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < bytes; ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(data)[i]);
    s += b;
  }
  return s;
}

class NpyWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
  }

  std::string write(const char* name, int32_t dtype, std::vector<int64_t> shape, const void* data,
                    size_t bytes) {
    const std::string path = (dir_ / name).string();
    std::string error;
    EXPECT_TRUE(write_npy(path, npy_descr(dtype), shape.data(), static_cast<int>(shape.size()), data,
                          bytes, &error))
        << error;
    return path;
  }
  fpscope::test::TempDir temp_{"fpscope-npy-test"};  // one folder per test (gtest makes a fixture per test)
  std::filesystem::path dir_;
};

TEST_F(NpyWriter, Float32Matrix) {
  const std::array<float, 6> v{1.5f, -2.0f, 0.0f, 3.25e-39f, 1e30f, -0.0f};
  const auto path = write("a.npy", MPT_DTYPE_F32, {2, 3}, v.data(), sizeof v);
  EXPECT_EQ(numpy_view(path), "<f4 [2, 3] 0 (1, 0) " + hex_of(v.data(), sizeof v));
}

TEST_F(NpyWriter, Float16Vector) {
  const std::array<uint16_t, 5> v{0x3c00, 0xc000, 0x7c00, 0x7e00, 0x0001};  // 1, -2, inf, nan, tiny
  const auto path = write("b.npy", MPT_DTYPE_F16, {5}, v.data(), sizeof v);
  EXPECT_EQ(numpy_view(path), "<f2 [5] 0 (1, 0) " + hex_of(v.data(), sizeof v));
}

TEST_F(NpyWriter, Bfloat16IsStoredAsRawBits) {
  const std::array<uint16_t, 4> v{0x3f80, 0xbf80, 0x7f80, 0x0001};
  const auto path = write("c.npy", MPT_DTYPE_BF16, {1, 2, 2}, v.data(), sizeof v);
  EXPECT_EQ(numpy_view(path), "<u2 [1, 2, 2] 0 (1, 0) " + hex_of(v.data(), sizeof v));
}

TEST_F(NpyWriter, IntegerAndHighRankShapes) {
  std::vector<int32_t> v(2 * 3 * 1 * 2 * 1 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i) - 7;
  const auto path = write("d.npy", MPT_DTYPE_I32, {2, 3, 1, 2, 1, 2}, v.data(), v.size() * 4);
  EXPECT_EQ(numpy_view(path), "<i4 [2, 3, 1, 2, 1, 2] 0 (1, 0) " + hex_of(v.data(), v.size() * 4));
}

TEST_F(NpyWriter, HeaderIsPaddedToSixtyFourBytes) {
  const int64_t shape[] = {64, 5, 26, 26};
  const std::string h = npy_header("<f4", shape, 4);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(h.find("'shape': (64, 5, 26, 26), }"), std::string::npos);
  const int64_t one[] = {7};
  EXPECT_NE(npy_header("<f2", one, 1).find("'shape': (7,), }"), std::string::npos);
  EXPECT_NE(npy_header("<f2", one, 0).find("'shape': (), }"), std::string::npos);
}

TEST_F(NpyWriter, UnwritablePathIsAnError) {
  const float x = 1;
  const int64_t shape[] = {1};
  std::string error;
  EXPECT_FALSE(write_npy((dir_ / "missing" / "x.npy").string(), "<f4", shape, 1, &x, 4, &error));
  EXPECT_NE(error.find("cannot create"), std::string::npos);
}

}  // namespace
}  // namespace fpscope::inject
