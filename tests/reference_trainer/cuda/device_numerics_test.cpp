// The rounding code the CUDA kernels use (kernels/cuda/src/device_numerics.h, compiled here for
// the host) against the CPU library's numerics: every 16-bit pattern, a dense sweep of fp32
// patterns plus the rounding boundaries, stochastic rounding for many random inputs, and the
// counter-based generator. Equal here means CPU and GPU round identically.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "device_numerics.h"
#include "mpt/numerics.h"

namespace {

namespace dev = mpt::dev;

/* fp32 bit patterns: a sweep with an odd stride, and every pattern near the fp16 and bf16
 * rounding boundaries (exponents around fp16's normal/subnormal/overflow edges). */
std::vector<uint32_t> probe_patterns() {
  std::vector<uint32_t> out;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) out.push_back(static_cast<uint32_t>(b));
  const uint32_t centres[] = {0x38800000u, 0x33800000u, 0x33000000u, 0x477fe000u, 0x477ff000u,
                              0x47800000u, 0x7f7f8000u, 0x7f800000u, 0x00800000u, 0x00000000u};
  for (uint32_t c : centres) {
    for (int64_t d = -5000; d <= 5000; ++d) {
      uint32_t b = static_cast<uint32_t>(static_cast<int64_t>(c) + d);
      out.push_back(b);
      out.push_back(b | 0x80000000u);
    }
  }
  return out;
}

TEST(DeviceNumerics, SixteenBitDecodingMatchesEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    ASSERT_EQ(dev::float_bits(dev::f16_to_f32(v)), mpt::float_bits(mpt::f16_to_f32(v))) << h;
    ASSERT_EQ(dev::float_bits(dev::bf16_to_f32(v)), mpt::float_bits(mpt::bf16_to_f32(v))) << h;
  }
}

TEST(DeviceNumerics, NearestEvenMatchesTheCpuLibrary) {
  for (uint32_t b : probe_patterns()) {
    float x = mpt::bits_float(b);
    ASSERT_EQ(dev::f32_to_f16(x), mpt::f32_to_f16(x)) << std::hex << b;
    ASSERT_EQ(dev::f32_to_bf16(x), mpt::f32_to_bf16(x)) << std::hex << b;
  }
}

TEST(DeviceNumerics, StochasticRoundingMatchesTheCpuLibrary) {
  std::mt19937 rng(7);
  std::vector<uint32_t> patterns = probe_patterns();
  for (size_t i = 0; i < patterns.size(); i += 3) {
    float x = mpt::bits_float(patterns[i]);
    uint32_t r = rng();
    ASSERT_EQ(dev::f32_to_f16_stochastic(x, r), mpt::f32_to_f16_stochastic(x, r)) << std::hex << patterns[i];
    ASSERT_EQ(dev::f32_to_bf16_stochastic(x, r), mpt::f32_to_bf16_stochastic(x, r)) << std::hex << patterns[i];
  }
  // Random bits at both ends of the range, where carries and truncation meet.
  for (uint32_t r : {0u, 1u, 0x1fffu, 0xffffu, 0x80000000u, 0xffffffffu}) {
    for (uint32_t b : {0x38800000u, 0x33800001u, 0x477fefffu, 0x7f7fffffu, 0x00000001u}) {
      float x = mpt::bits_float(b);
      EXPECT_EQ(dev::f32_to_f16_stochastic(x, r), mpt::f32_to_f16_stochastic(x, r));
      EXPECT_EQ(dev::f32_to_bf16_stochastic(x, r), mpt::f32_to_bf16_stochastic(x, r));
    }
  }
}

TEST(DeviceNumerics, CounterGeneratorMatchesTheCpuLibrary) {
  for (uint64_t seed : {0ull, 1ull, 12345ull, 0xffffffffffffffffull}) {
    for (uint64_t step : {0ull, 1ull, 2ull, 1000000ull}) {
      uint64_t key = dev::random_stream_key(seed, step);
      ASSERT_EQ(key, mpt::random_stream_key(seed, step));
      for (uint64_t index : {0ull, 1ull, 77ull, 0xffffffffull, 0x100000000ull, 0x123456789abcull}) {
        ASSERT_EQ(dev::counter_random(key, index), mpt::counter_random(key, index));
      }
    }
  }
}

TEST(DeviceNumerics, ArrayStochasticConversionUsesTheElementIndex) {
  // The optimizer kernels draw element i's bits with counter_random(key, i); the CPU library's
  // array conversion does the same from first_index.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(1000);
  for (auto& v : values) v = normal(rng);
  uint64_t key = mpt::random_stream_key(42, 7);
  std::vector<uint16_t> cpu(values.size());
  mpt::convert_f32_to_f16_stochastic(values.data(), cpu.data(), values.size(), key, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(dev::f32_to_f16_stochastic(values[i], dev::counter_random(key, i)), cpu[i]) << i;
  }
  mpt::convert_f32_to_bf16_stochastic(values.data(), cpu.data(), values.size(), key, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(dev::f32_to_bf16_stochastic(values[i], dev::counter_random(key, i)), cpu[i]) << i;
  }
}

TEST(DeviceNumerics, LoadAndStoreRoundTripEveryDtype) {
  uint16_t h[2] = {};
  float f[2] = {};
  dev::store_float(h, dev::F16, 1, 65520.0f);
  EXPECT_EQ(h[1], 0x7c00u);  // rounds to +Inf
  dev::store_float(h, dev::BF16, 0, 1.0f);
  EXPECT_EQ(h[0], 0x3f80u);
  EXPECT_EQ(dev::load_float(h, dev::BF16, 0), 1.0f);
  dev::store_float(f, dev::F32, 1, -2.5f);
  EXPECT_EQ(dev::load_float(f, dev::F32, 1), -2.5f);
}

}  // namespace
