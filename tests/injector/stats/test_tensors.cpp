// Builders of the hand-made and random test tensors (see test_tensors.h).
#include "test_tensors.h"

#include <algorithm>
#include <cmath>

namespace fpscope::stats_test {
namespace {

uint64_t sign_bit(ElementType t) {
  return t == ElementType::F64 ? 0x8000000000000000u : t == ElementType::F32 ? 0x80000000u : 0x8000u;
}
uint64_t inf_bits(ElementType t) {
  return t == ElementType::F64   ? 0x7FF0000000000000u
         : t == ElementType::F32 ? 0x7F800000u
         : t == ElementType::F16 ? 0x7C00u
                                 : 0x7F80u;
}
uint64_t max_finite_bits(ElementType t) { return inf_bits(t) - 1; }
uint64_t min_normal_bits(ElementType t) {
  return t == ElementType::F64   ? 0x0010000000000000u
         : t == ElementType::F32 ? 0x00800000u
         : t == ElementType::F16 ? 0x0400u
                                 : 0x0080u;
}

void push_both_signs(TestTensor& t, uint64_t abs_bits) {
  t.push_bits(abs_bits);
  t.push_bits(abs_bits | sign_bit(t.type));
}

}  // namespace

double bits_value(ElementType type, uint64_t bits) {
  if (type == ElementType::F64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (type == ElementType::F32) {
    const auto b32 = uint32_t(bits);
    float f;
    std::memcpy(&f, &b32, 4);
    return f;
  }
  if (type == ElementType::BF16) {
    const uint32_t wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  const int field = int(bits >> 10) & 0x1F;
  const int mant = int(bits & 0x3FF);
  double mag = field == 0    ? std::ldexp(mant, -24)
               : field == 31 ? (mant ? NAN : INFINITY)
                             : std::ldexp(1024 + mant, field - 25);
  return (bits & 0x8000u) ? -mag : mag;
}

uint64_t nearest_bits(ElementType type, double value) {
  // Binary search over finite magnitudes, then pick the closer neighbour (ties: either is fine,
  // the callers add neighbours on both sides anyway).
  const double mag = std::fabs(value);
  uint64_t lo = 0, hi = max_finite_bits(type);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (bits_value(type, mid) < mag)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0 && mag - bits_value(type, lo - 1) < bits_value(type, lo) - mag) --lo;
  return value < 0 ? (lo | sign_bit(type)) : lo;
}

std::vector<double> cast_boundaries() {
  const double p = 1.0;
  return {
      // fp16: largest finite, its midpoint to 2^16, half of it, zero/min-subnormal midpoint,
      // largest-subnormal/min-normal midpoint.
      65504,
      65520,
      65536,
      32752,
      std::ldexp(p, -25),
      std::ldexp(p, -24),
      std::ldexp(p, -14) - std::ldexp(p, -25),
      std::ldexp(p, -14),
      // bf16
      std::ldexp(255, 120),
      std::ldexp(511, 119),
      std::ldexp(255, 119),
      std::ldexp(p, -134),
      std::ldexp(p, -133),
      std::ldexp(p, -126) - std::ldexp(p, -134),
      std::ldexp(p, -126),
      // fp8 e4m3 (E4M3FN)
      448,
      464,
      480,
      224,
      std::ldexp(p, -10),
      std::ldexp(p, -9),
      std::ldexp(p, -6) - std::ldexp(p, -10),
      std::ldexp(p, -6),
      // fp8 e5m2
      57344,
      61440,
      28672,
      std::ldexp(p, -17),
      std::ldexp(p, -16),
      std::ldexp(p, -14) - std::ldexp(p, -17),
  };
}

TestTensor specials_tensor(ElementType type) {
  TestTensor t{std::string("specials_") + type_name(type), type, {}};
  const uint64_t inf = inf_bits(type);
  const uint64_t quiet = type == ElementType::F64   ? 0x0008000000000000u
                         : type == ElementType::F32 ? 0x00400000u
                         : type == ElementType::F16 ? 0x0200u
                                                    : 0x0040u;
  t.push_bits(0);                                 // +0
  push_both_signs(t, 1);                          // smallest subnormal
  push_both_signs(t, min_normal_bits(type) - 1);  // largest subnormal
  push_both_signs(t, min_normal_bits(type));      // smallest normal
  push_both_signs(t, max_finite_bits(type));      // largest finite
  t.push_bits(sign_bit(type));                    // -0
  push_both_signs(t, nearest_bits(type, 1.0));
  push_both_signs(t, inf);                // +-Inf
  push_both_signs(t, inf | quiet);        // quiet NaN
  push_both_signs(t, inf | 1);            // signalling NaN, payload 1
  push_both_signs(t, inf | (quiet - 1));  // signalling NaN, all payload bits
  return t;
}

TestTensor boundaries_tensor(ElementType type) {
  TestTensor t{std::string("boundaries_") + type_name(type), type, {}};
  const uint64_t max_bits = max_finite_bits(type);
  for (double b : cast_boundaries()) {
    const uint64_t center = nearest_bits(type, b);
    for (int d = -2; d <= 2; ++d) {
      const int64_t bits = int64_t(center) + d;
      if (bits < 0 || bits > int64_t(max_bits)) continue;
      push_both_signs(t, uint64_t(bits));
    }
  }
  return t;
}

TestTensor all_patterns_tensor(ElementType type) {
  TestTensor t{std::string("all_patterns_") + type_name(type), type, {}};
  for (uint32_t b = 0; b < 0x10000u; ++b) t.push_bits(b);
  return t;
}

TestTensor random_tensor(ElementType type, std::size_t n, uint64_t seed, double special_rate) {
  TestTensor t{std::string("random_") + type_name(type) + "_" + std::to_string(n) + "_" +
                   std::to_string(seed),
               type,
               {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss;
  std::uniform_real_distribution<double> unit;
  std::uniform_int_distribution<int> scale(-30, 30);
  const int width = int(8 * element_bytes(type));
  const std::vector<double> bounds = cast_boundaries();
  for (std::size_t i = 0; i < n; ++i) {
    const double u = unit(rng);
    if (u < special_rate) {
      // A special or a boundary: NaN, +-Inf, +-0, subnormal, or a value next to a cast bound.
      const uint32_t kind = uint32_t(rng() % 6);
      const uint64_t sign = (rng() & 1) ? sign_bit(type) : 0;
      uint64_t bits = 0;
      if (kind == 0)
        bits = inf_bits(type) | 1 | (rng() % 4);
      else if (kind == 1)
        bits = inf_bits(type);
      else if (kind == 2)
        bits = 0;
      else if (kind == 3)
        bits = 1 + rng() % (min_normal_bits(type) - 1);
      else
        bits = nearest_bits(type, bounds[rng() % bounds.size()]) + rng() % 3 - 1;
      t.push_bits(bits | sign);
    } else if (u < 0.6) {
      const double v = gauss(rng) * std::ldexp(1.0, scale(rng));
      t.push_bits(nearest_bits(type, std::fmax(std::fmin(v, 3e38), -3e38)));
    } else if (u < 0.8) {
      uint64_t bits = width == 64 ? rng() : rng() & ((uint64_t(1) << width) - 1);  // any pattern
      // fp64: below 2^501, so that no square and no sum leaves double's range (specials_tensor
      // and wide_range_tensor reach the largest values).
      if (width == 64 && ((bits >> 52) & 0x7FF) > 1023 + 500) bits &= ~(uint64_t(1) << 62);
      t.push_bits(bits);
    } else {
      t.push_bits(nearest_bits(type, gauss(rng)));
    }
  }
  return t;
}

TestTensor gaussian_tensor(ElementType type, std::size_t n, uint64_t seed, int scale_exponent) {
  TestTensor t{std::string("gaussian_") + type_name(type) + "_" + std::to_string(n) + "_" +
                   std::to_string(scale_exponent),
               type,
               {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = (rng() % 5 == 0) ? 0.0 : gauss(rng) * std::ldexp(1.0, scale_exponent);
    t.push_bits(nearest_bits(type, v));
  }
  return t;
}

namespace {

// e2m1's cases: its sixteen patterns (a reader ignores a byte's high four bits, which a writer
// leaves zero, so only those sixteen are written), random runs of them and zeros of both signs.
std::vector<TestTensor> e2m1_tensors() {
  const std::string name = type_name(ElementType::E2M1);
  std::vector<TestTensor> out;
  auto tensor = [&](const std::string& what) -> TestTensor& {
    out.push_back(TestTensor{what + "_" + name, ElementType::E2M1, {}});
    return out.back();
  };
  TestTensor& all = tensor("all_patterns");
  for (uint32_t b = 0; b < 16; ++b) all.push_bits(b);
  std::mt19937_64 rng(12);
  for (std::size_t n : {0, 1, 7, 8, 9, 4099, 16383, 16384, 16385, 70001}) {
    TestTensor& t = tensor("random_" + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i) t.push_bits(rng() & 0x0F);
  }
  TestTensor& zeros = tensor("zeros");
  for (int i = 0; i < 33; ++i) zeros.push_bits(i % 3 == 0 ? 0x08 : 0);
  return out;
}

}  // namespace

std::vector<TestTensor> byte_tensors(ElementType type) {
  if (type == ElementType::E2M1) return e2m1_tensors();
  const contract::ByteFormat& f = contract::byte_format(static_cast<contract::Dtype>(type));
  const std::string name = type_name(type);
  std::vector<TestTensor> out;
  auto tensor = [&](const std::string& what) -> TestTensor& {
    out.push_back(TestTensor{what + "_" + name, type, {}});
    return out.back();
  };
  TestTensor& all = tensor("all_patterns");
  for (uint32_t b = 0; b < 256; ++b) all.push_bits(b);
  std::mt19937_64 rng(uint64_t(type) * 7919u);
  for (std::size_t n : {0, 1, 7, 8, 9, 4099, 16383, 16384, 16385, 70001, 300007}) {
    TestTensor& t = tensor("random_" + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i) t.push_bits(rng() & 0xFF);
  }
  TestTensor& runs = tensor("runs");
  for (uint32_t b = 0; b < 256; ++b)
    for (int i = 0; i < 1000; ++i) runs.push_bits((b * 37u) & 0xFF);
  // Quantized: a few binades around 1 (each pattern's neighbours, a geometric spread of steps).
  uint8_t one = 0;
  for (uint32_t b = 0; b < 256; ++b)
    if (!f.is_nan(uint8_t(b)) && !f.is_inf(uint8_t(b)) && f.magnitude(uint8_t(b)) == 1.0 && !f.negative(uint8_t(b)))
      one = uint8_t(b);
  uint8_t nonfinite = 0;
  for (uint32_t b = 255; b > 0 && nonfinite == 0; --b)
    if (f.is_nan(uint8_t(b)) || f.is_inf(uint8_t(b))) nonfinite = uint8_t(b);
  std::geometric_distribution<int> steps(0.3);
  TestTensor& quantized = tensor("quantized");
  for (std::size_t i = 0; i < 3 * 16384 + 100; ++i) {
    const int step = (rng() & 1 ? 1 : -1) * steps(rng);
    uint32_t b = uint32_t(std::clamp(int(one) + step, 0, f.has_sign ? 0x7E : 0xFE));
    if (f.has_sign && (rng() & 1)) b |= 0x80;
    if (f.is_nan(uint8_t(b)) || f.is_inf(uint8_t(b))) b = one;
    quantized.push_bits(i == 3 * 16384 + 5 ? nonfinite : b);
  }
  TestTensor& nans = tensor("nan");
  for (int i = 0; i < 77; ++i) nans.push_bits(nonfinite);
  TestTensor& zeros = tensor("zeros");
  for (int i = 0; i < 33; ++i) zeros.push_bits(i % 3 == 0 && f.has_sign && !f.is_nan(0x80) ? 0x80 : 0);
  return out;
}

TestTensor wide_range_tensor() {
  TestTensor t{"wide_range_f64", ElementType::F64, {}};
  for (int e : {-1074, -1073, -1000, -300, -151, -150, -149, -148, 127, 128, 129, 300, 1000, 1023}) {
    const double v = std::ldexp(1.0, e);
    push_both_signs(t, nearest_bits(t.type, v));
    if (e > -1074) push_both_signs(t, nearest_bits(t.type, v) - 1);  // just below the power of two
    push_both_signs(t, nearest_bits(t.type, v) + 1);
  }
  push_both_signs(t, nearest_bits(t.type, 1e-310));  // subnormal in fp64
  push_both_signs(t, nearest_bits(t.type, 3.5));
  return t;
}

}  // namespace fpscope::stats_test
