// What every CPU kernel works with: its launch (tensors, scalars) with argument checks that fail
// with a precise message, and fp32 views of floating tensors whatever their stored dtype.
//
// A failed check throws KernelFailure; mpt_launch() turns it into a status and the thread's
// mpt_last_error() text, so kernels read as straight-line code.
#ifndef MPT_KERNELS_KERNEL_CONTEXT_H
#define MPT_KERNELS_KERNEL_CONTEXT_H

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "mpt/abi.h"
#include "scratch.h"

namespace mpt {

struct KernelFailure {
  int status;
  std::string message;
};

const char* dtype_name(int32_t dtype);
bool is_float_dtype(int32_t dtype);
size_t dtype_size(int32_t dtype);
int64_t element_count(const mpt_tensor& t);
std::string shape_text(const mpt_tensor& t);

// One tensor of a launch, with the words that name it in messages ("input 1 w ('fc1.weight')").
struct TensorArg {
  const mpt_tensor* tensor;
  std::string label;
  const mpt_tensor& operator*() const { return *tensor; }
  const mpt_tensor* operator->() const { return tensor; }
  int64_t dim(int i) const { return tensor->shape[i]; }
  int64_t numel() const { return element_count(*tensor); }
};

class Launch {
 public:
  explicit Launch(const mpt_launch_desc& desc) : desc_(desc) {}

  const char* kernel() const { return desc_.kernel; }
  int n_inputs() const { return desc_.n_inputs; }
  int n_outputs() const { return desc_.n_outputs; }

  void expect_counts(int n_inputs, int n_outputs) const;
  TensorArg input(int index, const char* role) const;
  TensorArg output(int index, const char* role) const;

  double scalar(const char* name) const;                   // required
  double scalar_or(const char* name, double fallback) const;
  bool flag(const char* name) const;                       // optional, 0 or 1
  int64_t integer(const char* name, int64_t min) const;    // required, integral, >= min
  int64_t integer_or(const char* name, int64_t fallback, int64_t min) const;

  [[noreturn]] void fail(const std::string& what) const;

  void expect_float(const TensorArg& t) const;
  void expect_dtype(const TensorArg& t, mpt_dtype dtype) const;
  // ndim and, for each entry >= 0, that extent; `dims` names the layout, e.g. "[N,C,H,W]".
  void expect_shape(const TensorArg& t, std::initializer_list<int64_t> extents, const char* dims) const;
  void expect_same_shape(const TensorArg& t, const TensorArg& like) const;
  void expect_numel(const TensorArg& t, int64_t n) const;

 private:
  const mpt_scalar* find_scalar(const char* name) const;
  const mpt_launch_desc& desc_;
};

// fp32 values of a floating tensor: its own memory when it is f32, a converted copy otherwise.
class F32Input {
 public:
  explicit F32Input(const mpt_tensor& t);
  const float* data() const { return data_; }
  float operator[](int64_t i) const { return data_[i]; }
 private:
  const float* data_;
  ScratchFloats copy_;
};

// Where a kernel writes fp32 results for a floating output: the tensor itself when it is f32,
// else a buffer that store() rounds (nearest even) into the tensor's dtype. With `zeroed`, the
// buffer starts at zero (for kernels that accumulate).
class F32Output {
 public:
  explicit F32Output(const mpt_tensor& t, bool zeroed = false);
  float* data() { return data_; }
  float& operator[](int64_t i) { return data_[i]; }
  void store();
 private:
  const mpt_tensor& tensor_;
  float* data_;
  ScratchFloats buffer_;
};

// Elementwise conversions of n values between fp32 and a floating dtype (parallel when large).
void load_as_f32(const void* src, int32_t dtype, float* dst, int64_t n);
void store_from_f32(const float* src, void* dst, int32_t dtype, int64_t n);

}  // namespace mpt

#endif
