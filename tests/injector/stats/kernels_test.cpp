// The vector kernels against the scalar kernel on random tensors with specials sprinkled in, the
// Basic level against the Full level, and the derived cast thresholds against the values written
// out in docs/statistics.md.
#include "kernels.h"

#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "formats.h"
#include "test_tensors.h"
#include "vector_common.h"

namespace fpscope::stats_test {
namespace {

using stats::Kernel;

void expect_same_double(double a, double b, const char* field) {
  if (std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a)) << field;
  } else {
    EXPECT_EQ(a, b) << field;
    EXPECT_EQ(std::signbit(a), std::signbit(b)) << field;
  }
}

// Everything but mean and rms must be identical; those within the documented sum bound.
void expect_same_stats(const TensorStats& v, const TensorStats& s) {
  EXPECT_EQ(v.count, s.count);
  EXPECT_EQ(v.nan, s.nan);
  EXPECT_EQ(v.pos_inf, s.pos_inf);
  EXPECT_EQ(v.neg_inf, s.neg_inf);
  EXPECT_EQ(v.zero, s.zero);
  EXPECT_EQ(v.subnormal, s.subnormal);
  expect_same_double(v.min, s.min, "min");
  expect_same_double(v.max, s.max, "max");
  expect_same_double(v.absmax, s.absmax, "absmax");
  expect_same_double(v.min_nonzero, s.min_nonzero, "min_nonzero");
  EXPECT_EQ(v.first_nonfinite, s.first_nonfinite);
  EXPECT_EQ(v.first_nonfinite_bits, s.first_nonfinite_bits);
  EXPECT_EQ(v.hist, s.hist);
  for (int f = 0; f < kCastFormatCount; ++f) {
    EXPECT_EQ(v.cast[f].overflow, s.cast[f].overflow) << f;
    EXPECT_EQ(v.cast[f].underflow, s.cast[f].underflow) << f;
    EXPECT_EQ(v.cast[f].subnormal, s.cast[f].subnormal) << f;
    EXPECT_EQ(v.cast[f].near_max, s.cast[f].near_max) << f;
  }
  if (std::isnan(s.mean)) {
    EXPECT_TRUE(std::isnan(v.mean) && std::isnan(v.rms));
  } else {
    // Both are within 4u * sum|x| / n of the exact mean; rms >= |mean| bounds sum|x| / n from
    // below only, so compare the rms (relative) and the mean against rms (absolute).
    EXPECT_LE(std::fabs(v.rms - s.rms), 10 * 0x1p-53 * s.rms);
    EXPECT_LE(std::fabs(v.mean - s.mean), 10 * 0x1p-53 * s.rms);
  }
}

// The first `n` elements of `t` through kernel `k` and through the scalar kernel, at both levels.
void expect_same_as_scalar(Kernel k, const TestTensor& t, std::size_t n) {
  for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
    TensorStats vs, ss;
    stats::compute_stats_with(k, t.bytes.data(), t.type, n, level, &vs);
    stats::compute_stats_with(Kernel::Scalar, t.bytes.data(), t.type, n, level, &ss);
    expect_same_stats(vs, ss);
  }
}

class VectorKernelTest : public ::testing::TestWithParam<Kernel> {};

TEST_P(VectorKernelTest, MatchesScalarKernelOnRandomTensors) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  uint64_t seed = 1000;
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (double rate : {0.0, 0.0005, 0.01, 0.3}) {
      for (std::size_t n : {3, 64, 100, 4095, 4096, 4097, 8191, 20000, 131073}) {
        const TestTensor t = random_tensor(type, n, seed++, rate);
        SCOPED_TRACE(t.name + " special rate " + std::to_string(rate));
        expect_same_as_scalar(k, t, n);
      }
    }
  }
}

TEST_P(VectorKernelTest, MatchesScalarKernelOnGaussianTensors) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (int scale : {-24, -16, -10, -6, 0, 7, 14, 120}) {
      const TestTensor t = gaussian_tensor(type, 50000, uint64_t(900 + scale), scale);
      SCOPED_TRACE(t.name);
      expect_same_as_scalar(k, t, t.size());
    }
  }
}

