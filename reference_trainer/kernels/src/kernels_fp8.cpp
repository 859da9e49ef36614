// Scaled quantization to the 8-bit and 4-bit float formats and back: the kernels behind mptrain's
// fp8 modes.
//
// A quantize kernel chooses scales s from the data (per tensor, per block of a row, per tile) or
// from a history of amaxes, multiplies each value by its s in fp32, rounds the product to e4m3,
// e5m2 or e2m1 (nearest, ties to even) and saturates at the format's largest finite value. It
// writes the narrow values and the decode scales (1/s: what a GEMM multiplies its fp32 sums by).
// `fp8_dequantize` multiplies back, in fp32, so that the existing matrix kernels can consume the
// operand: the products then accumulate in fp32 as on an fp8 tensor core.
//
// The arithmetic here is written for the kernel library alone, from the recipes' published rules
// (docs/kernels.md states them); tests hold it against an independent quantizer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels.h"
#include "launch_report.h"
#include "mpt/byte_formats.h"
#include "parallel.h"

namespace mpt::kernels {
namespace {

// [SECTION] The element formats

constexpr ByteFormat kE4M3Format = byte_format(MPT_DTYPE_E4M3);
constexpr ByteFormat kE5M2Format = byte_format(MPT_DTYPE_E5M2);
constexpr ByteFormat kE2M1Format = byte_format(MPT_DTYPE_E2M1);

// The format of q: e4m3 or e5m2, or e2m1 where the kernel takes it (microscaling and NVFP4, whose
// non-finite blocks are marked by a NaN scale, since e2m1 has no NaN).
const ByteFormat& format_of(const Launch& l, const TensorArg& q, bool e2m1 = false) {
  if (q->dtype == MPT_DTYPE_E4M3) return kE4M3Format;
  if (q->dtype == MPT_DTYPE_E5M2) return kE5M2Format;
  if (e2m1 && q->dtype == MPT_DTYPE_E2M1) return kE2M1Format;
  l.fail(q.label + ": expected dtype e4m3" + (e2m1 ? ", e5m2 or e2m1" : " or e5m2") + ", got " + dtype_name(q->dtype));
}

// The byte of an fp32 value v: |v| rounded to the format's grid (ties to even) as if the exponent
// had no top, saturated at the largest finite value where that rounding exceeds it (an infinite v
// too; *saturated then says so); NaN stays NaN. Inf saturates in e4m3 (which has no Inf) and stays
// Inf in e5m2 only when the input itself was infinite (see encode_scaled).
uint8_t encode(float v, const ByteFormat& f, bool* saturated = nullptr) {
  if (std::isnan(v)) return f.nan_bits;
  const uint8_t sign = std::signbit(v) ? f.sign_bit : 0x00;
  const double a = std::fabs(static_cast<double>(v));
  if (a == 0.0) return sign;
  if (std::isinf(a)) {
    if (saturated != nullptr) *saturated = true;
    return sign | f.max_bits;
  }
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): the leading bit is 2^(e2 - 1)
  const int exponent = std::max(e2 - 1, f.min_exponent);
  // a in units of the grid's spacing at that exponent: an exact scaling by a power of two.
  const double units = std::ldexp(a, f.mantissa_bits - exponent);
  double whole = std::floor(units);
  const double fraction = units - whole;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(whole, 2.0) != 0.0)) whole += 1.0;
  const double rounded = std::ldexp(whole, exponent - f.mantissa_bits);
  if (rounded > static_cast<double>(f.max)) {
    if (saturated != nullptr) *saturated = true;
    return sign | f.max_bits;
  }
  if (rounded == 0.0) return sign;
  int re = 0;
  std::frexp(rounded, &re);
  const int lead = re - 1;
  if (lead < f.min_exponent) return static_cast<uint8_t>(sign | static_cast<uint8_t>(whole));  // subnormal
  const int bias = 1 - f.min_exponent;
  const double significand = std::ldexp(rounded, f.mantissa_bits - lead);  // in [2^m, 2^(m+1))
  const int mantissa = static_cast<int>(significand) - (1 << f.mantissa_bits);
  return static_cast<uint8_t>(sign | ((lead + bias) << f.mantissa_bits) | mantissa);
}

