/* Device code of the fp8 (and fp4) quantize and dequantize kernels. Each follows the CPU library's
 * rules (kernels_fp8.cpp, docs/kernels.md) step for step: amaxes of finite values, scales from the
 * same fp32 arithmetic, each product x * s in fp32, then the product rounded to the element format
 * (nearest, ties to even, saturating) by integer arithmetic on its bits, so that every byte, scale
 * and dequantized value equals the CPU's. Built with --fmad=false like the other kernels.
 *
 * The work is small next to the matrix products it feeds: a tensor's amax is one grid-stride pass
 * with an atomic maximum per thread, and a block-scaled tensor takes one thread per tile (32, 128
 * or 16 values, or a 16x16 or 128x128 tile), which finds the tile's amax and writes its values.
 */

#include <cstdint>

#include "device_numerics.h"
#include "grid_stride.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

using dev::bits_float;
using dev::float_bits;
using dev::load_float;

constexpr uint32_t kFloatMaxBits = 0x7f7fffffu;

// [SECTION] values and scales

/* 2^k as an fp32, k in [-149, 127] (subnormal below -126). */
__device__ float pow2f(int k) {
  return k >= -126 ? bits_float(static_cast<uint32_t>(k + 127) << 23) : bits_float(1u << (k + 149));
}

__device__ bool is_nan(float v) { return (float_bits(v) & dev::kAbsMask) > dev::kF32Inf; }

/* floor(log2 a) of a positive finite fp32. */
__device__ int floor_log2(float a) {
  const uint32_t b = float_bits(a);
  if ((b >> 23) != 0) return static_cast<int>(b >> 23) - 127;
  return (31 - __clz(static_cast<int>(b))) - 149;
}

/* Whether a positive finite fp32 is a power of two. */
__device__ bool is_pow2(float a) {
  const uint32_t b = float_bits(a);
  return (b >> 23) != 0 ? (b & 0x7fffffu) == 0 : __popc(static_cast<int>(b)) == 1;
}

/* max / amax in fp32, the largest finite fp32 where the quotient overflows. */
__device__ float quotient(float max, float amax) {
  const float q = max / amax;
  return (float_bits(q) & dev::kAbsMask) == dev::kF32Inf ? bits_float(kFloatMaxBits) : q;
}

/* The largest power of two not above a positive normal s: its exponent field alone. */
__device__ float power_of_two_below(float s) { return bits_float(float_bits(s) & 0xff800000u); }

/* The byte of an fp32 value v in format f: |v| rounded to the format's grid, ties to even, as if
 * the exponent had no top; saturated at the largest finite value where that exceeds it (an
 * infinite v too); NaN becomes the format's NaN. */
__device__ uint8_t encode(float v, const ByteFormat& f) {
  const uint32_t b = float_bits(v);
  const uint32_t a = b & dev::kAbsMask;
  if (a > dev::kF32Inf) return f.nan_bits;
  const uint8_t sign = (b >> 31) != 0 ? f.sign_bit : 0;
  if (a == dev::kF32Inf) return static_cast<uint8_t>(sign | f.max_bits);
  // Zero, and fp32 subnormals (below 2^-126, far under half of any format's smallest value).
  if ((a >> 23) == 0) return sign;
  const int e = static_cast<int>(a >> 23) - 127;
  const uint64_t significand = (a & 0x7fffffu) | 0x800000u;  // |v| = significand * 2^(e - 23)
  const int exponent = e > f.min_exponent ? e : f.min_exponent;
  // |v| in units of the grid's spacing at that exponent, 2^(exponent - mantissa_bits).
  const int shift = 23 + exponent - f.mantissa_bits - e;  // at least 23 - 3
  const uint32_t whole = shift >= 26 ? 0u : dev::shift_right_nearest_even(significand, static_cast<unsigned>(shift));
  const uint32_t one = 1u << f.mantissa_bits;
  if (whole < one) return static_cast<uint8_t>(sign | whole);  // zero or a subnormal
  int lead = exponent;
  uint32_t mantissa = whole - one;
  if (whole == 2 * one) {  // rounded up into the next binade
    lead += 1;
    mantissa = 0;
  }
  if (lead > f.max_exponent || (lead == f.max_exponent && mantissa > f.max_mantissa))
    return static_cast<uint8_t>(sign | f.max_bits);
  return static_cast<uint8_t>(sign | ((lead + 1 - f.min_exponent) << f.mantissa_bits) | mantissa);
}