// fp16 sums need no rounding (docs/statistics.md, "Accuracy of mean and rms"): the mean of any
// finite fp16 tensor is its exact sum, counted here in whole units of 2^-24, divided by the count
// with one rounding. Random values of both signs, zeros and subnormals among them, with exponent
// fields whose bit 1 is clear (0, 1, 4, 5, ... 28, 29: all below 2^15, so that the exact sum fits
// a double), so that the running sums cancel and grow; several blocks, a part block and a tail
// the scalar routine takes. (The sums were exact before fp16 had its own path too; this keeps
// them so, and catches a block's running sum lost or added twice.)
TEST_P(VectorKernelTest, Fp16MeanIsTheExactSumRoundedOnce) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    TestTensor t{"f16", ElementType::F16, {}};
    int64_t units = 0;  // the exact sum in units of 2^-24
    for (int i = 0; i < 3 * 4096 + 1500 + 37; ++i) {
      const uint32_t bits = uint32_t(rng()) & 0xF7FFu;  // exponent bit 1 clear: |x| < 2^15
      t.push_bits(bits);
      units += int64_t(std::ldexp(stats::f16_bits_to_double(uint16_t(bits)), 24));  // exact
    }
    ASSERT_LT(std::llabs(units), int64_t{1} << 53);  // a double holds the exact sum
    const double exact_mean = std::ldexp(double(units), -24) / double(t.size());
    for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
      for (Kernel kernel : {k, Kernel::Scalar}) {
        TensorStats st;
        stats::compute_stats_with(kernel, t.bytes.data(), ElementType::F16, t.size(), level, &st);
        EXPECT_EQ(st.mean, exact_mean) << stats::kernel_name(kernel) << " seed " << seed;
      }
    }
  }
}

// Long runs of one kind of value, so that whole blocks take the fast path or the special path.
TEST_P(VectorKernelTest, MatchesScalarKernelOnUniformRuns) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (uint32_t bits : {0x0u, 0x1u, 0x3Fu, 0x8000u, 0x3C00u, 0x7BFFu, 0x7C00u, 0x7E00u, 0x7F7Fu,
                          0x7F80u, 0xFC01u, 0x00800000u, 0x7F800000u, 0x80000001u}) {
      TestTensor t{"run", type, {}};
      for (int i = 0; i < 9000; ++i) t.push_bits(i == 8500 ? 0x3C00u : bits);
      SCOPED_TRACE(std::string(type_name(type)) + " bits " + std::to_string(bits));
      expect_same_as_scalar(k, t, t.size());
    }
  }
}