// The byte of x scaled by s: the product rounded to fp32 first, as the recipes state.
uint8_t encode_scaled(float x, float s, const ByteFormat& f, bool* saturated = nullptr) {
  if (std::isinf(x) && f.has_inf()) return static_cast<uint8_t>((x < 0 ? f.sign_bit : 0x00) | f.inf_bits);
  if (!std::isfinite(x)) return f.nan_bits;
  return encode(x * s, f, saturated);
}

// What quantizing did to one chunk's values, for the launch report's store counts of the quantized
// output q (output 0): `results` the nonzero finite inputs, of them `flushed` written as zero,
// `subnormal` as a nonzero subnormal, `overflowed` saturated. The values of an MX or NVFP4 block
// holding a NaN or Inf are not quantized and not counted. Reported when the chunk ends, if the
// launch asked.
class Tally {
 public:
  explicit Tally(const ByteFormat& f) : f_(f) {}
  ~Tally() {
    if (LaunchReport* report = current_report()) report->add_stores(0, c_);
  }
  Tally(const Tally&) = delete;
  Tally& operator=(const Tally&) = delete;

  // x quantized at fp32 scale s, counted.
  uint8_t quantize(float x, float s) {
    bool saturated = false;
    const uint8_t q = encode_scaled(x, s, f_, &saturated);
    count(x, q, saturated);
    return q;
  }
  // x written as byte q, saturated or not.
  void count(float x, uint8_t q, bool saturated) {
    if (x == 0.0f || !std::isfinite(x)) return;
    const unsigned magnitude = q & f_.magnitude_mask();
    ++c_.results;
    c_.flushed += magnitude == 0 ? 1 : 0;
    c_.subnormal += magnitude != 0 && magnitude < (1u << f_.mantissa_bits) ? 1 : 0;
    c_.overflowed += saturated ? 1 : 0;
  }

 private:
  const ByteFormat& f_;
  mpt_store_counts c_{};
};

// The value of every byte of a format, NaN and Inf included.
std::vector<float> decode_table(const ByteFormat& f) {
  std::vector<float> table(256);
  const int bias = 1 - f.min_exponent;
  const int magnitude_mask = static_cast<int>(f.magnitude_mask());
  for (int b = 0; b < 256; ++b) {
    const int field = (b & magnitude_mask) >> f.mantissa_bits;
    const int mantissa = b & ((1 << f.mantissa_bits) - 1);
    double magnitude = field == 0 ? std::ldexp(mantissa, f.min_exponent - f.mantissa_bits)
                                  : std::ldexp((1 << f.mantissa_bits) + mantissa, field - bias - f.mantissa_bits);
    const int top_field = magnitude_mask >> f.mantissa_bits;
    if (f.has_inf() && field == top_field) magnitude = mantissa == 0 ? INFINITY : NAN;
    if (!f.has_inf() && f.has_nan() && (b & magnitude_mask) == magnitude_mask) magnitude = NAN;
    table[b] = static_cast<float>((b & f.sign_bit) ? -magnitude : magnitude);
  }
  return table;
}

const std::vector<float>& decoded(const ByteFormat& f) {
  static const std::vector<float> e4m3 = decode_table(kE4M3Format);
  static const std::vector<float> e5m2 = decode_table(kE5M2Format);
  static const std::vector<float> e2m1 = decode_table(kE2M1Format);
  return f.dtype == MPT_DTYPE_E4M3 ? e4m3 : f.dtype == MPT_DTYPE_E5M2 ? e5m2 : e2m1;
}

// [SECTION] Scales

// fp32 max / amax, the largest finite fp32 where the quotient overflows.
float quotient(float max, float amax) {
  const float q = max / amax;
  return std::isinf(q) ? std::numeric_limits<float>::max() : q;
}

// The largest power of two not above a positive finite s.
float power_of_two_below(float s) {
  int e = 0;
  std::frexp(s, &e);
  return std::ldexp(1.0f, e - 1);
}

// Largest finite |x| of values [begin, end) with the given stride between rows of a tile; whether a
// NaN or Inf was seen.
struct Amax {
  float value = 0.0f;
  bool nonfinite = false;
  void add(float x) {
    if (!std::isfinite(x)) {
      nonfinite = true;
    } else {
      value = std::max(value, std::fabs(x));
    }
  }
};

