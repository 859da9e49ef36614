// Runs a LaunchSpec on host or device tensors through the public kernel ABI, and compares the
// outputs of two runs element by element.
#include "cuda_test_util.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "mpt/numerics.h"

namespace mpt_cuda_test {

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

size_t TensorSpec::element_size() const {
  if (dtype == MPT_DTYPE_E4M3 || dtype == MPT_DTYPE_E5M2 || dtype == MPT_DTYPE_E8M0 || dtype == MPT_DTYPE_E2M1) return 1;
  return dtype == MPT_DTYPE_F16 || dtype == MPT_DTYPE_BF16 ? 2 : dtype == MPT_DTYPE_I64 ? 8 : 4;
}

namespace {

mpt_tensor describe(const TensorSpec& t, void* data, int device) {
  mpt_tensor m{};
  m.data = data;
  m.name = t.name.c_str();
  m.ndim = static_cast<int32_t>(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) m.shape[i] = t.shape[i];
  m.dtype = t.dtype;
  m.device = device;
  return m;
}

int launch(const char* kernel, std::vector<mpt_tensor>& in, std::vector<mpt_tensor>& out,
           const std::vector<mpt_scalar>& scalars) {
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = kernel;
  d.inputs = in.data();
  d.n_inputs = static_cast<int32_t>(in.size());
  d.outputs = out.data();
  d.n_outputs = static_cast<int32_t>(out.size());
  d.scalars = scalars.data();
  d.n_scalars = static_cast<int32_t>(scalars.size());
  return mpt_launch(&d);
}

/* Copies between a host buffer and a device tensor with the library's own `copy` kernel. */
int copy_tensor(const TensorSpec& t, void* from, int from_device, void* to, int to_device) {
  std::vector<mpt_tensor> in{describe(t, from, from_device)}, out{describe(t, to, to_device)};
  return launch("copy", in, out, {});
}

}  // namespace

LaunchResult run_launch(const LaunchSpec& spec, int device) {
  LaunchResult result;
  std::vector<std::vector<uint8_t>> host_in, host_out;
  for (const auto& t : spec.inputs) host_in.push_back(t.bytes);
  for (const auto& t : spec.outputs) host_out.push_back(t.bytes);
  std::vector<void*> in_ptr, out_ptr;
  std::vector<void*> device_memory;
  auto place = [&](const TensorSpec& t, std::vector<uint8_t>& bytes) -> void* {
    if (device == MPT_DEVICE_CPU) return bytes.data();
    void* p = mpt_alloc(bytes.size(), MPT_DEVICE_CUDA, MPT_CAT_WORKSPACE, t.name.c_str(), nullptr);
    if (!p) return nullptr;
    device_memory.push_back(p);
    if (!bytes.empty() && copy_tensor(t, bytes.data(), MPT_DEVICE_CPU, p, MPT_DEVICE_CUDA) != MPT_OK) return nullptr;
    return p;
  };
  for (size_t i = 0; i < spec.inputs.size(); ++i) in_ptr.push_back(place(spec.inputs[i], host_in[i]));
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const TensorSpec& t = spec.outputs[i];
    out_ptr.push_back(t.same_as_input >= 0 ? in_ptr[t.same_as_input] : place(t, host_out[i]));
  }
  std::vector<mpt_tensor> in, out;
  for (size_t i = 0; i < spec.inputs.size(); ++i) in.push_back(describe(spec.inputs[i], in_ptr[i], device));
  for (size_t i = 0; i < spec.outputs.size(); ++i) out.push_back(describe(spec.outputs[i], out_ptr[i], device));
  std::vector<mpt_scalar> scalars;
  for (const auto& s : spec.scalars) scalars.push_back(mpt_scalar{s.first.c_str(), s.second});