// NaN and Inf among finite values in the same groups of 64, which the vector kernels count from
// masks while the group's finite values take the fast path: attention scores under a causal mask
// (-inf above the diagonal of 64 x 64 and of 48 x 48 matrices, so that rows and groups are not
// aligned), one non-finite value a group at a lane that moves from group to group, whole groups
// of non-finite values between plain ones, every kind of NaN and Inf, and a single one at lanes
// spread over a group (the first non-finite value's index comes from the lane masks); values of
// one sign only and -0 alone, whose extremes a zeroed lane would change; over gaussian values of
// scales that put cast thresholds inside populated binades, so that the Full level's compares over
// the block's memory meet the non-finite lanes too.
TEST_P(VectorKernelTest, MatchesScalarKernelWhereNonFiniteValuesShareGroupsWithFiniteOnes) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    const uint64_t inf = type == ElementType::F32 ? 0x7F800000u : type == ElementType::F16 ? 0x7C00u : 0x7F80u;
    const uint64_t sign = type == ElementType::F32 ? 0x80000000u : 0x8000u;
    const uint64_t quiet = type == ElementType::F32 ? 0x400000u : type == ElementType::F16 ? 0x200u : 0x40u;
    const uint64_t kinds[] = {inf, inf | sign, inf | quiet, inf | sign | quiet, inf | 1, inf | sign | (quiet - 1)};
    for (int scale : {-10, 0, 8, 15}) {
      const TestTensor plain = gaussian_tensor(type, 20000, uint64_t(700 + scale), scale);
      const std::size_t n = plain.size();
      const auto with = [&](const char* pattern, auto nonfinite_at) {
        TestTensor t{std::string(pattern) + " " + plain.name, type, {}};
        for (std::size_t i = 0; i < n; ++i) {
          uint64_t bits = 0;
          std::memcpy(&bits, &plain.bytes[i * plain.element_size()], plain.element_size());
          const int kind = nonfinite_at(i);
          t.push_bits(kind < 0 ? bits : kinds[kind]);
        }
        SCOPED_TRACE(t.name);
        expect_same_as_scalar(k, t, n);
      };
      with("causal 64", [](std::size_t i) { return i % 64 > (i / 64) % 64 ? 1 : -1; });
      with("causal 48", [](std::size_t i) { return i % 48 > (i / 48) % 48 ? 1 : -1; });
      with("one a group", [](std::size_t i) { return i % 64 == (i / 64 * 7) % 64 ? int(i / 64 % 6) : -1; });
      with("whole groups", [](std::size_t i) { return (i / 64) % 3 == 1 ? int(i % 6) : -1; });
      with("every kind", [](std::size_t i) { return i % 5 == 3 ? int(i / 5 % 6) : -1; });
      // The first non-finite value alone, at a lane of each eighth of a late group.
      for (std::size_t lane : {5, 13, 21, 29, 37, 45, 53, 61})
        with("one late", [lane](std::size_t i) { return i == 64 * 250 + lane ? 2 : -1; });
    }
    // Extremes a zeroed lane must not reach: values of one sign with no zero (its +0 would be the
    // largest of negative values or the smallest of positive ones), and -0 alone (+0 would be the
    // largest); -inf and NaN in most groups.
    const TestTensor plain = gaussian_tensor(type, 9000, 77, 0);
    for (int pattern = 0; pattern < 3; ++pattern) {
      TestTensor t{std::string(pattern == 0 ? "negative" : pattern == 1 ? "positive" : "-0") + " " + plain.name, type, {}};
      for (std::size_t i = 0; i < plain.size(); ++i) {
        uint64_t bits = 0;
        std::memcpy(&bits, &plain.bytes[i * plain.element_size()], plain.element_size());
        if ((bits & ~sign) == 0) bits = nearest_bits(type, 0.75);  // no zero
        bits = pattern == 0 ? bits | sign : pattern == 1 ? bits & ~sign : sign;
        t.push_bits(i % 64 > (i / 64) % 64 ? kinds[1] : i % 97 == 0 ? kinds[2] : bits);
      }
      SCOPED_TRACE(t.name);
      expect_same_as_scalar(k, t, t.size());
    }
  }
}

// Blocks whose nonzero values span 1 to 70 binades (the vector histogram takes up to 63, in
// windows of eight), the k-th binade of a span holding its values k + 1 times as often as the
// first, so that every bin's count differs from its neighbours', with zeros of both signs between
// them: the histogram, counted here from frexp, and everything else as the scalar kernel has it.
// fp32 and bf16 spans end at 2^31 or reach fp32's largest binade (the last exponent field, 254);
// fp16 spans at most 40 binades, subnormals included.
TEST_P(VectorKernelTest, MatchesAnIndependentHistogramOverEverySpanOfBinades) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  std::mt19937_64 rng(4242);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    const bool f16 = type == ElementType::F16;
    for (int span = 1; span <= (f16 ? 40 : 70); ++span) {
      const int lowest = f16 ? -24 + (span * 5) % (41 - span) : span % 2 ? 128 - span : 32 - span;
      std::vector<int> offsets;  // binade k of the span, k + 1 times
      for (int o = 0; o < span; ++o) offsets.insert(offsets.end(), std::size_t(o + 1), o);
      TestTensor t{std::string("span_") + std::to_string(span) + "_" + type_name(type), type, {}};
      std::array<uint64_t, kHistBins> expected{};
      for (std::size_t i = 0; i < 2 * stats::kBlockElements + 300; ++i) {
        const int e = lowest + offsets[i % offsets.size()];
        double v = std::ldexp(1.0 + 0.99 * unit(rng), e);  // below each format's largest value
        if (i % 5 == 3 && e != lowest) v = (i % 10 == 3) ? 0.0 : -0.0;  // the span's ends stay
        if (rng() & 1) v = -v;
        const uint32_t bits = nearest_bits(type, v);
        t.push_bits(bits);
        const double stored = bits_value(type, bits);
        if (stored != 0.0) {
          int x;
          std::frexp(stored, &x);  // |stored| in [2^(x-1), 2^x)
          ++expected[std::size_t(x - 1 - kHistMinExponent)];
        }
      }
      SCOPED_TRACE(t.name);
      TensorStats vs, ss;
      stats::compute_stats_with(k, t.bytes.data(), type, t.size(), StatsLevel::Full, &vs);
      stats::compute_stats_with(Kernel::Scalar, t.bytes.data(), type, t.size(), StatsLevel::Full,
                                &ss);
      for (int b = 0; b < kHistBins; ++b)
        ASSERT_EQ(vs.hist[b], expected[b]) << "bin of 2^" << b + kHistMinExponent;
      expect_same_stats(vs, ss);
    }
  }
}

