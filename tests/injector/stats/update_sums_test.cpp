// snapshot_update() and update_sums() (fpscope/update_sums.h), and the fp16 decoder they share with
// the statistics kernels, against a reference written here:
// values decoded by the compiler's own conversions (_Float16, a bf16 widened by a shift), counts
// taken element by element, sums of exactly squared terms in long double. Counts must be equal;
// sums within the header's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "accumulator.h"
#include "fpscope/update_sums.h"

namespace fpscope {
namespace {

// One element type as the test writes and reads it.
struct Type {
  ElementType type;
  std::size_t bytes;
  const char* name;
};
constexpr Type kTypes[] = {{ElementType::F32, 4, "f32"},
                           {ElementType::F16, 2, "f16"},
                           {ElementType::BF16, 2, "bf16"},
                           {ElementType::F64, 8, "f64"}};

// The element nearest `v` (round to nearest even), as raw bytes.
void store(const Type& t, std::vector<uint8_t>& out, std::size_t i, double v) {
  uint8_t* at = out.data() + i * t.bytes;
  switch (t.type) {
    case ElementType::F32: {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
      break;
    }
    case ElementType::F16: {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(at, &h, 2);
      break;
    }
    case ElementType::BF16: {  // nearest even from the float's bits (NaN kept a quiet NaN)
      const float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint16_t h = std::isnan(f) ? uint16_t(0x7FC0u | (b >> 16 & 0x8000u))
                                       : uint16_t((b + 0x7FFFu + (b >> 16 & 1u)) >> 16);
      std::memcpy(at, &h, 2);
      break;
    }
    default:
      std::memcpy(at, &v, 8);
  }
}

long double value(const Type& t, const std::vector<uint8_t>& data, std::size_t i) {
  const uint8_t* at = data.data() + i * t.bytes;
  switch (t.type) {
    case ElementType::F32: {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    case ElementType::F16: {
      _Float16 h;
      std::memcpy(&h, at, 2);
      return static_cast<float>(h);
    }
    case ElementType::BF16: {
      uint16_t h;
      std::memcpy(&h, at, 2);
      const uint32_t b = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, at, 8);
      return d;
    }
  }
}

UpdateSums reference(const Type& t, const std::vector<uint8_t>& old, const std::vector<uint8_t>& now,
                     const std::vector<uint8_t>& grad, std::size_t n) {
  UpdateSums s;
  long double abs_sum = 0, sq_sum = 0, weight_sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool moved = std::memcmp(old.data() + i * t.bytes, now.data() + i * t.bytes, t.bytes) != 0;
    const long double g = value(t, grad, i);
    const bool nonzero = g != 0 || std::isnan(g);
    s.changed += moved;
    s.nonzero += nonzero;
    s.lost += nonzero && !moved;
    // The difference as the header takes it: in double, finite or left out.
    const double p = static_cast<double>(value(t, old, i));
    const double d = static_cast<double>(value(t, now, i)) - p;
    if (!std::isfinite(d)) continue;
    abs_sum += std::fabs(d);
    sq_sum += static_cast<long double>(d) * d;
    weight_sum += static_cast<long double>(p) * p;
  }
  s.applied_abs_sum = static_cast<double>(abs_sum);
  s.applied_sq_sum = static_cast<double>(sq_sum);
  s.weight_sq_sum = static_cast<double>(weight_sum);
  return s;
}

// A parameter before and after a step, and its gradient, with the awkward values a step can meet.
struct Step {
  std::vector<uint8_t> old, now, grad;
};

Step make_step(const Type& t, std::size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit;
  Step s{std::vector<uint8_t>(n * t.bytes), std::vector<uint8_t>(n * t.bytes), std::vector<uint8_t>(n * t.bytes)};
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t i = 0; i < n; ++i) {
    const double p = normal(rng) * std::exp2(std::floor(unit(rng) * 20 - 10));
    double q = p + normal(rng) * 1e-3 * std::fabs(p);
    if (i % 5 == 0) q = p;  // unchanged
    double g = unit(rng) < 0.3 ? 0.0 : normal(rng);
    switch (i % 97) {  // the awkward cases, spread over the blocks
      case 1: q = -p; break;
      case 2: g = -0.0; break;
      case 3: g = nan; break;
      case 4: q = nan; break;
      case 5: store(t, s.old, i, nan); store(t, s.now, i, nan); store(t, s.grad, i, g); continue;  // NaN kept
      case 6: q = inf; break;
      case 7: store(t, s.old, i, -inf); store(t, s.now, i, -inf); store(t, s.grad, i, 1); continue;
      case 8: store(t, s.old, i, 0.0); store(t, s.now, i, -0.0); store(t, s.grad, i, 1); continue;  // bits differ
      case 9: q = p * 0x1p-22; break;  // subnormal or zero in fp16 for most p
      default: break;
    }
    store(t, s.old, i, p);
    store(t, s.now, i, q);
    store(t, s.grad, i, g);
  }
  return s;
}