/* The byte of x scaled by s: an infinite x stays infinite where the format has Inf, else NaN. */
__device__ uint8_t encode_scaled(float x, float s, const ByteFormat& f) {
  const uint32_t a = float_bits(x) & dev::kAbsMask;
  if (a == dev::kF32Inf && f.has_inf()) return static_cast<uint8_t>((x < 0.0f ? f.sign_bit : 0) | f.inf_bits);
  if (a >= dev::kF32Inf) return f.nan_bits;
  return encode(x * s, f);
}

/* The value of byte q in format f. */
__device__ float decode(uint8_t q, const ByteFormat& f) {
  const uint32_t magnitude = q & f.magnitude_mask();
  const int field = static_cast<int>(magnitude >> f.mantissa_bits);
  const uint32_t mantissa = magnitude & ((1u << f.mantissa_bits) - 1u);
  const int top_field = static_cast<int>(f.magnitude_mask() >> f.mantissa_bits);
  float value;
  if (f.has_inf() && field == top_field) {
    value = mantissa == 0 ? bits_float(dev::kF32Inf) : bits_float(0x7fc00000u);
  } else if (f.has_nan() && !f.has_inf() && magnitude == f.magnitude_mask()) {
    value = bits_float(0x7fc00000u);
  } else if (field == 0) {
    value = static_cast<float>(mantissa) * pow2f(f.min_exponent - f.mantissa_bits);
  } else {
    value = static_cast<float>((1u << f.mantissa_bits) + mantissa) * pow2f(field - 1 + f.min_exponent - f.mantissa_bits);
  }
  return (q & f.sign_bit) != 0 ? -value : value;
}

// [SECTION] per-tensor scaling

/* amax[0]: the largest finite |x| as fp32 bits; amax[1]: 1 if a NaN or Inf was seen. */
__global__ void amax_kernel(Flat x, uint32_t* amax) {
  uint32_t largest = 0, nonfinite = 0;
  MPT_FOR_EACH(i, x.n) {
    const uint32_t a = float_bits(load_float(x.data, x.dtype, i)) & dev::kAbsMask;
    if (a >= dev::kF32Inf) {
      nonfinite = 1;
    } else if (a > largest) {
      largest = a;
    }
  }
  if (largest != 0) atomicMax(&amax[0], largest);
  if (nonfinite != 0) atomicMax(&amax[1], nonfinite);
}

/* One thread: the tensor's scale s (into *s) and 1/s (into *scale_inv), from its amax or, for
 * delayed scaling, from the largest amax of the history, which then takes this step's amax first. */
__global__ void tensor_scale_kernel(const uint32_t* amax, float max, float* history, int64_t steps, bool update_history,
                                    bool pow2, int64_t n, float* s_out, float* scale_inv) {
  const float tensor_amax = bits_float(amax[0]);
  const bool nonfinite = amax[1] != 0;
  float s = 1.0f;
  if (history != nullptr) {
    float longest = 0.0f;
    for (int64_t i = 0; i < steps; ++i) longest = history[i] > longest ? history[i] : longest;
    if (longest > 0.0f && (float_bits(longest) & dev::kAbsMask) < dev::kF32Inf) s = quotient(max, longest);
    if (update_history && !nonfinite && n > 0) {
      for (int64_t i = steps - 1; i > 0; --i) history[i] = history[i - 1];
      history[0] = tensor_amax;
    }
  } else if (!nonfinite && tensor_amax > 0.0f) {
    s = quotient(max, tensor_amax);
  }
  if (pow2) s = power_of_two_below(s);
  *s_out = s;
  *scale_inv = 1.0f / s;
}

__global__ void encode_tensor_kernel(Flat x, uint8_t* q, const float* s, ByteFormat f) {
  const float scale = *s;
  MPT_FOR_EACH(i, x.n) q[i] = encode_scaled(load_float(x.data, x.dtype, i), scale, f);
}

// [SECTION] block scaling: one thread per tile

struct TileAmax {
  float value;
  bool nonfinite;
};

