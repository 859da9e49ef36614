// The one place mptrain calls mpt_launch(): a `launch(kernel, inputs, outputs, scalars)` helper
// that builds the self-describing launch descriptor, turns a failure into an exception naming the
// kernel and mpt_last_error(), and counts launches per kernel. Also the small device-aware
// utilities built from kernels: cast, fill, host<->device copies and reading one value back.
#pragma once

#include "tensor.h"

#include <map>
#include <string>
#include <vector>

namespace mptrain {

using TensorRefs = std::vector<const Tensor*>;
using Scalars = std::vector<mpt_scalar>;

class Runtime {
 public:
  explicit Runtime(mpt_device device) : device_(device) {}

  mpt_device device() const { return device_; }

  void launch(const char* kernel, const TensorRefs& inputs, const TensorRefs& outputs,
              const Scalars& scalars = {});

  // A zero-filled tensor on this runtime's device.
  Tensor alloc(std::string name, Shape shape, DType dtype, int category) const;

  // `x` itself when it already has type `to`; otherwise a new tensor "<x>.<to>" filled by `cast`.
  Tensor cast(const Tensor& x, DType to, int category = MPT_CAT_ACTIVATION);
  // Casts `src` into the existing tensor `dst` (weight refresh after an optimizer step).
  void cast_into(const Tensor& src, const Tensor& dst);

  void fill(const Tensor& t, double value);

  // Writes host fp32 values into `dst` (any float type, any device): staged through host and
  // device fp32 tensors, then cast.
  void upload(const std::vector<float>& values, const Tensor& dst);

  // Copies a host tensor into a same-typed tensor on the device (`copy` kernel).
  void copy(const Tensor& src, const Tensor& dst);

  // Reads element 0 (f32 or i32 tensors), copying to the host first when needed.
  double read_scalar(const Tensor& t);

  uint64_t launches() const { return launches_; }
  const std::map<std::string, uint64_t>& launches_by_kernel() const { return by_kernel_; }

 private:
  mpt_device device_;
  uint64_t launches_ = 0;
  std::map<std::string, uint64_t> by_kernel_;
};

}  // namespace mptrain
