// Test tensors and the statistics comparison of stats_test_data.h.
#include "stats_test_data.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace fpscope_gpu_test {
namespace {

uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/* fp32 -> fp16 bits, round to nearest even; an independent, plain implementation for test data. */
uint16_t to_f16(float f) {
  uint32_t b = f32_bits(f), sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  double units = std::ldexp(static_cast<double>(std::fabs(f)), 24);  // multiples of 2^-24
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
}

uint16_t to_bf16(float f) {
  uint32_t b = f32_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

std::vector<float> special_values() {
  return {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.0f, 65520.0f, 61440.0f, 57344.0f,
          448.0f, 464.0f, 465.0f, 480.0f, 240.0f, 2.98e-8f, 2.99e-8f, 5.96e-8f, 6.09e-5f, 6.11e-5f,
          1e-40f, -1e-45f, 1.17549435e-38f, 3.38953139e38f, -3.4028235e38f, 1.5e-5f, 0.0078125f,
          0.001953125f, 1.52587890625e-05f, 2.0f, 0.5f};
}

}  // namespace

std::vector<uint8_t> make_tensor(fpscope::ElementType type, size_t n, std::mt19937& rng,
                                 const std::vector<size_t>& nonfinite_at) {
  size_t es = type == fpscope::ElementType::F32 ? 4 : 2;
  std::vector<uint8_t> bytes(n * es);
  std::vector<float> specials = special_values();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale_exp(-30, 20), pick(0, 9);
  for (size_t i = 0; i < n; ++i) {
    float v = pick(rng) == 0 ? specials[i % specials.size()]
                             : std::ldexp(normal(rng), scale_exp(rng));
    uint32_t b = type == fpscope::ElementType::F32 ? f32_bits(v)
                 : type == fpscope::ElementType::F16 ? to_f16(v) : to_bf16(v);
    std::memcpy(bytes.data() + i * es, &b, es);
  }
  const uint32_t nonfinite32[] = {0x7fc00001u, 0x7f800000u, 0xff800000u, 0xffa00000u};
  const uint16_t nonfinite16_f16[] = {0x7e01u, 0x7c00u, 0xfc00u, 0xfd00u};
  const uint16_t nonfinite16_bf16[] = {0x7fc1u, 0x7f80u, 0xff80u, 0xffa0u};
  for (size_t k = 0; k < nonfinite_at.size(); ++k) {
    size_t i = nonfinite_at[k];
    if (i >= n) continue;
    uint32_t b = type == fpscope::ElementType::F32 ? nonfinite32[k % 4]
                 : type == fpscope::ElementType::F16 ? nonfinite16_f16[k % 4] : nonfinite16_bf16[k % 4];
    std::memcpy(bytes.data() + i * es, &b, es);
  }
  return bytes;
}

namespace {

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

std::string compare_stats(const fpscope::TensorStats& a, const fpscope::TensorStats& b) {
  std::ostringstream s;
  s.precision(17);
  auto count = [&](const char* name, uint64_t x, uint64_t y) {
    if (x != y) s << name << ": " << x << " vs " << y << "; ";
  };
  auto exact = [&](const char* name, double x, double y) {
    if (!same(x, y)) s << name << ": " << x << " vs " << y << "; ";
  };
  count("count", a.count, b.count);
  count("nan", a.nan, b.nan);
  count("pos_inf", a.pos_inf, b.pos_inf);
  count("neg_inf", a.neg_inf, b.neg_inf);
  count("zero", a.zero, b.zero);
  count("subnormal", a.subnormal, b.subnormal);
  exact("min", a.min, b.min);
  exact("max", a.max, b.max);
  exact("absmax", a.absmax, b.absmax);
  exact("min_nonzero", a.min_nonzero, b.min_nonzero);
  if (a.first_nonfinite != b.first_nonfinite) s << "first_nonfinite: " << a.first_nonfinite << " vs " << b.first_nonfinite << "; ";
  count("first_nonfinite_bits", a.first_nonfinite_bits, b.first_nonfinite_bits);
  double tolerance = 1e-12 * (std::isnan(b.rms) ? 0.0 : b.rms);
  if (!(same(a.mean, b.mean) || std::fabs(a.mean - b.mean) <= tolerance)) s << "mean: " << a.mean << " vs " << b.mean << "; ";
  if (!(same(a.rms, b.rms) || std::fabs(a.rms - b.rms) <= tolerance)) s << "rms: " << a.rms << " vs " << b.rms << "; ";
  for (int f = 0; f < fpscope::kCastFormatCount; ++f) {
    std::string p = "cast[" + std::to_string(f) + "].";
    count((p + "overflow").c_str(), a.cast[f].overflow, b.cast[f].overflow);
    count((p + "underflow").c_str(), a.cast[f].underflow, b.cast[f].underflow);
    count((p + "subnormal").c_str(), a.cast[f].subnormal, b.cast[f].subnormal);
    count((p + "near_max").c_str(), a.cast[f].near_max, b.cast[f].near_max);
  }
  for (int i = 0; i < fpscope::kHistBins; ++i) {
    if (a.hist[i] != b.hist[i]) {
      s << "hist[2^" << (i + fpscope::kHistMinExponent) << "]: " << a.hist[i] << " vs " << b.hist[i] << "; ";
      break;
    }
  }
  return s.str();
}

}  // namespace fpscope_gpu_test