__device__ TileAmax tile_amax(Flat x, const TileGrid& g, int64_t k) {
  TileAmax t{0.0f, false};
  for (int64_t r = g.row_begin(k); r < g.row_end(k); ++r)
    for (int64_t c = g.col_begin(k); c < g.col_end(k); ++c) {
      const float v = load_float(x.data, x.dtype, r * g.cols + c);
      const uint32_t a = float_bits(v) & dev::kAbsMask;
      if (a >= dev::kF32Inf) {
        t.nonfinite = true;
      } else if (bits_float(a) > t.value) {
        t.value = bits_float(a);
      }
    }
  return t;
}

/* Writes byte `fill` (or, where `s` is given, each value quantized at s) over tile k. */
__device__ void write_tile(Flat x, uint8_t* q, const TileGrid& g, int64_t k, float s, const ByteFormat& f, bool fill,
                           uint8_t fill_byte) {
  for (int64_t r = g.row_begin(k); r < g.row_end(k); ++r)
    for (int64_t c = g.col_begin(k); c < g.col_end(k); ++c) {
      const int64_t i = r * g.cols + c;
      q[i] = fill ? fill_byte : encode_scaled(load_float(x.data, x.dtype, i), s, f);
    }
}

/* Microscaling: an E8M0 power of two per tile, by the OCP rule (floor(log2 amax) - emax of the
 * element format) or rounded up (amax / max rounded up to a power of two). */
__global__ void quantize_mx_kernel(Flat x, uint8_t* q, uint8_t* scales, TileGrid g, ByteFormat f, bool round_up) {
  MPT_FOR_EACH(k, g.tiles()) {
    const TileAmax amax = tile_amax(x, g, k);
    if (amax.nonfinite) {  // the scale is NaN: every value of the block decodes to NaN
      scales[k] = 0xFF;
      write_tile(x, q, g, k, 0.0f, f, true, f.nan_bits);
      continue;
    }
    int shared = 0;  // the block's values are divided by 2^shared
    if (amax.value > 0.0f) {
      if (round_up) {
        const float t = amax.value / f.max;
        shared = t == 0.0f ? -127 : floor_log2(t) + (is_pow2(t) ? 0 : 1);
      } else {
        shared = floor_log2(amax.value) - f.max_exponent;
      }
      shared = shared < -127 ? -127 : shared > 127 ? 127 : shared;
    }
    scales[k] = static_cast<uint8_t>(shared + 127);
    write_tile(x, q, g, k, pow2f(-shared), f, false, 0);
  }
}

/* A power-of-two scale per tile: max / amax rounded down (1 for an all-zero or non-finite tile). */
__global__ void quantize_block_kernel(Flat x, uint8_t* q, float* scale_inv, TileGrid g, ByteFormat f) {
  MPT_FOR_EACH(k, g.tiles()) {
    const TileAmax amax = tile_amax(x, g, k);
    const float s = amax.nonfinite || amax.value == 0.0f ? 1.0f : power_of_two_below(quotient(f.max, amax.value));
    scale_inv[k] = 1.0f / s;
    write_tile(x, q, g, k, s, f, false, 0);
  }
}

/* NVFP4: the tensor's scale maps its amax to 448 x 6; each tile's e4m3 scale is its amax / 6 in
 * the tensor's scale, rounded and saturated; a tile whose scale rounds to zero loses its values. */
__global__ void quantize_nvfp4_kernel(Flat x, uint8_t* q, uint8_t* scales, float* global_scale_inv, TileGrid g,
                                      const uint32_t* tensor_amax, ByteFormat e2m1, ByteFormat e4m3) {
  const float amax_tensor = bits_float(tensor_amax[0]);
  const float global_s = tensor_amax[1] == 0 && amax_tensor > 0.0f ? quotient(448.0f * 6.0f, amax_tensor) : 1.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *global_scale_inv = 1.0f / global_s;
  MPT_FOR_EACH(k, g.tiles()) {
    const TileAmax amax = tile_amax(x, g, k);
    if (amax.nonfinite) {  // e2m1 has no NaN: the block's scale is e4m3's NaN and its values zero
      scales[k] = e4m3.nan_bits;
      write_tile(x, q, g, k, 0.0f, e2m1, true, 0);
      continue;
    }
    scales[k] = encode((amax.value / 6.0f) * global_s, e4m3);
    const float block_scale = decode(scales[k], e4m3);
    const float s = block_scale == 0.0f ? 0.0f : global_s / block_scale;
    write_tile(x, q, g, k, s, e2m1, false, 0);
  }
}

