// Conversions of include/mpt/numerics.h against three independent references: the F16C
// instruction, exact double arithmetic written in the test (kernel_test_util.h), and numpy run
// through the reference Python. Both the scalar functions and the vectorised array functions are
// checked, over every fp16 pattern, every fp32 exponent, every tie near each binade, subnormals,
// the overflow thresholds and NaN payloads.
#include <gtest/gtest.h>

#include "temp_path.h"
#include <unistd.h>
#include <immintrin.h>

#include <cfloat>
#include <cstdio>
#include <fstream>
#include <limits>

#include "kernel_test_util.h"
#include "mpt/numerics.h"

namespace {

using mpt::bits_float;
using mpt::float_bits;

__attribute__((target("f16c"))) uint16_t f16c_convert(float x) {
  __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<uint16_t>(_mm_extract_epi16(h, 0));
}

bool is_nan_bits(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }

// fp32 inputs that probe every corner of the 16-bit formats.
std::vector<uint32_t> probe_inputs() {
  std::vector<uint32_t> v;
  const uint32_t mantissas[] = {0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x5000, 0x7fff,
                                0x8000, 0x8001, 0x18000, 0x400000, 0x7fe000, 0x7ff000, 0x7fffff, 0x123456};
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t m : mantissas) v.push_back(sign | (e << 23) | m);
  // Ties of fp16 in every normal binade: low 13 bits exactly half, and one ulp either side.
  for (uint32_t e = 113 - 1; e <= 142; ++e)
    for (uint32_t top : {0u, 1u, 2u, 0x155u, 0x2aau, 0x3feu, 0x3ffu})
      for (int delta : {-1, 0, 1}) v.push_back((e << 23) | (top << 13) | static_cast<uint32_t>(0x1000 + delta));
  // Ties of fp16 subnormals: k*2^-24 + 2^-25 and neighbours.
  for (int k = 0; k < 1024; ++k) {
    uint32_t b = float_bits(static_cast<float>(std::ldexp(2 * k + 1, -25)));
    for (int delta : {-1, 0, 1}) v.push_back(b + static_cast<uint32_t>(delta));
  }
  // Ties of bf16 in sampled binades (all binades for the low and high ends).
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t top : {0u, 1u, 0x7eu, 0x7fu})
      for (int delta : {-1, 0, 1}) v.push_back((e << 23) | (top << 16) | static_cast<uint32_t>(0x8000 + delta));
  for (float f : {65504.0f, 65519.99f, std::nextafter(65520.0f, 0.0f), 65520.0f, 65536.0f, FLT_MAX,
                  6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-45f})
    for (float s : {1.0f, -1.0f}) v.push_back(float_bits(f * s));
  for (uint32_t nan : {0x7fc00000u, 0x7fc00001u, 0x7fe00000u, 0x7fd55555u, 0x7fffe000u, 0xffc12345u,
                       0x7f800001u, 0x7f802000u, 0x7fa00000u, 0xff800001u})
    v.push_back(nan);
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) v.push_back(rng());
  return v;
}

// The expected fp16 bits of a finite or infinite fp32 value, from exact arithmetic.
uint16_t exact_f16(uint32_t b) {
  double r = mpt_test::reference_round_f16(bits_float(b));
  uint16_t sign = (b >> 16) & 0x8000;
  double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a * std::ldexp(1.0, 24));
  int e = std::ilogb(a);
  return sign | static_cast<uint16_t>((e + 15) << 10) | static_cast<uint16_t>(std::ldexp(a, 10 - e) - 1024);
}

uint16_t exact_bf16(uint32_t b) {
  float r = static_cast<float>(mpt_test::reference_round_bf16(bits_float(b)));
  return static_cast<uint16_t>(float_bits(r) >> 16);
}

std::vector<uint16_t> array_convert(const std::vector<uint32_t>& in, bool bf16) {
  std::vector<float> f(in.size());
  for (size_t i = 0; i < in.size(); ++i) f[i] = bits_float(in[i]);
  std::vector<uint16_t> out(in.size());
  if (bf16) mpt::convert_f32_to_bf16(f.data(), out.data(), f.size());
  else mpt::convert_f32_to_f16(f.data(), out.data(), f.size());
  return out;
}