// Extremes of whole groups (the fast path) of every mix of signs: zeros of one sign or both alone,
// negatives only (with and without -0), non-negatives only (with and without +0), both, and the
// values next to zero and to the largest finite value, for every type: each against the scalar
// kernel, -0 ordered below +0.
TEST_P(VectorKernelTest, MatchesScalarKernelOnTheExtremesOfEveryMixOfSigns) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    const bool wide = type == ElementType::F32;
    const uint32_t sign = wide ? 0x80000000u : 0x8000u;
    const uint32_t largest = wide ? 0x7F7FFFFFu : type == ElementType::F16 ? 0x7BFFu : 0x7F7Fu;
    const std::vector<std::vector<uint32_t>> mixes = {
        {0},  {sign}, {0, sign}, {sign | 5, sign}, {sign | 5, sign | largest}, {5, 0},
        {5, largest}, {1, sign | 1}, {sign, 7, 0, sign | 9}, {sign | largest, largest, 0, sign},
        {sign | 1, 2, 3}};
    for (std::size_t m = 0; m < mixes.size(); ++m) {
      TestTensor t{std::string("signs_") + std::to_string(m) + "_" + type_name(type), type, {}};
      for (std::size_t i = 0; i < 2 * stats::kGroupElements; ++i)
        t.push_bits(mixes[m][(i * 7) % mixes[m].size()]);
      SCOPED_TRACE(t.name);
      expect_same_as_scalar(k, t, t.size());
    }
  }
}

// The cast thresholds one step above a power of two (the underflow bounds) are decided from the
// exponent histogram in a block that holds no exact power of two, and by compares in one that
// does: blocks of values inside those binades (and zeros of both signs), with and without the
// powers themselves, the thresholds, a power of two of another binade only, a NaN's group (a fast
// group with the NaN's lane zeroed), a power of two only inside a NaN's group (counted by the
// probe of the fast path) and, for fp32 and bf16, only inside a group with a subnormal (which the
// scalar routine counts, outside the probe), and partial blocks.
TEST_P(VectorKernelTest, MatchesScalarKernelNextToPowersOfTwo) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  std::mt19937_64 rng(515);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    // The binades [2^e, 2^(e+1)) of the underflow bounds of fp16, e5m2 and e4m3, and of 1.
    const int exponents[] = {-25, -17, -10, 0};
    TestTensor t{std::string("powers_of_two_") + type_name(type), type, {}};
    const auto push = [&](double v) { t.push_bits(nearest_bits(type, v)); };
    constexpr int kBlocks = 8;
    for (int block = 0; block < kBlocks; ++block) {
      for (std::size_t i = 0; i < stats::kBlockElements; ++i) {
        const int e = exponents[i % 4];
        const double sign = (rng() & 1) ? -1.0 : 1.0;
        double v = sign * std::ldexp(1.0 + unit(rng), e);  // inside the binade, rarely its power
        if (block == 1 && i % 997 == 0) v = sign * std::ldexp(1.0, e);  // the powers themselves
        if (block == 2 && i == 300) v = std::ldexp(1.0, -3);            // another binade's power
        if (block == 3 && i % 64 == 5) v = std::nextafter(std::ldexp(1.0, e), 4.0);  // threshold
        if (block == 4) v = sign * std::ldexp(1.0, e);                  // powers only
        if (block == 5 && i == 2000) v = NAN;                           // lane zeroed
        if (block == 6 && i == 2000) v = NAN;                           // and its group holds the power
        if (block == 6 && i == 2001) v = std::ldexp(1.0, exponents[i % 4]);
        // fp32 and bf16: a subnormal sends its group to the scalar routine, which holds the power
        // (fp16 has no such group: its subnormals are normal fp32 values).
        if (block == 7 && i == 2000) v = type == ElementType::F16 ? NAN : std::ldexp(1.0, -130);
        if (block == 7 && i == 2001) v = std::ldexp(1.0, exponents[i % 4]);
        if (i % 13 == 0 && block != 4) v = (i % 26 == 0) ? 0.0 : -0.0;
        push(v);
      }
    }
    SCOPED_TRACE(t.name);
    TensorStats vs, ss;
    stats::compute_stats_with(k, t.bytes.data(), type, t.size(), StatsLevel::Full, &vs);
    stats::compute_stats_with(Kernel::Scalar, t.bytes.data(), type, t.size(), StatsLevel::Full,
                              &ss);
    expect_same_stats(vs, ss);
    // Each block on its own as well: a power of two decides only its own block.
    for (std::size_t b = 0; b < kBlocks; ++b) {
      const unsigned char* p = t.bytes.data() + b * stats::kBlockElements * t.element_size();
      stats::compute_stats_with(k, p, type, stats::kBlockElements, StatsLevel::Full, &vs);
      stats::compute_stats_with(Kernel::Scalar, p, type, stats::kBlockElements, StatsLevel::Full,
                                &ss);
      expect_same_stats(vs, ss);
    }
    // Partial blocks: the first 1000 values, and two blocks and 100 more.
    for (std::size_t n : {std::size_t(1000), 2 * stats::kBlockElements + 100}) {
      stats::compute_stats_with(k, t.bytes.data(), type, n, StatsLevel::Full, &vs);
      stats::compute_stats_with(Kernel::Scalar, t.bytes.data(), type, n, StatsLevel::Full, &ss);
      expect_same_stats(vs, ss);
    }
  }
}

