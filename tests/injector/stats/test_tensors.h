// Test tensors for the statistics tests: raw element bits of fp32, fp16, bf16 and fp64 arrays, built by
// hand (specials, limits, values around every cast boundary) or at random (with specials mixed in).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fpscope/tensor_stats.h"

namespace fpscope::stats_test {

// An array as raw bytes plus its element type.
struct TestTensor {
  std::string name;
  ElementType type;
  std::vector<unsigned char> bytes;

  std::size_t size() const { return bytes.size() / element_size(); }
  std::size_t element_size() const { return element_bytes(type); }
  void push_bits(uint64_t bits) {  // the low element_size() bytes, little-endian
    const std::size_t at = bytes.size();
    bytes.resize(at + element_size());
    std::memcpy(&bytes[at], &bits, element_size());
  }
};

// The trace's dtype name (contract::kDtypeNames), which reference_stats.py reads too.
inline const char* type_name(ElementType t) { return contract::kDtypeNames[static_cast<std::size_t>(t)]; }

// Nearest bits of `value` (a finite double, exact in fp32) in the source format, by search over
// the format's own bit patterns, so that the hand-made boundary tensors do not lean on the code
// under test.
uint64_t nearest_bits(ElementType type, double value);
double bits_value(ElementType type, uint64_t bits);

// Magnitudes at which some cast outcome changes (docs/statistics.md), written out by hand.
std::vector<double> cast_boundaries();

// Every special and limit of the format: zeros, infinities, NaNs with payloads, subnormal and
// normal limits, in both signs.
TestTensor specials_tensor(ElementType type);
// Each cast boundary, its neighbours one and two ulps (in the source format) either side, in
// both signs.
TestTensor boundaries_tensor(ElementType type);
// All 65536 bit patterns of a 16-bit format.
TestTensor all_patterns_tensor(ElementType type);
// `n` random values: a mix of gaussian values over many scales, uniform random bit patterns and
// specials (rate `special_rate`), reproducible from `seed`.
TestTensor random_tensor(ElementType type, std::size_t n, uint64_t seed, double special_rate);
// `n` gaussian values times 2^scale_exponent with one zero in five: few binades per block, like a
// real activation or gradient tensor (the vector kernels count such blocks differently).
TestTensor gaussian_tensor(ElementType type, std::size_t n, uint64_t seed, int scale_exponent);
// Arrays of an 8-bit format (`type` one of them): every bit pattern once; uniform random patterns
// of lengths around the scan's chunk size; long runs of one pattern each; values concentrated on a
// few binades as a quantized tensor holds them, with a NaN (or Inf) only late in the array; and
// arrays of nothing but NaN, nothing but zeros (or e8m0's smallest value).
std::vector<TestTensor> byte_tensors(ElementType type);
// fp64 values beyond fp32's range, both signs: below its smallest subnormal (to fp64's own), above
// its largest value (to fp64's), and next to the histogram's edges 2^-149 and 2^128.
TestTensor wide_range_tensor();

}  // namespace fpscope::stats_test