void expect_agree(const Type& t, const Step& s, std::size_t n) {
  std::vector<uint8_t> copy(n * t.bytes), nonzero(n, 7);
  snapshot_update(t.type, s.old.data(), s.grad.data(), n, copy.data(), nonzero.data());
  EXPECT_EQ(copy, s.old);
  for (std::size_t i = 0; i < n; ++i) {
    const long double g = value(t, s.grad, i);
    ASSERT_EQ(nonzero[i], (g != 0 || std::isnan(g)) ? 1 : 0) << t.name << " element " << i;
  }
  const UpdateSums got = update_sums(t.type, copy.data(), s.now.data(), nonzero.data(), n);
  const UpdateSums want = reference(t, s.old, s.now, s.grad, n);
  EXPECT_EQ(got.changed, want.changed);
  EXPECT_EQ(got.nonzero, want.nonzero);
  EXPECT_EQ(got.lost, want.lost);
  const double bound = std::exp2(-42);
  EXPECT_NEAR(got.applied_abs_sum, want.applied_abs_sum, bound * want.applied_abs_sum);
  EXPECT_NEAR(got.applied_sq_sum, want.applied_sq_sum, bound * want.applied_sq_sum);
  EXPECT_NEAR(got.weight_sq_sum, want.weight_sq_sum, bound * want.weight_sq_sum);
}

TEST(UpdateSums, EqualAnElementByElementRecountForEveryTypeAndBlockBoundary) {
  for (const Type& t : kTypes) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{97}, std::size_t{4095},
                                std::size_t{4096}, std::size_t{4097}, std::size_t{100003}}) {
      SCOPED_TRACE(std::string(t.name) + " n=" + std::to_string(n));
      expect_agree(t, make_step(t, n, static_cast<uint32_t>(n) * 31 + static_cast<uint32_t>(t.bytes)), n);
    }
  }
}

TEST(UpdateSums, DecodesEveryBinary16PatternAsTheCompilersConversion) {
  // The pass's fp16 decoder, shared with the statistics kernels: all 65,536 patterns, bit for bit
  // (a NaN as a NaN of the same sign).
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    _Float16 f;
    std::memcpy(&f, &h, 2);
    const double want = static_cast<float>(f), got = stats::f16_bits_to_double(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got) && std::signbit(got) == std::signbit(want)) << std::hex << bits;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 8), 0) << std::hex << bits << ": " << got << " for " << want;
    }
  }
}

TEST(UpdateSums, LeavesOutDifferencesBeyondDoublesRangeAndOverflowsToInfinity) {
  // Element 0: both values finite, their difference not: counted as changed, summed nowhere.
  // Element 2: a finite difference whose square is not: the sum of squares is +Inf, as numpy's.
  const Type& t = kTypes[3];
  Step s{std::vector<uint8_t>(24), std::vector<uint8_t>(24), std::vector<uint8_t>(24)};
  const double values[3][3] = {{-1.5e308, 1.5e308, 1}, {2.0, 5.0, 1}, {0.0, 1e200, 0}};  // old, new, gradient
  for (std::size_t i = 0; i < 3; ++i) {
    store(t, s.old, i, values[i][0]);
    store(t, s.now, i, values[i][1]);
    store(t, s.grad, i, values[i][2]);
  }
  std::vector<uint8_t> copy(24), nonzero(3);
  snapshot_update(t.type, s.old.data(), s.grad.data(), 3, copy.data(), nonzero.data());
  const UpdateSums got = update_sums(t.type, copy.data(), s.now.data(), nonzero.data(), 3);
  EXPECT_EQ(got.changed, 3u);
  EXPECT_EQ(got.nonzero, 2u);
  EXPECT_EQ(got.lost, 0u);
  EXPECT_EQ(got.applied_abs_sum, 3.0 + 1e200);
  EXPECT_EQ(got.applied_sq_sum, std::numeric_limits<double>::infinity());
  EXPECT_EQ(got.weight_sq_sum, 4.0);
}

TEST(UpdateSums, SumsOfManyEqualTermsStayWithinTheBound) {
  // 2^22 + 1 terms of 0.1^2: a plain running sum in double drifts by about 2^-31 of the total;
  // the blocks' compensated sum stays within the header's 2^-42.
  const std::size_t n = (std::size_t{1} << 22) + 1;
  std::vector<double> old(n, 1.0), now(n, 1.1);
  std::vector<uint8_t> nonzero(n, 1);
  const UpdateSums got = update_sums(ElementType::F64, old.data(), now.data(), nonzero.data(), n);
  const long double d = 1.1 - 1.0;
  const long double want = d * d * static_cast<long double>(n);
  EXPECT_NEAR(got.applied_sq_sum, static_cast<double>(want), std::exp2(-42) * static_cast<double>(want));
  EXPECT_EQ(got.weight_sq_sum, static_cast<double>(n));
  EXPECT_EQ(got.changed, n);
  EXPECT_EQ(got.lost, 0u);
}

}  // namespace
}  // namespace fpscope
