// Stochastic rounding and the counter-based generator: a rounding lands only on the two
// neighbours of the value, is unbiased (the mean of many roundings matches the value within a
// stated statistical bound), is reproducible for the same counter, and the vectorised array
// path gives the scalar function's bits.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "mpt/numerics.h"

namespace {

// Neighbours of x in a format: round toward zero and the next value away from zero.
struct Neighbours {
  double low, high;
};

Neighbours neighbours(double x, int precision, int emin) {
  int e;
  std::frexp(std::fabs(x), &e);
  double ulp = std::ldexp(1.0, std::max(e - 1, emin) - (precision - 1));
  double low = std::trunc(x / ulp) * ulp;
  return {low, low + std::copysign(ulp, x)};
}

struct Format {
  const char* name;
  int precision, emin;
  uint16_t (*round)(float, uint32_t);
  double (*decode)(uint16_t);
};

const Format kFormats[] = {{"f16", 11, -14, mpt::f32_to_f16_stochastic, mpt_test::decode_f16},
                           {"bf16", 8, -126, mpt::f32_to_bf16_stochastic, mpt_test::decode_bf16}};

TEST(StochasticRounding, LandsOnlyOnTheTwoNeighbours) {
  auto values = mpt_test::random_values(5000, -3.0, 3.0, 11);
  for (const Format& f : kFormats)
    for (size_t i = 0; i < values.size(); ++i) {
      // Scale over many binades, fp16 subnormals included.
      float x = static_cast<float>(std::ldexp(values[i], static_cast<int>(i % 40) - 30));
      Neighbours n = neighbours(x, f.precision, f.emin);
      for (uint32_t r : {0u, 1u, 0x7fffffffu, 0xffffffffu, mpt::counter_random(5, i)}) {
        double got = f.decode(f.round(x, r));
        ASSERT_TRUE(got == n.low || got == n.high) << f.name << " x=" << x << " r=" << r << " got " << got;
      }
      if (n.low == x) {
        ASSERT_EQ(f.decode(f.round(x, 0xffffffffu)), x) << "representable values stay put";
      }
    }
}

TEST(StochasticRounding, IsUnbiased) {
  // For each value, N draws; the mean must lie within 5 standard errors of x, where the standard
  // error is gap * sqrt(p (1 - p) / N) for the probability p of rounding up. A biased rounding
  // (round to nearest) would put every one of these means a whole fraction of a gap away.
  const int kDraws = 200000;
  const double values[] = {1.0 + 0.3 * std::ldexp(1.0, -10), -(2.0 + 0.77 * std::ldexp(1.0, -9)),
                           0.1, 1000.1, std::ldexp(0.4, -24), std::ldexp(-13.25, -24), 3.0e-9};
  for (const Format& f : kFormats)
    for (double v : values) {
      float x = static_cast<float>(v);
      Neighbours n = neighbours(x, f.precision, f.emin);
      double gap = std::fabs(n.high - n.low), p = std::fabs(x - n.low) / gap;
      uint64_t key = mpt::random_stream_key(1234, 7);
      double sum = 0;
      for (int i = 0; i < kDraws; ++i) sum += f.decode(f.round(x, mpt::counter_random(key, static_cast<uint64_t>(i))));
      double mean = sum / kDraws, standard_error = gap * std::sqrt(p * (1 - p) / kDraws);
      EXPECT_NEAR(mean, static_cast<double>(x), 5 * standard_error + 1e-3 * gap) << f.name << " x=" << x;
      if (p > 0.01) {
        EXPECT_GT(std::fabs(mean - n.low), 0.5 * p * gap) << f.name << " x=" << x << ": never rounds up";
      }
    }
}

TEST(StochasticRounding, IsReproducibleAndVectorMatchesScalar) {
  auto values = mpt_test::random_values(4099, -70000.0, 70000.0, 3);
  std::vector<float> x(values.begin(), values.end());
  x[5] = NAN; x[6] = INFINITY; x[7] = 1e-6f; x[8] = -3e-8f; x[100] = 65530.0f;
  uint64_t key = mpt::random_stream_key(42, 3);
  std::vector<uint16_t> a(x.size()), b(x.size()), c(x.size()), bf(x.size());
  const uint64_t first = 0xfffffff0ull;  // crosses a 2^32 boundary of the counter
  mpt::convert_f32_to_f16_stochastic(x.data(), a.data(), x.size(), key, first);
  mpt::convert_f32_to_f16_stochastic(x.data(), b.data(), x.size(), key, first);
  mpt::convert_f32_to_bf16_stochastic(x.data(), bf.data(), x.size(), key, first);
  EXPECT_EQ(a, b);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(a[i], mpt::f32_to_f16_stochastic(x[i], mpt::counter_random(key, first + i))) << i;
    ASSERT_EQ(bf[i], mpt::f32_to_bf16_stochastic(x[i], mpt::counter_random(key, first + i))) << i;
  }
  mpt::convert_f32_to_f16_stochastic(x.data(), c.data(), x.size(), mpt::random_stream_key(42, 4), first);
  EXPECT_NE(a, c) << "another step must draw other bits";
  EXPECT_EQ(a[5] & 0x7e00, 0x7e00) << "NaN stays NaN";
  EXPECT_EQ(a[6], 0x7c00) << "Inf stays Inf";
}

TEST(CounterRandom, BitsAreBalanced) {
  // Each of the 32 bits is set in half the draws: 5 standard errors of a binomial with 2^16 draws.
  const int kDraws = 1 << 16;
  uint64_t key = mpt::random_stream_key(9, 1);
  std::vector<int> ones(32, 0);
  for (int i = 0; i < kDraws; ++i) {
    uint32_t r = mpt::counter_random(key, static_cast<uint64_t>(i));
    for (int bit = 0; bit < 32; ++bit) ones[bit] += (r >> bit) & 1;
  }
  double bound = 5 * std::sqrt(kDraws * 0.25);
  for (int bit = 0; bit < 32; ++bit) EXPECT_NEAR(ones[bit], kDraws / 2.0, bound) << "bit " << bit;
  EXPECT_NE(mpt::random_stream_key(1, 2), mpt::random_stream_key(2, 1));
}

}  // namespace