// The cast thresholds that fall inside a binade (compared value by value, not read off the exponent
// histogram): blocks of values of [1, 2) holding, for each such threshold, values at it, one step
// below and one above it and others of its binade, a few each (a sparse binade, as the fp8 and
// fp16 subnormal boundaries are in real tensors) or many; fp16's include subnormals (the groups
// whose fields come from widened floats); one block holds a NaN (its group a fast one with that
// lane zeroed, which the compares over memory meet) and, for fp32 and bf16, a subnormal (its
// group the scalar routine's, which the compares skip).
TEST_P(VectorKernelTest, MatchesScalarKernelAtThresholdsInsideABinade) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  std::mt19937_64 rng(2024);
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    const stats::ThresholdTable& table = type == ElementType::F32   ? stats::kThresholdsF32
                                         : type == ElementType::F16 ? stats::kThresholdsF16
                                                                    : stats::kThresholdsBF16;
    std::vector<uint32_t> inside;  // thresholds a binade's values must be compared with
    for (int t = 0; t < table.count; ++t)
      if (!table.starts_binade[t] && !table.follows_binade_start[t] && table.field[t] != 0) inside.push_back(table.value[t]);
    ASSERT_FALSE(inside.empty()) << type_name(type);
    TestTensor t{std::string("sparse_binades_") + type_name(type), type, {}};
    const uint32_t sign = type == ElementType::F32 ? 0x80000000u : 0x8000u;
    const uint32_t mantissa = type == ElementType::F32 ? 0x7FFFFFu : type == ElementType::F16 ? 0x3FFu : 0x7Fu;
    constexpr int kBlocks = 4;
    for (int block = 0; block < kBlocks; ++block) {
      std::vector<uint32_t> bits(stats::kBlockElements);
      for (uint32_t& b : bits) b = nearest_bits(type, 1.0 + double(rng() % 1000) / 1000.0) | ((rng() & 1) ? sign : 0);
      const std::size_t per_threshold = block == 2 ? 600 : 6;  // block 2: the binades are not few
      for (uint32_t v : inside) {
        for (std::size_t j = 0; j < per_threshold; ++j) {
          uint32_t b = j % 4 == 0 ? v : j % 4 == 1 ? v - 1 : j % 4 == 2 ? v + 1 : (v & ~mantissa) | uint32_t(rng() & mantissa);
          if ((b & ~sign & ~mantissa) != (v & ~mantissa)) b = v;  // stay in the binade
          bits[rng() % bits.size()] = b | ((rng() & 1) ? sign : 0);
        }
      }
      if (block == 3) bits[1000] = nearest_bits(type, NAN);  // a lane zeroed
      if (block == 3 && type != ElementType::F16) bits[3000] = nearest_bits(type, 0x1p-130);  // a scalar group
      for (uint32_t b : bits) t.push_bits(b);
    }
    SCOPED_TRACE(t.name);
    TensorStats vs, ss;
    stats::compute_stats_with(k, t.bytes.data(), type, t.size(), StatsLevel::Full, &vs);
    stats::compute_stats_with(Kernel::Scalar, t.bytes.data(), type, t.size(), StatsLevel::Full, &ss);
    expect_same_stats(vs, ss);
    for (int b = 0; b < kBlocks; ++b) {
      SCOPED_TRACE("block " + std::to_string(b));
      const unsigned char* p = t.bytes.data() + b * stats::kBlockElements * t.element_size();
      stats::compute_stats_with(k, p, type, stats::kBlockElements, StatsLevel::Full, &vs);
      stats::compute_stats_with(Kernel::Scalar, p, type, stats::kBlockElements, StatsLevel::Full, &ss);
      expect_same_stats(vs, ss);
    }
  }
}

