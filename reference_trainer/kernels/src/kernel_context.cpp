// Argument checks and fp32 tensor views shared by every CPU kernel (see kernel_context.h).
#include "kernel_context.h"

#include <cmath>
#include <cstring>

#include "launch_report.h"
#include "mpt/numerics.h"
#include "parallel.h"

namespace mpt {

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case MPT_DTYPE_F32: return "f32";
    case MPT_DTYPE_F16: return "f16";
    case MPT_DTYPE_BF16: return "bf16";
    case MPT_DTYPE_I32: return "i32";
    case MPT_DTYPE_I64: return "i64";
    case MPT_DTYPE_U8: return "u8";
    case MPT_DTYPE_F64: return "f64";
    case MPT_DTYPE_E4M3: return "e4m3";
    case MPT_DTYPE_E5M2: return "e5m2";
    case MPT_DTYPE_E4M3FNUZ: return "e4m3fnuz";
    case MPT_DTYPE_E5M2FNUZ: return "e5m2fnuz";
    case MPT_DTYPE_E8M0: return "e8m0";
    case MPT_DTYPE_E2M1: return "e2m1";
    default: return "unknown dtype";
  }
}

bool is_float_dtype(int32_t dtype) {
  return dtype == MPT_DTYPE_F32 || dtype == MPT_DTYPE_F16 || dtype == MPT_DTYPE_BF16;
}

size_t dtype_size(int32_t dtype) { return mpt_dtype_bytes(dtype); }

int64_t element_count(const mpt_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim && i < MPT_MAX_DIMS; ++i) n *= t.shape[i];
  return n;
}

std::string shape_text(const mpt_tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim && i < MPT_MAX_DIMS; ++i) {
    if (i) s += ",";
    s += std::to_string(t.shape[i]);
  }
  return s + "]";
}

// [SECTION] Launch

void Launch::fail(const std::string& what) const {
  throw KernelFailure{MPT_ERR_BAD_ARGUMENTS, std::string(desc_.kernel) + ": " + what};
}

void Launch::expect_counts(int n_in, int n_out) const {
  if (desc_.n_inputs != n_in || desc_.n_outputs != n_out)
    fail("expected " + std::to_string(n_in) + " input(s) and " + std::to_string(n_out) +
         " output(s), got " + std::to_string(desc_.n_inputs) + " and " + std::to_string(desc_.n_outputs));
}

static TensorArg make_arg(const Launch& launch, const mpt_tensor* t, const char* kind, int index,
                          const char* role) {
  std::string label = std::string(kind) + " " + std::to_string(index) + " " + role;
  if (t->name && *t->name) label += " ('" + std::string(t->name) + "')";
  TensorArg arg{t, label};
  if (t->ndim < 0 || t->ndim > MPT_MAX_DIMS)
    launch.fail(label + ": ndim " + std::to_string(t->ndim) + " is outside 0.." + std::to_string(MPT_MAX_DIMS));
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 0) launch.fail(label + ": negative extent in shape " + shape_text(*t));
  if (dtype_size(t->dtype) == 0) launch.fail(label + ": unknown dtype " + std::to_string(t->dtype));
  if (!t->data && element_count(*t) > 0) launch.fail(label + ": data is NULL");
  return arg;
}

TensorArg Launch::input(int index, const char* role) const {
  if (index >= desc_.n_inputs) fail(std::string("missing input ") + std::to_string(index) + " " + role);
  return make_arg(*this, &desc_.inputs[index], "input", index, role);
}

TensorArg Launch::output(int index, const char* role) const {
  if (index >= desc_.n_outputs) fail(std::string("missing output ") + std::to_string(index) + " " + role);
  return make_arg(*this, &desc_.outputs[index], "output", index, role);
}

const mpt_scalar* Launch::find_scalar(const char* name) const {
  for (int i = 0; i < desc_.n_scalars; ++i)
    if (desc_.scalars[i].name && std::strcmp(desc_.scalars[i].name, name) == 0) return &desc_.scalars[i];
  return nullptr;
}

double Launch::scalar(const char* name) const {
  const mpt_scalar* s = find_scalar(name);
  if (!s) fail(std::string("missing scalar '") + name + "'");
  return s->value;
}

double Launch::scalar_or(const char* name, double fallback) const {
  const mpt_scalar* s = find_scalar(name);
  return s ? s->value : fallback;
}

bool Launch::flag(const char* name) const {
  double v = scalar_or(name, 0.0);
  if (v != 0.0 && v != 1.0) fail(std::string("scalar '") + name + "' must be 0 or 1, got " + std::to_string(v));
  return v == 1.0;
}