  result.status = launch(spec.kernel.c_str(), in, out, scalars);
  if (result.status != MPT_OK) result.error = mpt_last_error();
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const TensorSpec& t = spec.outputs[i];
    std::vector<uint8_t> bytes(t.bytes.size());
    if (device == MPT_DEVICE_CPU) {
      const void* src = t.same_as_input >= 0 ? host_in[t.same_as_input].data() : host_out[i].data();
      std::memcpy(bytes.data(), src, bytes.size());
    } else if (!bytes.empty()) {
      copy_tensor(t, out_ptr[i], MPT_DEVICE_CUDA, bytes.data(), MPT_DEVICE_CPU);
    }
    result.outputs.push_back(std::move(bytes));
  }
  if (device == MPT_DEVICE_CUDA) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess && result.status == MPT_OK) {
      result.status = MPT_ERR_DEVICE;
      result.error = std::string("device error after the launch: ") + cudaGetErrorString(e);
    }
    for (void* p : device_memory) mpt_free(p, MPT_DEVICE_CUDA);
  }
  return result;
}

TensorSpec floats(std::string name, int dtype, std::vector<int64_t> shape,
                  const std::vector<float>& values) {
  TensorSpec t{std::move(name), dtype, std::move(shape), {}, -1};
  t.bytes.resize(static_cast<size_t>(t.numel()) * t.element_size());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i) {
    if (dtype == MPT_DTYPE_F32) {
      std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
    } else {
      uint16_t h = dtype == MPT_DTYPE_F16 ? mpt::f32_to_f16(values[i]) : mpt::f32_to_bf16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

TensorSpec random_floats(std::string name, int dtype, std::vector<int64_t> shape, std::mt19937& rng,
                         float scale) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(n));
  for (auto& v : values) v = normal(rng);
  return floats(std::move(name), dtype, std::move(shape), values);
}

TensorSpec ints(std::string name, std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  TensorSpec t{std::move(name), MPT_DTYPE_I32, std::move(shape), {}, -1};
  t.bytes.resize(static_cast<size_t>(t.numel()) * 4);
  std::memcpy(t.bytes.data(), values.data(), std::min(t.bytes.size(), values.size() * 4));
  return t;
}

TensorSpec output(std::string name, int dtype, std::vector<int64_t> shape) {
  TensorSpec t{std::move(name), dtype, std::move(shape), {}, -1};
  t.bytes.assign(static_cast<size_t>(t.numel()) * t.element_size(), 0x5a);
  return t;
}

TensorSpec in_place(const TensorSpec& input, int input_index) {
  TensorSpec t = input;
  t.same_as_input = input_index;
  return t;
}

float element_value(const std::vector<uint8_t>& bytes, int dtype, int64_t i) {
  if (dtype == MPT_DTYPE_E4M3 || dtype == MPT_DTYPE_E5M2 || dtype == MPT_DTYPE_E8M0 || dtype == MPT_DTYPE_E2M1)
    return static_cast<float>(bytes[static_cast<size_t>(i)]);  // the byte itself
  if (dtype == MPT_DTYPE_F32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  if (dtype == MPT_DTYPE_I32) {
    int32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return static_cast<float>(v);
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return dtype == MPT_DTYPE_F16 ? mpt::f16_to_f32(h) : mpt::bf16_to_f32(h);
}

std::string compare_exact(const TensorSpec& t, const std::vector<uint8_t>& a,
                          const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return "sizes differ";
  size_t es = t.element_size();
  for (size_t i = 0; i < a.size(); i += es) {
    if (std::memcmp(a.data() + i, b.data() + i, es) != 0) {
      std::ostringstream s;
      int64_t e = static_cast<int64_t>(i / es);
      s.precision(9);
      s << t.name << "[" << e << "]: gpu " << element_value(a, t.dtype, e) << " vs cpu "
        << element_value(b, t.dtype, e) << " (bits differ)";
      return s.str();
    }
  }
  return "";
}

std::string compare_close(const TensorSpec& t, const std::vector<uint8_t>& a,
                          const std::vector<uint8_t>& b, double rtol, double atol) {
  if (a.size() != b.size()) return "sizes differ";
  for (int64_t i = 0; i < t.numel(); ++i) {
    double x = element_value(a, t.dtype, i), y = element_value(b, t.dtype, i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;  // equal infinities
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      std::ostringstream s;
      s.precision(9);
      s << t.name << "[" << i << "]: gpu " << x << " vs cpu " << y << " (rtol " << rtol
        << ", atol " << atol << ")";
      return s.str();
    }
  }
  return "";
}

}  // namespace mpt_cuda_test