// Every field, mean and rms included, bit for bit.
void expect_identical(const TensorStats& a, const TensorStats& b) {
  expect_same_stats(a, b);
  expect_same_double(a.mean, b.mean, "mean");
  expect_same_double(a.rms, b.rms, "rms");
}

// Runs the chunks in an order of its choosing, or each on a thread of its own.
class OrderedRunner final : public ChunkRunner {
 public:
  enum class Order { Forward, Backward, Threads };
  explicit OrderedRunner(Order order) : order_(order) {}
  void run(std::size_t count, void (*body)(void*, std::size_t), void* context) override {
    chunks_ = count;
    if (order_ == Order::Forward) {
      for (std::size_t i = 0; i < count; ++i) body(context, i);
    } else if (order_ == Order::Backward) {
      for (std::size_t i = count; i-- > 0;) body(context, i);
    } else {
      std::vector<std::thread> threads;
      for (std::size_t i = 0; i < count; ++i) threads.emplace_back([=] { body(context, i); });
      for (auto& t : threads) t.join();
    }
  }
  std::size_t chunks_ = 0;

 private:
  Order order_;
};

// Chunks scanned in any order, or at once on many threads, give exactly the statistics of one
// thread scanning them all; NaN, Inf and subnormals sit on chunk boundaries so that the first
// non-finite value and the merged extremes cross from one chunk to the next.
TEST(ChunkedStats, AnyRunnerGivesTheSameStatisticsBitForBit) {
  constexpr std::size_t C = kStatsChunkElements;
  uint64_t seed = 77;
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (std::size_t n : {C - 1, C, C + 1, 3 * C + 17}) {
      TestTensor t = gaussian_tensor(type, n, seed++, -3);
      auto set = [&](std::size_t i, uint32_t bits32, uint16_t bits16) {
        if (i >= n) return;
        if (type == ElementType::F32) std::memcpy(&t.bytes[4 * i], &bits32, 4);
        else std::memcpy(&t.bytes[2 * i], &bits16, 2);
      };
      const uint16_t nan16 = type == ElementType::F16 ? 0x7E00 : 0x7FC0;
      const uint16_t inf16 = type == ElementType::F16 ? 0x7C00 : 0x7F80;
      set(C, 0x7F800000u, inf16);       // +Inf: the first non-finite value, first of chunk 1
      set(2 * C - 1, 0x7FC00000u, nan16);  // NaN: last of chunk 1
      set(C - 1, 0x00000001u, 0x0001);  // the smallest subnormal: last of chunk 0
      for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
        SCOPED_TRACE(t.name + " level " + std::to_string(int(level)));
        TensorStats serial;
        compute_stats(t.bytes.data(), type, n, level, &serial);
        if (n > C) {
          EXPECT_EQ(serial.first_nonfinite, static_cast<int64_t>(C));
          EXPECT_EQ(serial.pos_inf, 1u);
          EXPECT_EQ(serial.nan, n >= 2 * C ? 1u : 0u);
        }
        for (auto order : {OrderedRunner::Order::Forward, OrderedRunner::Order::Backward, OrderedRunner::Order::Threads}) {
          OrderedRunner runner(order);
          TensorStats chunked;
          compute_stats(t.bytes.data(), type, n, level, &chunked, runner);
          expect_identical(chunked, serial);
          EXPECT_EQ(runner.chunks_, n > C ? (n + C - 1) / C : 0u) << "arrays of one chunk are scanned in place";
        }
      }
    }
  }
}

