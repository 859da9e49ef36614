// compute_recipes(): each scaling recipe replayed over a tensor (fpscope/fp8_recipes.h).
//
// Every value is decoded to fp32 (exact for fp32, fp16 and bf16) and scaled in fp32, as fp8
// training does; the product is rounded to the element format by exact power-of-two arithmetic; docs/statistics.md ("Scaling recipes")
// states the rules this follows, operation by operation, so that an independent quantizer gets
// the same counts.
#include <algorithm>
#include <bit>
#include <cstring>

#include "accumulator.h"
#include "fp_mode.h"
#include "fpscope/fp8_recipes.h"

namespace fpscope {
namespace {

using contract::ElementFormat;
using contract::RecipeInfo;
using contract::ScaleRule;

// 2^e for e in double's normal range, built from its bits.
double pow2_of(int e) { return std::bit_cast<double>(uint64_t(e + 1023) << 52); }

// floor(log2(a)) of a positive normal double (every positive fp32 value is one).
int exponent_of(double a) { return int((std::bit_cast<uint64_t>(a) >> 52) & 0x7FF) - 1023; }

// The element format's facts the rounding needs.
struct Element {
  double max, min_normal;
  int mantissa_bits, min_normal_exponent;
};
Element element_of(ElementFormat f) {
  const contract::FloatFormat& b = contract::element_bits(f);
  return {b.max_finite(), b.min_normal(), b.mantissa_bits, 1 - b.bias};
}

// Rounds a >= 0 (finite) to the element format, nearest even, with unbounded exponent: the
// quantum of a's binade (never below the subnormals' spacing) divides a exactly, the quotient is
// rounded to an integer by the 2^52 trick (exact under round to nearest even), and multiplied back.
double round_magnitude(double a, const Element& e) {
  if (a == 0) return 0;
  const int quantum = std::max(exponent_of(a), e.min_normal_exponent) - e.mantissa_bits;
  const double y = a * pow2_of(-quantum);  // < 2^(mantissa_bits + 1)
  constexpr double kBig = 0x1p52;  // IEEE arithmetic (no -ffast-math): the sum rounds, then exactly back
  const double r = (y + kBig) - kBig;
  return r * pow2_of(quantum);
}

// The fp32 quotient a / b (a, b > 0), the largest finite fp32 where it overflows: how a
// recipe's scale max_elem / amax is computed.
float scale_quotient(float a, float b) {
  const float q = a / b;
  return std::isinf(q) ? std::numeric_limits<float>::max() : q;
}

// 2^floor(log2(s)) of a positive normal fp32 s: its exponent field alone.
float pow2_floor(float s) { return std::bit_cast<float>(std::bit_cast<uint32_t>(s) & 0x7F800000u); }

// Quantizes the finite value x at scale s (s >= 0; 0 loses everything) into `o`: the scaled value
// is the fp32 product x*s, rounded to the element format and saturated; returns whether a nonzero
// x kept a nonzero value.
bool quantize(float x, float s, const Element& e, RecipeOutcome& o) {
  const double m = std::fabs(double(x));
  ++o.values;
  o.signal += m * m;
  if (m == 0) return false;
  const float v = std::fabs(x * s);  // fp32 overflow (delayed scaling) saturates like any other
  double q = std::isinf(v) ? std::numeric_limits<double>::infinity() : round_magnitude(v, e);
  if (q > e.max) {
    ++o.saturated;
    q = e.max;
  } else if (q == 0) {
    ++o.underflow;
  } else if (q < e.min_normal) {
    ++o.subnormal;
  }
  const double err = q == 0 ? m : m - q / double(s);
  o.sse += err * err;
  return q != 0;
}

// A block's scale: s, or a non-finite block (its scale is NaN: every value decodes to NaN).
struct BlockScale {
  float s = 1;
  bool nonfinite = false;
};

// The rules' scales from an amax (over the finite values) and whether a NaN or Inf was seen;
// `tensor_s` is the per-tensor scale (NVFP4: the global scale s_g).
BlockScale block_scale(const RecipeInfo& r, const Element& e, float amax, bool nonfinite, float tensor_s) {
  switch (r.rule) {
    case ScaleRule::TensorCurrent:
    case ScaleRule::TensorDelayed:
    case ScaleRule::TensorCurrentPow2:
      return {tensor_s, false};
    case ScaleRule::RowPow2:
    case ScaleRule::BlockPow2:
      if (nonfinite || amax == 0) return {1, false};
      return {pow2_floor(scale_quotient(float(e.max), amax)), false};
    case ScaleRule::MxFloor:
    case ScaleRule::MxCeil: {
      if (nonfinite) return {0, true};
      if (amax == 0) return {1, false};
      int k;  // the shared scale is 2^k; values are divided by it
      if (r.rule == ScaleRule::MxFloor) {
        k = exponent_of(amax) - exponent_of(e.max);
      } else {  // amax / max_elem in fp32, rounded up to a power of two
        const float t = amax / float(e.max);
        const bool power_of_two = (std::bit_cast<uint64_t>(double(t)) & ((uint64_t{1} << 52) - 1)) == 0;
        k = t == 0 ? contract::kE8M0MinExponent : exponent_of(t) + (power_of_two ? 0 : 1);
      }
      k = std::clamp(k, contract::kE8M0MinExponent, contract::kE8M0MaxExponent);
      return {float(pow2_of(-k)), false};
    }
    case ScaleRule::Nvfp4: {
      if (nonfinite) return {0, true};
      // The block's e4m3 scale b = e4m3(fp32(amax_b / 6) * s_g), saturating at 448.
      const Element e4m3 = element_of(ElementFormat::E4M3);
      const float d = (amax / float(e.max)) * tensor_s;
      const double b = std::min(round_magnitude(double(d), e4m3), e4m3.max);
      if (b == 0) return {0, false};  // the block's scale underflows: every value is lost
      return {tensor_s / float(b), false};
    }
  }
  return {1, false};
}

template <class Load>
class Replay {
 public:
  Replay(Load load, const RecipeRequest& q) : load_(load), q_(q), n_(q.rows * q.cols) {}

