// Helpers of the kernel library tests: host tensors that own their bytes, a launch call that
// takes tensors and scalars by name, exact decoders of the 16-bit formats written independently
// of the library (ldexp arithmetic), and a seeded random source.
#ifndef MPT_TESTS_KERNEL_TEST_UTIL_H
#define MPT_TESTS_KERNEL_TEST_UTIL_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mpt/abi.h"

namespace mpt_test {

// Value of fp16 bits, from the definition of binary16 (not from the library).
inline double decode_f16(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double magnitude;
  if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
  else if (exponent == 0) magnitude = std::ldexp(mantissa, -24);
  else magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

inline double decode_bf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even of a finite double to a binary format with `precision` significand bits,
// minimum normal exponent `emin` and largest finite value `max_finite`; exact double arithmetic.
inline double round_nearest_even(double x, int precision, int emin, double max_finite) {
  if (x == 0 || std::isnan(x)) return x;
  int e;
  std::frexp(std::fabs(x), &e);             // |x| in [2^(e-1), 2^e)
  int exponent = std::max(e - 1, emin);     // subnormals share the smallest exponent's spacing
  double ulp = std::ldexp(1.0, exponent - (precision - 1));
  double q = std::nearbyint(x / ulp);       // default rounding mode: ties to even
  double r = q * ulp;
  double overflow = max_finite + std::ldexp(1.0, std::ilogb(max_finite) - precision);  // halfway to the next binade
  if (std::fabs(x) >= overflow) return std::copysign(INFINITY, x);
  return r;
}
inline double reference_round_f16(double x) { return round_nearest_even(x, 11, -14, 65504.0); }
inline double reference_round_bf16(double x) {
  return round_nearest_even(x, 8, -126, std::ldexp(255.0, 120));
}
inline float reference_round(double x, int dtype) {
  if (dtype == MPT_DTYPE_F16) return static_cast<float>(reference_round_f16(x));
  if (dtype == MPT_DTYPE_BF16) return static_cast<float>(reference_round_bf16(x));
  return static_cast<float>(x);
}

// A tensor in host memory with its own storage.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(std::vector<int64_t> shape, int dtype, std::string name = "t")
      : shape_(std::move(shape)), dtype_(dtype), name_(std::move(name)) {
    bytes_.assign(static_cast<size_t>(numel()) * element_size() + 64, 0);
  }
  // A floating tensor holding `values`, each rounded (nearest even) to `dtype`.
  static HostTensor from_values(std::vector<int64_t> shape, const std::vector<double>& values,
                                int dtype = MPT_DTYPE_F32, std::string name = "t");
  static HostTensor i32(std::vector<int64_t> shape, const std::vector<int32_t>& values, std::string name = "labels");

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape_) n *= s;
    return n;
  }
  size_t element_size() const { return mpt_dtype_bytes(dtype_); }
  void* data() { return bytes_.data(); }
  int dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  mpt_tensor view();

  double value(int64_t i) const;                 // element i as a double (exact)
  std::vector<double> values() const;
  uint16_t bits16(int64_t i) const { uint16_t b; std::memcpy(&b, bytes_.data() + 2 * i, 2); return b; }
  void set(int64_t i, double v);                 // rounds to the dtype
  int32_t i32_at(int64_t i) const { int32_t v; std::memcpy(&v, bytes_.data() + 4 * i, 4); return v; }

 private:
  std::vector<int64_t> shape_;
  int dtype_ = MPT_DTYPE_F32;
  std::string name_;
  std::vector<uint8_t> bytes_;
};

using Scalars = std::vector<std::pair<const char*, double>>;

// Launches `kernel`; returns the status. The same HostTensor may appear as input and output.
int launch(const char* kernel, std::vector<HostTensor*> inputs, std::vector<HostTensor*> outputs,
           const Scalars& scalars = {});

// The same, asking the kernel for its launch report (MPT_LAUNCH_REPORT) into *report.
int launch_reported(const char* kernel, std::vector<HostTensor*> inputs, std::vector<HostTensor*> outputs,
                    const Scalars& scalars, mpt_launch_report* report);

// Seeded uniform values in [lo, hi).
std::vector<double> random_values(size_t n, double lo, double hi, uint32_t seed);

}  // namespace mpt_test

#endif
