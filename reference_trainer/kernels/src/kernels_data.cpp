// Data movement: dtype casts, fills, same-dtype copies, and inject_fault, which plants a NaN or
// an Inf at one element so tests and demonstrations can start a fault where they choose.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"
#include "mpt/numerics.h"
#include "parallel.h"

namespace mpt::kernels {
namespace {

constexpr int64_t kChunk = 1 << 15;

size_t byte_count(const TensorArg& t) { return static_cast<size_t>(t.numel()) * dtype_size(t->dtype); }

// Writes one fp32 value, rounded to the tensor's floating dtype, at flat index i.
void store_element(const mpt_tensor& t, int64_t i, float value) {
  store_from_f32(&value, static_cast<char*>(t.data) + i * static_cast<int64_t>(dtype_size(t.dtype)), t.dtype, 1);
}

}  // namespace

void cast(const Launch& l) {
  l.expect_counts(1, 1);
  TensorArg x = l.input(0, "x"), y = l.output(0, "y");
  l.expect_float(x); l.expect_float(y);
  l.expect_same_shape(y, x);
  int64_t n = x.numel();
  if (x->dtype == y->dtype) {
    if (x->data != y->data) std::memmove(y->data, x->data, byte_count(x));
  } else if (x->dtype == MPT_DTYPE_F32) {
    store_from_f32(static_cast<const float*>(x->data), y->data, y->dtype, n);
  } else if (y->dtype == MPT_DTYPE_F32) {
    load_as_f32(x->data, x->dtype, static_cast<float*>(y->data), n);
  } else {  // f16 <-> bf16 through the exact fp32 value, in cache-sized pieces
    parallel_for(n, kChunk, [&](int64_t b, int64_t e) {
      std::vector<float> piece(static_cast<size_t>(std::min<int64_t>(e - b, 4096)));
      for (int64_t i = b; i < e; i += static_cast<int64_t>(piece.size())) {
        int64_t len = std::min<int64_t>(e - i, static_cast<int64_t>(piece.size()));
        load_as_f32(static_cast<const uint16_t*>(x->data) + i, x->dtype, piece.data(), len);
        store_from_f32(piece.data(), static_cast<uint16_t*>(y->data) + i, y->dtype, len);
      }
    });
  }
}

void fill(const Launch& l) {
  l.expect_counts(0, 1);
  TensorArg y = l.output(0, "y");
  double value = l.scalar("value");
  int64_t n = y.numel();
  if (y->dtype == MPT_DTYPE_I32) {
    if (value != std::floor(value) || std::fabs(value) > 2147483647.0)
      l.fail(y.label + ": scalar 'value' = " + std::to_string(value) + " is not an i32 value");
    int32_t* out = static_cast<int32_t*>(y->data);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(value);
    return;
  }
  l.expect_float(y);
  float v = static_cast<float>(value);
  if (y->dtype == MPT_DTYPE_F32) {
    float* out = static_cast<float*>(y->data);
    parallel_for(n, kChunk, [&](int64_t b, int64_t e) { std::fill(out + b, out + e, v); });
    return;
  }
  uint16_t bits = y->dtype == MPT_DTYPE_F16 ? f32_to_f16(v) : f32_to_bf16(v);
  uint16_t* out = static_cast<uint16_t*>(y->data);
  parallel_for(n, kChunk, [&](int64_t b, int64_t e) { std::fill(out + b, out + e, bits); });
}

void copy(const Launch& l) {
  l.expect_counts(1, 1);
  TensorArg x = l.input(0, "x"), y = l.output(0, "y");
  if (y->dtype != x->dtype)
    l.fail(y.label + ": expected the dtype of " + x.label + " (" + dtype_name(x->dtype) + "), got " +
           dtype_name(y->dtype) + "; use `cast` to change dtype");
  l.expect_same_shape(y, x);
  if (x->data != y->data) std::memmove(y->data, x->data, byte_count(x));
}

void inject_fault(const Launch& l) {
  l.expect_counts(1, 1);
  TensorArg x = l.input(0, "x"), out = l.output(0, "x");
  l.expect_float(x);
  l.expect_same_shape(out, x);
  if (out->dtype != x->dtype) l.fail(out.label + ": expected the dtype of " + x.label);
  int64_t index = l.integer("index", 0);
  int64_t kind = l.integer("kind", 0);
  if (index >= x.numel())
    l.fail("scalar 'index' = " + std::to_string(index) + " is outside " + x.label + " of " +
           std::to_string(x.numel()) + " elements");
  if (kind > 2) l.fail("scalar 'kind' must be 0 (NaN), 1 (+Inf) or 2 (-Inf), got " + std::to_string(kind));
  if (out->data != x->data) std::memmove(out->data, x->data, byte_count(x));
  const float values[3] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  store_element(*out, index, values[kind]);
}

}  // namespace mpt::kernels