// fn(i) for the flat index of every value of tile k (the caller reshapes a weight to [out, in...]).
template <typename Fn>
void each_in_tile(const TileGrid& g, int64_t k, Fn&& fn) {
  for (int64_t r = g.row_begin(k); r < g.row_end(k); ++r)
    for (int64_t c = g.col_begin(k); c < g.col_end(k); ++c) fn(r * g.cols + c);
}

// The grid of `x` for the launch's `block` and `tile_rows` scalars, with `scales` checked to hold
// one scale per tile ([rows of tiles, tiles per row]).
TileGrid tile_grid(const Launch& l, const TensorArg& x, const TensorArg& scales, int64_t default_block) {
  const TileGrid g = mpt::tile_grid(*x, l.integer_or("block", default_block, 1), l.integer_or("tile_rows", 1, 1));
  if (scales->ndim != 2 || scales.dim(0) != g.rows_of_tiles || scales.dim(1) != g.tiles_per_row)
    l.fail(scales.label + ": expected shape [" + std::to_string(g.rows_of_tiles) + "," +
           std::to_string(g.tiles_per_row) + "] (tiles of " + std::to_string(g.tile_rows) + " x " +
           std::to_string(g.block) + "), got " + shape_text(*scales));
  return g;
}

void expect_same_shape_any_dtype(const Launch& l, const TensorArg& t, const TensorArg& like) {
  bool same = t->ndim == like->ndim;
  for (int i = 0; same && i < t->ndim; ++i) same = t.dim(i) == like.dim(i);
  if (!same) l.fail(t.label + ": expected shape " + shape_text(*like) + ", got " + shape_text(*t));
}

}  // namespace

// [SECTION] Per-tensor scaling: current or delayed

void fp8_quantize_tensor(const Launch& l) {
  const bool delayed = l.n_inputs() == 2;
  if (!(l.n_inputs() == 1 && l.n_outputs() == 2) && !(delayed && l.n_outputs() == 3))
    l.fail("expected inputs x[, amax_history] and outputs q, scale_inv[, amax_history], got " +
           std::to_string(l.n_inputs()) + " input(s) and " + std::to_string(l.n_outputs()) + " output(s)");
  TensorArg x = l.input(0, "x"), q = l.output(0, "q"), scale_inv = l.output(1, "scale_inv");
  l.expect_float(x);
  const ByteFormat& f = format_of(l, q);
  expect_same_shape_any_dtype(l, q, x);
  l.expect_dtype(scale_inv, MPT_DTYPE_F32);
  l.expect_numel(scale_inv, 1);
  const bool pow2 = l.flag("pow2");

  F32Input xv(*x);
  const int64_t n = x.numel();
  Amax amax;
  for (int64_t i = 0; i < n; ++i) amax.add(xv[i]);

  float s = 1.0f;
  if (delayed) {
    TensorArg history = l.input(1, "amax_history"), history_out = l.output(2, "amax_history");
    l.expect_dtype(history, MPT_DTYPE_F32);
    if (history->ndim != 1 || history.numel() < 1) l.fail(history.label + ": expected a 1-D history of at least one step");
    if (history_out->data != history->data) l.fail(history_out.label + ": expected the history itself (updated in place)");
    auto* h = static_cast<float*>(history->data);
    const int64_t steps = history.numel();
    float longest = 0.0f;  // the largest amax of the steps before this one
    for (int64_t i = 0; i < steps; ++i) longest = std::max(longest, h[i]);
    if (longest > 0.0f && std::isfinite(longest)) s = quotient(f.max, longest);
    if (l.flag("update_history") && !amax.nonfinite && n > 0) {
      std::memmove(h + 1, h, static_cast<size_t>(steps - 1) * sizeof(float));  // newest first
      h[0] = amax.value;
    }
  } else if (!amax.nonfinite && amax.value > 0.0f) {
    s = quotient(f.max, amax.value);
  }
  if (pow2) s = power_of_two_below(s);

  auto* out = static_cast<uint8_t*>(q->data);
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    Tally tally(f);
    for (int64_t i = b; i < e; ++i) out[i] = tally.quantize(xv[i], s);
  });
  *static_cast<float*>(scale_inv->data) = 1.0f / s;
}

// [SECTION] Microscaling: an E8M0 power of two per 32 values of a row