// [SECTION] back to a wider type

__global__ void dequantize_kernel(const uint8_t* q, ByteFormat f, const void* scales, int scale_kind, TileGrid g,
                                  const float* global_scale_inv, Flat y, ByteFormat e4m3) {
  MPT_FOR_EACH(i, y.n) {
    const int64_t k = g.tile_of(i / g.cols, i % g.cols);
    float scale;
    if (scale_kind == kScaleE8M0) {
      const uint8_t b = static_cast<const uint8_t*>(scales)[k];
      scale = b == 0xFF ? bits_float(0x7fc00000u) : pow2f(static_cast<int>(b) - 127);
    } else if (scale_kind == kScaleE4M3) {
      scale = decode(static_cast<const uint8_t*>(scales)[k], e4m3);
    } else {
      scale = static_cast<const float*>(scales)[k];
    }
    // A NaN is the default quiet NaN, as on the CPU: a GPU's product would not keep the same bits.
    float scaled = decode(q[i], f) * scale;
    if (global_scale_inv != nullptr && !is_nan(scaled)) scaled = scaled * *global_scale_inv;
    dev::store_float(y.data, y.dtype, i, is_nan(scaled) ? bits_float(0x7fc00000u) : scaled);
  }
}

}  // namespace

// [SECTION] launchers

cudaError_t fp8_quantize_tensor(Flat x, uint8_t* q, const ByteFormat& f, float* scale_inv, float* history,
                                int64_t steps, bool update_history, bool pow2, void* work, cudaStream_t stream) {
  auto* amax = static_cast<uint32_t*>(work);
  auto* s = reinterpret_cast<float*>(amax + 2);
  cudaError_t e = cudaMemsetAsync(amax, 0, 2 * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  MPT_LAUNCH(amax_kernel, blocks_for(x.n), kThreads, stream)(x, amax);
  MPT_LAUNCH(tensor_scale_kernel, 1, 1, stream)(amax, f.max, history, steps, update_history, pow2, x.n, s, scale_inv);
  MPT_LAUNCH(encode_tensor_kernel, blocks_for(x.n), kThreads, stream)(x, q, s, f);
  return cudaGetLastError();
}

cudaError_t fp8_quantize_mx(Flat x, uint8_t* q, uint8_t* scales, const TileGrid& g, const ByteFormat& f, bool round_up,
                            cudaStream_t stream) {
  MPT_LAUNCH(quantize_mx_kernel, blocks_for(g.tiles()), kThreads, stream)(x, q, scales, g, f, round_up);
  return cudaGetLastError();
}

cudaError_t fp8_quantize_block(Flat x, uint8_t* q, float* scale_inv, const TileGrid& g, const ByteFormat& f,
                               cudaStream_t stream) {
  MPT_LAUNCH(quantize_block_kernel, blocks_for(g.tiles()), kThreads, stream)(x, q, scale_inv, g, f);
  return cudaGetLastError();
}

cudaError_t fp8_quantize_nvfp4(Flat x, uint8_t* q, uint8_t* scales, float* global_scale_inv, const TileGrid& g,
                               void* work, cudaStream_t stream) {
  auto* amax = static_cast<uint32_t*>(work);
  cudaError_t e = cudaMemsetAsync(amax, 0, 2 * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  MPT_LAUNCH(amax_kernel, blocks_for(x.n), kThreads, stream)(x, amax);
  MPT_LAUNCH(quantize_nvfp4_kernel, blocks_for(g.tiles()), kThreads, stream)(x, q, scales, global_scale_inv, g, amax,
                                                                              byte_format(MPT_DTYPE_E2M1),
                                                                              byte_format(MPT_DTYPE_E4M3));
  return cudaGetLastError();
}

cudaError_t fp8_dequantize(const uint8_t* q, const ByteFormat& f, const void* scales, int scale_kind, const TileGrid& g,
                           const float* global_scale_inv, Flat y, cudaStream_t stream) {
  MPT_LAUNCH(dequantize_kernel, blocks_for(y.n), kThreads, stream)(q, f, scales, scale_kind, g, global_scale_inv, y,
                                                                   byte_format(MPT_DTYPE_E4M3));
  return cudaGetLastError();
}

}  // namespace mpt::cuda::detail