// The traced program's floating-point mode (denormals read as zero, results flushed to zero,
// rounding upwards, an unmasked invalid-operation exception) changes no statistic, and the
// program gets its mode back, status flags included. Chunks scanned on threads started under that
// mode too.
TEST(StatsEdgeTest, TheProgramsFloatingPointModeChangesNothing) {
  constexpr uint32_t kDaz = 0x0040, kFtz = 0x8000, kRoundUp = 0x4000, kInvalidMask = 0x0080;
  const uint32_t program_mode = ((_mm_getcsr() | kDaz | kFtz | kRoundUp) & ~kInvalidMask) | 0x1;
  std::vector<TestTensor> tensors;
  uint64_t seed = 4242;
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    tensors.push_back(random_tensor(type, 3 * kStatsChunkElements + 5, seed++, 0.01));
    tensors.push_back(gaussian_tensor(type, 9000, seed++, type == ElementType::F16 ? -20 : -132));
  }
  // A signalling NaN, which an unmasked invalid-operation exception would trap on conversion.
  tensors.push_back(TestTensor{"snan", ElementType::F32, {}});
  for (int i = 0; i < 200; ++i) tensors.back().push_bits(i == 150 ? 0x7F800001u : 0x00000003u);
  for (Kernel k : {Kernel::Scalar, Kernel::Avx2, Kernel::Avx512, Kernel::Avx512Gfni}) {
    if (!stats::kernel_supported(k)) continue;
    for (const TestTensor& t : tensors) {
      for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
        SCOPED_TRACE(t.name + " " + stats::kernel_name(k) + " level " + std::to_string(int(level)));
        TensorStats expected, got, chunked;
        stats::compute_stats_with(k, t.bytes.data(), t.type, t.size(), level, &expected);
        const uint32_t saved = _mm_getcsr();
        _mm_setcsr(program_mode);
        stats::compute_stats_with(k, t.bytes.data(), t.type, t.size(), level, &got);
        OrderedRunner runner(OrderedRunner::Order::Threads);
        stats::compute_stats_with(k, t.bytes.data(), t.type, t.size(), level, &chunked, runner);
        const uint32_t after = _mm_getcsr();
        _mm_setcsr(saved);
        EXPECT_EQ(after, program_mode);
        expect_identical(got, expected);
        expect_identical(chunked, expected);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, VectorKernelTest,
                         ::testing::Values(Kernel::Avx2, Kernel::Avx512, Kernel::Avx512Gfni),
                         [](const auto& p) { return std::string(stats::kernel_name(p.param)); });

TEST(StatsLevelTest, BasicLeavesCastCountsAndHistogramZero) {
  for (Kernel k : {Kernel::Scalar, Kernel::Avx2, Kernel::Avx512, Kernel::Avx512Gfni}) {
    if (!stats::kernel_supported(k)) continue;
    for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
      const TestTensor t = random_tensor(type, 5000, 77, 0.05);
      TensorStats basic, full;
      stats::compute_stats_with(k, t.bytes.data(), type, t.size(), StatsLevel::Basic, &basic);
      stats::compute_stats_with(k, t.bytes.data(), type, t.size(), StatsLevel::Full, &full);
      for (const CastCounts& c : basic.cast) {
        EXPECT_EQ(c.overflow + c.underflow + c.subnormal + c.near_max, 0u);
      }
      for (uint64_t b : basic.hist) EXPECT_EQ(b, 0u);
      uint64_t full_hist = 0;
      for (uint64_t b : full.hist) full_hist += b;
      EXPECT_EQ(full_hist, full.count - full.nonfinite() - full.zero);  // Full did fill it
      EXPECT_EQ(basic.subnormal, full.subnormal);
      EXPECT_EQ(basic.min, full.min);
      EXPECT_EQ(basic.first_nonfinite, full.first_nonfinite);
    }
  }
}

