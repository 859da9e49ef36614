// Kernel launches and kernel-built utilities (see runtime.h).
#include "runtime.h"

#include "errors.h"

#include <fmt/format.h>

#include <cstring>

namespace mptrain {

void Runtime::launch(const char* kernel, const TensorRefs& inputs, const TensorRefs& outputs,
                     const Scalars& scalars) {
  std::vector<mpt_tensor> in;
  std::vector<mpt_tensor> out;
  in.reserve(inputs.size());
  out.reserve(outputs.size());
  for (const Tensor* t : inputs) in.push_back(t->abi());
  for (const Tensor* t : outputs) out.push_back(t->abi());
  mpt_launch_desc desc{};
  desc.abi_version = MPT_ABI_VERSION;
  desc.kernel = kernel;
  desc.inputs = in.data();
  desc.n_inputs = static_cast<int32_t>(in.size());
  desc.outputs = out.data();
  desc.n_outputs = static_cast<int32_t>(out.size());
  desc.scalars = scalars.data();
  desc.n_scalars = static_cast<int32_t>(scalars.size());
  ++launches_;
  ++by_kernel_[kernel];
  int status = mpt_launch(&desc);
  if (status == MPT_OK) return;
  std::string why = mpt_last_error();
  std::string first_output = outputs.empty() ? std::string("-") : outputs.front()->name();
  if (status == MPT_ERR_DEVICE) {
    throw DeviceError(fmt::format("kernel '{}' (output '{}') could not run on the device: {}",
                                  kernel, first_output, why));
  }
  throw KernelError(fmt::format("kernel '{}' (output '{}') failed with status {}: {}", kernel,
                                first_output, status, why));
}

Tensor Runtime::alloc(std::string name, Shape shape, DType dtype, int category) const {
  return Tensor::allocate(std::move(name), std::move(shape), dtype, device_, category);
}

Tensor Runtime::cast(const Tensor& x, DType to, int category) {
  if (x.dtype() == to) return x;
  Tensor y = alloc(x.name() + "." + dtype_name(to), x.shape(), to, category);
  launch("cast", {&x}, {&y});
  return y;
}

void Runtime::cast_into(const Tensor& src, const Tensor& dst) { launch("cast", {&src}, {&dst}); }

void Runtime::fill(const Tensor& t, double value) { launch("fill", {}, {&t}, {{"value", value}}); }

void Runtime::upload(const std::vector<float>& values, const Tensor& dst) {
  if (device_ == MPT_DEVICE_CPU && dst.dtype() == MPT_DTYPE_F32) {
    std::memcpy(dst.data(), values.data(), values.size() * sizeof(float));
    mpt_host_written(dst.data(), values.size() * sizeof(float));
    return;
  }
  Tensor host = Tensor::allocate(dst.name() + ".init", dst.shape(), MPT_DTYPE_F32, MPT_DEVICE_CPU, MPT_CAT_WORKSPACE);
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  mpt_host_written(host.data(), values.size() * sizeof(float));
  Tensor staged = host;
  if (device_ != MPT_DEVICE_CPU) {
    staged = dst.dtype() == MPT_DTYPE_F32 ? dst : alloc(dst.name() + ".init.device", dst.shape(), MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
    copy(host, staged);
  }
  if (dst.dtype() != MPT_DTYPE_F32) cast_into(staged, dst);
}

void Runtime::copy(const Tensor& src, const Tensor& dst) { launch("copy", {&src}, {&dst}); }

double Runtime::read_scalar(const Tensor& t) {
  const Tensor* host = &t;
  Tensor staged;
  if (t.device() != MPT_DEVICE_CPU) {
    // `copy` moves whole tensors of one shape, so the whole (small) tensor comes over.
    staged = Tensor::allocate(t.name() + ".host", t.shape(), t.dtype(), MPT_DEVICE_CPU, MPT_CAT_WORKSPACE);
    copy(t, staged);
    host = &staged;
  }
  switch (host->dtype()) {
    case MPT_DTYPE_F32: return static_cast<double>(host->data_as<float>()[0]);
    case MPT_DTYPE_I32: return static_cast<double>(host->data_as<int32_t>()[0]);
    default: throw KernelError("cannot read a " + dtype_name(host->dtype()) + " value of '" + t.name() + "' on the host");
  }
}

}  // namespace mptrain