// Runs a numpy script on raw little-endian input; returns its raw output.
std::vector<uint16_t> run_numpy(const std::vector<uint32_t>& in, const std::string& script) {
  const fpscope::test::TempDir dir("mpt-numerics");
  const std::string in_path = (dir / "in.bin").string(), out_path = (dir / "out.bin").string();
  std::ofstream(in_path, std::ios::binary).write(reinterpret_cast<const char*>(in.data()), in.size() * 4);
  std::string command = std::string(FPSCOPE_REFERENCE_PYTHON) + " -c \"import numpy as np, sys\nnp.seterr(all='ignore')\n" + script +
                        "\" " + in_path + " " + out_path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream out(out_path, std::ios::binary);
  std::vector<uint16_t> result(in.size());
  out.read(reinterpret_cast<char*>(result.data()), static_cast<std::streamsize>(result.size() * 2));
  EXPECT_EQ(out.gcount(), static_cast<std::streamsize>(result.size() * 2)) << "numpy output too short";
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  return result;
}

TEST(Numerics, F32ToF16MatchesF16cInstruction) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  auto inputs = probe_inputs();
  auto vector_out = array_convert(inputs, false);
  mpt::force_scalar_conversions(true);
  auto scalar_array_out = array_convert(inputs, false);
  mpt::force_scalar_conversions(false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint16_t expected = f16c_convert(bits_float(inputs[i]));
    ASSERT_EQ(mpt::f32_to_f16(bits_float(inputs[i])), expected) << std::hex << "input 0x" << inputs[i];
    ASSERT_EQ(vector_out[i], expected) << std::hex << "vector path, input 0x" << inputs[i];
    ASSERT_EQ(scalar_array_out[i], expected) << std::hex << "scalar path, input 0x" << inputs[i];
  }
}

TEST(Numerics, F32ToF16MatchesExactArithmetic) {
  for (uint32_t b : probe_inputs()) {
    uint16_t got = mpt::f32_to_f16(bits_float(b));
    if (is_nan_bits(b)) {
      // Quiet NaN, same sign, top 9 payload bits kept.
      EXPECT_EQ(got, ((b >> 16) & 0x8000) | 0x7e00 | ((b >> 13) & 0x1ff)) << std::hex << b;
    } else {
      ASSERT_EQ(got, exact_f16(b)) << std::hex << "input 0x" << b << " = " << bits_float(b);
    }
  }
}

TEST(Numerics, F32ToF16MatchesNumpy) {
  std::vector<uint32_t> inputs;
  for (uint32_t b : probe_inputs())
    if (!is_nan_bits(b) || (b & 0x00400000u)) inputs.push_back(b);  // numpy does not quiet signalling NaNs
  auto expected = run_numpy(inputs, "np.fromfile(sys.argv[1], dtype=np.float32).astype(np.float16).view(np.uint16).tofile(sys.argv[2])");
  auto got = array_convert(inputs, false);
  for (size_t i = 0; i < inputs.size(); ++i)
    ASSERT_EQ(got[i], expected[i]) << std::hex << "input 0x" << inputs[i];
}

