// Helpers of the CUDA kernel tests: a launch described by value (tensors with their bytes,
// scalars by name), run through the public ABI either on host tensors or on device tensors, and
// comparisons that report the first differing element.
#ifndef MPT_TESTS_CUDA_TEST_UTIL_H
#define MPT_TESTS_CUDA_TEST_UTIL_H

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mpt/abi.h"

namespace mpt_cuda_test {

// True when the CUDA runtime finds a device (the tests' own check, independent of the backend).
bool gpu_present();

struct TensorSpec {
  std::string name;
  int dtype = MPT_DTYPE_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // initial contents (outputs: what the kernel overwrites)
  int same_as_input = -1;      // for an output updated in place: the input it is
  int64_t numel() const;
  size_t element_size() const;
};

struct LaunchSpec {
  std::string kernel;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<std::pair<std::string, double>> scalars;
};

struct LaunchResult {
  int status = -1;
  std::string error;
  std::vector<std::vector<uint8_t>> outputs;  // bytes of each output after the launch
};

// Runs `spec` through mpt_launch() with every tensor on `device` (MPT_DEVICE_CPU or
// MPT_DEVICE_CUDA). Device tensors are allocated with mpt_alloc and filled and read back with the
// `copy` kernel, so the host <-> device path is exercised too.
LaunchResult run_launch(const LaunchSpec& spec, int device);

// Tensor builders. Floating values are rounded to the dtype to nearest even by the CPU library.
TensorSpec floats(std::string name, int dtype, std::vector<int64_t> shape,
                  const std::vector<float>& values);
TensorSpec random_floats(std::string name, int dtype, std::vector<int64_t> shape, std::mt19937& rng,
                         float scale = 1.0f);
TensorSpec ints(std::string name, std::vector<int64_t> shape, const std::vector<int32_t>& values);
// An output tensor whose initial bytes are a fixed non-zero pattern (catches unwritten elements).
TensorSpec output(std::string name, int dtype, std::vector<int64_t> shape);
TensorSpec in_place(const TensorSpec& input, int input_index);

// The fp32 value of element i of floating bytes of `dtype`.
float element_value(const std::vector<uint8_t>& bytes, int dtype, int64_t i);

// "" when a and b are byte-identical, else a description of the first difference.
std::string compare_exact(const TensorSpec& t, const std::vector<uint8_t>& a,
                          const std::vector<uint8_t>& b);
// "" when every element satisfies |a - b| <= atol + rtol * |b| (NaN where both are NaN), else a
// description of the worst element.
std::string compare_close(const TensorSpec& t, const std::vector<uint8_t>& a,
                          const std::vector<uint8_t>& b, double rtol, double atol);

}  // namespace mpt_cuda_test

#endif