static int64_t checked_integer(const Launch& l, const char* name, double v, int64_t min) {
  if (!(v == std::floor(v)) || v < static_cast<double>(min) || v > 9.0e15)
    l.fail(std::string("scalar '") + name + "' must be an integer >= " + std::to_string(min) +
           ", got " + std::to_string(v));
  return static_cast<int64_t>(v);
}

int64_t Launch::integer(const char* name, int64_t min) const {
  return checked_integer(*this, name, scalar(name), min);
}

int64_t Launch::integer_or(const char* name, int64_t fallback, int64_t min) const {
  const mpt_scalar* s = find_scalar(name);
  return s ? checked_integer(*this, name, s->value, min) : fallback;
}

void Launch::expect_float(const TensorArg& t) const {
  if (!is_float_dtype(t->dtype))
    fail(t.label + ": expected a floating dtype (f32, f16 or bf16), got " + dtype_name(t->dtype));
}

void Launch::expect_dtype(const TensorArg& t, mpt_dtype dtype) const {
  if (t->dtype != dtype)
    fail(t.label + ": expected dtype " + dtype_name(dtype) + ", got " + dtype_name(t->dtype));
}

void Launch::expect_shape(const TensorArg& t, std::initializer_list<int64_t> extents, const char* dims) const {
  bool ok = t->ndim == static_cast<int32_t>(extents.size());
  std::string expected = "[";
  int i = 0;
  for (int64_t e : extents) {
    if (i) expected += ",";
    expected += e >= 0 ? std::to_string(e) : "*";
    if (ok && e >= 0 && t->shape[i] != e) ok = false;
    ++i;
  }
  expected += "]";
  if (!ok) fail(t.label + ": expected shape " + dims + " = " + expected + ", got " + shape_text(*t));
}

void Launch::expect_same_shape(const TensorArg& t, const TensorArg& like) const {
  bool ok = t->ndim == like->ndim;
  for (int i = 0; ok && i < t->ndim; ++i) ok = t->shape[i] == like->shape[i];
  if (!ok) fail(t.label + ": expected the shape of " + like.label + " " + shape_text(*like) +
                ", got " + shape_text(*t));
}

void Launch::expect_numel(const TensorArg& t, int64_t n) const {
  if (t.numel() != n)
    fail(t.label + ": expected " + std::to_string(n) + " element(s), got " + std::to_string(t.numel()) +
         " (shape " + shape_text(*t) + ")");
}

// [SECTION] fp32 views

constexpr int64_t kConvertChunk = 1 << 15;

void load_as_f32(const void* src, int32_t dtype, float* dst, int64_t n) {
  if (dtype == MPT_DTYPE_F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  parallel_for(n, kConvertChunk, [&](int64_t b, int64_t e) {
    if (dtype == MPT_DTYPE_F16) convert_f16_to_f32(bits + b, dst + b, static_cast<size_t>(e - b));
    else convert_bf16_to_f32(bits + b, dst + b, static_cast<size_t>(e - b));
  });
}

void store_from_f32(const float* src, void* dst, int32_t dtype, int64_t n) {
  if (dtype == MPT_DTYPE_F32) {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  uint16_t* bits = static_cast<uint16_t*>(dst);
  parallel_for(n, kConvertChunk, [&](int64_t b, int64_t e) {
    if (dtype == MPT_DTYPE_F16) convert_f32_to_f16(src + b, bits + b, static_cast<size_t>(e - b));
    else convert_f32_to_bf16(src + b, bits + b, static_cast<size_t>(e - b));
    if (LaunchReport* report = current_report()) report->count_store(bits + b, dtype, src + b, bits + b, e - b);
  });
}

F32Input::F32Input(const mpt_tensor& t) {
  if (t.dtype == MPT_DTYPE_F32) {
    data_ = static_cast<const float*>(t.data);
    return;
  }
  copy_ = ScratchFloats(static_cast<size_t>(element_count(t)));
  load_as_f32(t.data, t.dtype, copy_.data(), element_count(t));
  data_ = copy_.data();
}

F32Output::F32Output(const mpt_tensor& t, bool zeroed) : tensor_(t) {
  int64_t n = element_count(t);
  if (t.dtype == MPT_DTYPE_F32) {
    data_ = static_cast<float*>(t.data);
    if (zeroed && n > 0) std::memset(data_, 0, static_cast<size_t>(n) * 4);
    return;
  }
  buffer_ = ScratchFloats(static_cast<size_t>(n));
  data_ = buffer_.data();
  if (zeroed && n > 0) std::memset(data_, 0, static_cast<size_t>(n) * 4);
}

void F32Output::store() {
  store_from_f32(data_, tensor_.data, tensor_.dtype, element_count(tensor_));
}

}  // namespace mpt