  void run(RecipeResult* out) {
    float amax = 0;
    bool nonfinite = false;
    for (std::size_t i = 0; i < n_; ++i) {
      const float v = load_(i);
      if (!std::isfinite(v))
        nonfinite = true;
      else
        amax = std::max(amax, std::fabs(v));
    }
    out->amax = nonfinite ? std::numeric_limits<double>::infinity() : double(amax);
    out->outcomes = RecipeOutcomes{};
    if (n_ == 0) return;
    for (int i = 0; i < kRecipeCount; ++i) {
      const RecipeInfo& r = contract::kRecipes[static_cast<std::size_t>(i)];
      RecipeOutcome& o = out->outcomes[static_cast<std::size_t>(i)];
      const Element e = element_of(r.element);
      const float s = tensor_scale(r, e, amax, nonfinite, q_.history_amax[static_cast<std::size_t>(i)]);
      if (r.rule != ScaleRule::Nvfp4 && r.block == contract::kTensorBlock) o.scale = s;
      std::size_t width = r.block == contract::kTensorBlock || r.block == contract::kRowBlock
                              ? q_.cols
                              : std::size_t(r.block);
      std::size_t height = q_.weight && r.weight_rows > 1 ? std::size_t(r.weight_rows) : 1;
      if (r.block == contract::kTensorBlock) height = q_.rows;
      tiles(r, e, s, width, height, o);
    }
  }

 private:
  static float tensor_scale(const RecipeInfo& r, const Element& e, float amax, bool nonfinite,
                            double history) {
    const bool usable = !nonfinite && amax > 0;
    switch (r.rule) {
      case ScaleRule::TensorCurrent:
        return usable ? scale_quotient(float(e.max), amax) : 1;
      case ScaleRule::TensorCurrentPow2:
        return usable ? pow2_floor(scale_quotient(float(e.max), amax)) : 1;
      case ScaleRule::TensorDelayed:
        return history > 0 && std::isfinite(history) ? scale_quotient(float(e.max), float(history)) : 1;
      case ScaleRule::Nvfp4:  // the global scale s_g = 448 * 6 / amax
        return usable ? scale_quotient(float(contract::kE4M3.max_finite() * e.max), amax) : 1;
      default:
        return 1;
    }
  }

  // Every tile of height x width values (the last ones of a row or column may be smaller).
  void tiles(const RecipeInfo& r, const Element& e, float tensor_s, std::size_t width,
             std::size_t height, RecipeOutcome& o) {
    for (std::size_t r0 = 0; r0 < q_.rows; r0 += height) {
      const std::size_t r1 = std::min(q_.rows, r0 + height);
      for (std::size_t c0 = 0; c0 < q_.cols; c0 += width) {
        const std::size_t c1 = std::min(q_.cols, c0 + width);
        float amax = 0;
        bool nonfinite = false;
        for (std::size_t row = r0; row < r1; ++row)
          for (std::size_t c = c0; c < c1; ++c) {
            const float v = load_(row * q_.cols + c);
            if (!std::isfinite(v))
              nonfinite = true;
            else
              amax = std::max(amax, std::fabs(v));
          }
        ++o.blocks;
        const BlockScale b = block_scale(r, e, amax, nonfinite, tensor_s);
        if (b.nonfinite) {
          ++o.blocks_nonfinite;
          continue;
        }
        bool any_nonzero = false, any_kept = false;
        for (std::size_t row = r0; row < r1; ++row)
          for (std::size_t c = c0; c < c1; ++c) {
            const float v = load_(row * q_.cols + c);
            if (!std::isfinite(v)) continue;
            any_nonzero |= v != 0;
            any_kept |= quantize(v, b.s, e, o);
          }
        if (any_nonzero && !any_kept) ++o.blocks_lost;
      }
    }
  }

  Load load_;
  const RecipeRequest& q_;
  std::size_t n_;
};

template <class Load>
void replay(Load load, const RecipeRequest& q, RecipeResult* out) {
  Replay<Load>(load, q).run(out);
}

}  // namespace

void compute_recipes(const void* data, ElementType type, const RecipeRequest& request, RecipeResult* out) {
  const stats::DefaultFloatingPointMode mode;
  *out = RecipeResult{};
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (type) {
    case ElementType::F32:
      replay([bytes](std::size_t i) {
        uint32_t b;
        std::memcpy(&b, bytes + 4 * i, 4);
        return std::bit_cast<float>(b);
      }, request, out);
      break;
    case ElementType::F16:
      replay([bytes](std::size_t i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        return float(stats::f16_bits_to_double(b));
      }, request, out);
      break;
    case ElementType::BF16:
      replay([bytes](std::size_t i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        return std::bit_cast<float>(uint32_t(b) << 16);
      }, request, out);
      break;
    default:
      break;  // recipes_read() says which types are read
  }
}

}  // namespace fpscope