// populated_bins() against a plain scan from both ends: every single bin, every pair of bins
// (the span's two ends), an empty and a full histogram.
TEST(StatsEdgeTest, PopulatedBinsRunFromTheFirstNonzeroBinToTheLast) {
  const auto plain = [](const std::array<uint64_t, kHistBins>& h) {
    int first = 0, end = kHistBins;
    while (first < kHistBins && h[first] == 0) ++first;
    if (first == kHistBins) return HistSpan{};
    while (h[end - 1] == 0) --end;
    return HistSpan{first, end};
  };
  const auto check = [&](const std::array<uint64_t, kHistBins>& h) {
    const HistSpan got = populated_bins(h), want = plain(h);
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.end, want.end);
  };
  std::array<uint64_t, kHistBins> h{};
  check(h);
  for (int a = 0; a < kHistBins; ++a) {
    for (int b = a; b < kHistBins; ++b) {
      h.fill(0);
      h[a] = 1;
      h[b] = 7;
      check(h);
    }
  }
  h.fill(3);
  check(h);
}

TEST(StatsEdgeTest, ReportsTheKernelItUses) {
  const std::string name = compute_stats_kernel();
  EXPECT_EQ(name, stats::kernel_name(stats::best_kernel()));
  EXPECT_TRUE(stats::kernel_supported(stats::best_kernel()));
}

TEST(StatsEdgeTest, EmptyTensorHasNoFiniteValues) {
  TensorStats s;
  compute_stats(nullptr, ElementType::F32, 0, StatsLevel::Full, &s);
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean) && std::isnan(s.rms));
  EXPECT_TRUE(std::isnan(s.min_nonzero) && std::isnan(s.absmax));
  EXPECT_EQ(s.first_nonfinite, -1);
}

TEST(StatsEdgeTest, MinAndMaxOrderNegativeZeroBelowPositiveZero) {
  const float v[] = {0.0f, -0.0f, 0.0f};
  TensorStats s;
  compute_stats(v, ElementType::F32, 3, StatsLevel::Basic, &s);
  EXPECT_TRUE(s.min == 0 && std::signbit(s.min));
  EXPECT_TRUE(s.max == 0 && !std::signbit(s.max));
  EXPECT_TRUE(std::isnan(s.min_nonzero));
  EXPECT_EQ(s.zero, 3u);
}

// The boundaries derived in formats.h, checked against the numbers docs/statistics.md states.
TEST(CastThresholdTest, DerivedBoundariesAreTheDocumentedOnes) {
  using stats::cast_bounds;
  const auto f16 = cast_bounds(stats::kF16);
  EXPECT_EQ(f16.overflow.value, 65520.0);
  EXPECT_TRUE(f16.overflow.inclusive);
  EXPECT_EQ(f16.near_max.value, 32752.0);
  EXPECT_EQ(f16.nonzero.value, std::ldexp(1.0, -25));
  EXPECT_FALSE(f16.nonzero.inclusive);
  EXPECT_EQ(f16.normal.value, std::ldexp(1.0, -14) - std::ldexp(1.0, -25));
  const auto bf16 = cast_bounds(stats::kBF16);
  EXPECT_EQ(bf16.overflow.value, std::ldexp(511.0, 119));
  EXPECT_EQ(bf16.nonzero.value, std::ldexp(1.0, -134));
  EXPECT_EQ(bf16.normal.value, std::ldexp(1.0, -126) - std::ldexp(1.0, -134));
  const auto e4m3 = cast_bounds(stats::kE4M3);
  EXPECT_EQ(e4m3.overflow.value, 464.0);
  EXPECT_FALSE(e4m3.overflow.inclusive);  // 464 rounds to 448 (even mantissa 110)
  EXPECT_EQ(e4m3.near_max.value, 224.0);
  EXPECT_EQ(e4m3.nonzero.value, std::ldexp(1.0, -10));
  EXPECT_EQ(e4m3.normal.value, std::ldexp(1.0, -6) - std::ldexp(1.0, -10));
  const auto e5m2 = cast_bounds(stats::kE5M2);
  EXPECT_EQ(e5m2.overflow.value, 61440.0);
  EXPECT_TRUE(e5m2.overflow.inclusive);
  EXPECT_EQ(e5m2.near_max.value, 28672.0);
  EXPECT_EQ(e5m2.nonzero.value, std::ldexp(1.0, -17));
  EXPECT_EQ(e5m2.normal.value, std::ldexp(1.0, -14) - std::ldexp(1.0, -17));
}

}  // namespace
}  // namespace fpscope::stats_test