void fp8_quantize_mx(const Launch& l) {
  l.expect_counts(1, 2);
  TensorArg x = l.input(0, "x"), q = l.output(0, "q"), scales = l.output(1, "scales");
  l.expect_float(x);
  const ByteFormat& f = format_of(l, q, true);
  expect_same_shape_any_dtype(l, q, x);
  l.expect_dtype(scales, MPT_DTYPE_E8M0);
  const bool round_up = l.flag("round_up");
  const TileGrid g = tile_grid(l, x, scales, 32);

  F32Input xv(*x);
  auto* out = static_cast<uint8_t*>(q->data);
  auto* sc = static_cast<uint8_t*>(scales->data);
  parallel_for(g.tiles(), 256, [&](int64_t b, int64_t e) {
    Tally tally(f);
    for (int64_t k = b; k < e; ++k) {
      Amax amax;
      each_in_tile(g, k, [&](int64_t i) { amax.add(xv[i]); });
      if (amax.nonfinite) {  // the scale is NaN: every value of the block decodes to NaN
        sc[k] = 0xFF;
        each_in_tile(g, k, [&](int64_t i) { out[i] = f.nan_bits; });
        continue;
      }
      int shared = 0;  // the block's values are divided by 2^shared
      if (amax.value > 0.0f) {
        int e2 = 0;
        if (round_up) {  // amax / max in fp32, rounded up to a power of two
          const float t = amax.value / f.max;
          if (t == 0.0f) {
            shared = -127;
          } else {
            const double m = std::frexp(static_cast<double>(t), &e2);
            shared = m == 0.5 ? e2 - 1 : e2;
          }
        } else {  // the OCP rule: floor(log2 amax) - emax of the element format
          std::frexp(static_cast<double>(amax.value), &e2);
          shared = (e2 - 1) - f.max_exponent;
        }
        shared = std::clamp(shared, -127, 127);
      }
      sc[k] = static_cast<uint8_t>(shared + 127);
      const float s = std::ldexp(1.0f, -shared);
      each_in_tile(g, k, [&](int64_t i) { out[i] = tally.quantize(xv[i], s); });
    }
  });
}

// [SECTION] Blockwise scaling: a power-of-two scale per 1 x `block` run of a row, or per tile

void fp8_quantize_block(const Launch& l) {
  l.expect_counts(1, 2);
  TensorArg x = l.input(0, "x"), q = l.output(0, "q"), scale_inv = l.output(1, "scale_inv");
  l.expect_float(x);
  const ByteFormat& f = format_of(l, q);
  expect_same_shape_any_dtype(l, q, x);
  l.expect_dtype(scale_inv, MPT_DTYPE_F32);
  const TileGrid g = tile_grid(l, x, scale_inv, 128);

  F32Input xv(*x);
  auto* out = static_cast<uint8_t*>(q->data);
  auto* inv = static_cast<float*>(scale_inv->data);
  parallel_for(g.tiles(), 16, [&](int64_t b, int64_t e) {
    Tally tally(f);
    for (int64_t k = b; k < e; ++k) {
      Amax amax;
      each_in_tile(g, k, [&](int64_t i) { amax.add(xv[i]); });
      const float s = amax.nonfinite || amax.value == 0.0f ? 1.0f : power_of_two_below(quotient(f.max, amax.value));
      inv[k] = 1.0f / s;
      each_in_tile(g, k, [&](int64_t i) { out[i] = tally.quantize(xv[i], s); });
    }
  });
}

// [SECTION] NVFP4: an fp32 scale for the tensor and an e4m3 scale per 16 values of a row (or tile)