TEST(Numerics, OverflowThresholdsOfF16) {
  EXPECT_EQ(mpt::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(mpt::f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(mpt::f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(mpt::f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(mpt::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);               // tie to even: 0
  EXPECT_EQ(mpt::f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(mpt::f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);               // tie 1.5 units -> 2
}

TEST(Numerics, F32ToBf16MatchesExactArithmetic) {
  auto inputs = probe_inputs();
  auto vector_out = array_convert(inputs, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint32_t b = inputs[i];
    uint16_t got = mpt::f32_to_bf16(bits_float(b));
    uint16_t expected = is_nan_bits(b) ? static_cast<uint16_t>((b >> 16) | 0x40) : exact_bf16(b);
    ASSERT_EQ(got, expected) << std::hex << "input 0x" << b;
    ASSERT_EQ(vector_out[i], expected) << std::hex << "vector path, input 0x" << b;
  }
}

TEST(Numerics, F32ToBf16MatchesNumpyFrexpRounding) {
  std::vector<uint32_t> inputs;
  for (uint32_t b : probe_inputs())
    if (!is_nan_bits(b)) inputs.push_back(b);
  // Independent route: value / 2^(e-8) rounded with np.rint (ties to even) in float64.
  const char* script =
      "x = np.fromfile(sys.argv[1], dtype=np.float32).astype(np.float64)\n"
      "m, e = np.frexp(x)\n"
      "ulp = np.ldexp(1.0, np.maximum(e, -125) - 8)\n"
      "r = np.rint(x / ulp) * ulp\n"
      "limit = np.ldexp(511.0, 119)\n"
      "r = np.where(np.abs(x) >= limit, np.copysign(np.inf, x), r)\n"
      "with np.errstate(over='ignore'):\n"
      "    (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tofile(sys.argv[2])";
  auto expected = run_numpy(inputs, script);
  auto got = array_convert(inputs, true);
  for (size_t i = 0; i < inputs.size(); ++i) ASSERT_EQ(got[i], expected[i]) << std::hex << "input 0x" << inputs[i];
}

TEST(Numerics, EverySixteenBitPatternConvertsExactlyAndRoundTrips) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> f16_values(65536), bf16_values(65536);
  mpt::convert_f16_to_f32(all.data(), f16_values.data(), all.size());
  mpt::convert_bf16_to_f32(all.data(), bf16_values.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    double exact = mpt_test::decode_f16(static_cast<uint16_t>(h));
    float scalar = mpt::f16_to_f32(static_cast<uint16_t>(h));
    bool nan = std::isnan(exact);
    if (nan) {
      EXPECT_EQ(float_bits(scalar), ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)) << h;
      EXPECT_TRUE(std::isnan(f16_values[h])) << h;  // F16C may quiet a signalling NaN
      EXPECT_EQ(mpt::f32_to_f16(scalar), h | 0x200) << h;  // made quiet, payload kept
    } else {
      ASSERT_EQ(static_cast<double>(scalar), exact) << h;
      ASSERT_EQ(std::signbit(scalar), (h & 0x8000) != 0) << h;
      ASSERT_EQ(float_bits(f16_values[h]), float_bits(scalar)) << h;
      ASSERT_EQ(mpt::f32_to_f16(scalar), h) << h;
    }
    double bexact = mpt_test::decode_bf16(static_cast<uint16_t>(h));
    ASSERT_EQ(float_bits(mpt::bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
    ASSERT_EQ(float_bits(bf16_values[h]), h << 16);
    if (!std::isnan(bexact)) {
      ASSERT_EQ(mpt::f32_to_bf16(static_cast<float>(bexact)), h);
    }
  }
}

TEST(Numerics, RoundThroughMatchesConvertAndBack) {
  auto inputs = probe_inputs();
  std::vector<float> f(inputs.size()), g(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) f[i] = g[i] = bits_float(inputs[i]);
  mpt::round_f32_through_f16(f.data(), f.size());
  mpt::round_f32_through_bf16(g.data(), g.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (is_nan_bits(inputs[i])) continue;
    ASSERT_EQ(float_bits(f[i]), float_bits(mpt::f16_to_f32(mpt::f32_to_f16(bits_float(inputs[i]))))) << i;
    ASSERT_EQ(float_bits(g[i]), float_bits(mpt::bf16_to_f32(mpt::f32_to_bf16(bits_float(inputs[i]))))) << i;
    // The inline scalar shortcuts agree too.
    ASSERT_EQ(float_bits(mpt::round_to_f16(bits_float(inputs[i]))), float_bits(f[i])) << std::hex << inputs[i];
    ASSERT_EQ(float_bits(mpt::round_to_bf16(bits_float(inputs[i]))), float_bits(g[i])) << std::hex << inputs[i];
  }
}

}  // namespace