void fp8_quantize_nvfp4(const Launch& l) {
  l.expect_counts(1, 3);
  TensorArg x = l.input(0, "x"), q = l.output(0, "q"), scales = l.output(1, "block_scales");
  TensorArg global = l.output(2, "global_scale_inv");
  l.expect_float(x);
  l.expect_dtype(q, MPT_DTYPE_E2M1);
  expect_same_shape_any_dtype(l, q, x);
  l.expect_dtype(scales, MPT_DTYPE_E4M3);
  l.expect_dtype(global, MPT_DTYPE_F32);
  l.expect_numel(global, 1);
  const TileGrid g = tile_grid(l, x, scales, 16);

  F32Input xv(*x);
  Amax tensor;
  for (int64_t i = 0; i < x.numel(); ++i) tensor.add(xv[i]);
  // The tensor's scale maps its amax to the largest block scale times the largest element: 448 x 6.
  const float global_s = !tensor.nonfinite && tensor.value > 0.0f ? quotient(448.0f * 6.0f, tensor.value) : 1.0f;
  auto* out = static_cast<uint8_t*>(q->data);
  auto* sc = static_cast<uint8_t*>(scales->data);
  const std::vector<float>& e4m3 = decoded(kE4M3Format);
  parallel_for(g.tiles(), 16, [&](int64_t b, int64_t e) {
    Tally tally(kE2M1Format);
    for (int64_t k = b; k < e; ++k) {
      Amax amax;
      each_in_tile(g, k, [&](int64_t i) { amax.add(xv[i]); });
      if (amax.nonfinite) {  // e2m1 has no NaN: the block's scale is e4m3's NaN and its values zero
        sc[k] = kE4M3Format.nan_bits;
        each_in_tile(g, k, [&](int64_t i) { out[i] = 0; });
        continue;
      }
      // The block's e4m3 scale: amax / 6 in the tensor's scale, rounded and saturated.
      sc[k] = encode((amax.value / 6.0f) * global_s, kE4M3Format);
      const float block_scale = e4m3[sc[k]];
      const float s = block_scale == 0.0f ? 0.0f : global_s / block_scale;  // 0: the block's scale underflowed
      each_in_tile(g, k, [&](int64_t i) {
        bool saturated = false;
        out[i] = encode(xv[i] * s, kE2M1Format, &saturated);
        tally.count(xv[i], out[i], saturated);
      });
    }
  });
  *static_cast<float*>(global->data) = 1.0f / global_s;
}

// [SECTION] Back to a wider type

void fp8_dequantize(const Launch& l) {
  const bool nvfp4 = l.n_inputs() == 3;
  if (!nvfp4) l.expect_counts(2, 1);
  if (nvfp4) l.expect_counts(3, 1);
  TensorArg q = l.input(0, "q"), scale = l.input(1, "scale"), y = l.output(0, "y");
  const ByteFormat& f = format_of(l, q, true);
  l.expect_float(y);
  expect_same_shape_any_dtype(l, y, q);
  const bool per_tensor = l.integer_or("block", 0, 0) == 0;
  const bool e8m0 = scale->dtype == MPT_DTYPE_E8M0;
  if (nvfp4) {
    l.expect_dtype(q, MPT_DTYPE_E2M1);
    l.expect_dtype(scale, MPT_DTYPE_E4M3);
  } else if (!e8m0) {
    l.expect_dtype(scale, MPT_DTYPE_F32);
  }
  if (f.dtype == MPT_DTYPE_E2M1 && !e8m0 && !nvfp4)
    l.fail(q.label + ": e2m1 values take E8M0 block scales, or NVFP4's e4m3 block scales and a global scale");
  float global_inv = 1.0f;
  if (nvfp4) {
    TensorArg global = l.input(2, "global_scale_inv");
    l.expect_dtype(global, MPT_DTYPE_F32);
    l.expect_numel(global, 1);
    global_inv = *static_cast<const float*>(global->data);
  }
  if (per_tensor && scale.numel() != 1) l.fail(scale.label + ": expected one value, got " + shape_text(*scale));
  const TileGrid g = per_tensor ? one_tile(*q) : tile_grid(l, q, scale, 0);

  const std::vector<float>& value = decoded(f);
  const auto* in = static_cast<const uint8_t*>(q->data);
  auto scale_of = [&](int64_t k) {
    if (nvfp4) return decoded(kE4M3Format)[static_cast<const uint8_t*>(scale->data)[k]];
    if (!e8m0) return static_cast<const float*>(scale->data)[k];
    const uint8_t b = static_cast<const uint8_t*>(scale->data)[k];
    return b == 0xFF ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, int(b) - 127);
  };
  F32Output out(*y);
  float* yv = out.data();
  parallel_for(g.rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < g.cols; ++c) {
        // A NaN (a NaN value or scale, or Inf times 0) is the default quiet NaN, whatever bits the
        // product of the operands would keep: the CUDA kernel writes the same.
        float scaled = value[in[r * g.cols + c]] * scale_of(g.tile_of(r, c));
        if (nvfp4 && !std::isnan(scaled)) scaled = scaled * global_inv;
        yv[r * g.cols + c] = std::isnan(scaled) ? std::numeric_limits<float>::quiet_NaN() : scaled;
      }
  });
  out.store();
}

}  // namespace mpt::kernels
