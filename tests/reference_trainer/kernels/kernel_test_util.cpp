// Implementation of the test helpers in kernel_test_util.h.
#include "kernel_test_util.h"

namespace mpt_test {
namespace {

// fp16/bf16 bits of an already-rounded value, assembled from its exponent and significand.
uint16_t encode_f16(double r) {
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a / std::ldexp(1.0, -24));
  int e;
  double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  uint16_t mantissa = static_cast<uint16_t>(f * 2048.0 - 1024.0);
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | mantissa;
}

uint16_t encode_bf16(double r) {
  float f = static_cast<float>(r);  // r is a bf16 value: exact in fp32
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

HostTensor HostTensor::from_values(std::vector<int64_t> shape, const std::vector<double>& values, int dtype,
                                   std::string name) {
  HostTensor t(std::move(shape), dtype, std::move(name));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<size_t>(i)]);
  return t;
}

HostTensor HostTensor::i32(std::vector<int64_t> shape, const std::vector<int32_t>& values, std::string name) {
  HostTensor t(std::move(shape), MPT_DTYPE_I32, std::move(name));
  std::memcpy(t.data(), values.data(), values.size() * 4);
  return t;
}

mpt_tensor HostTensor::view() {
  mpt_tensor t{};
  t.data = bytes_.data();
  t.name = name_.c_str();
  t.ndim = static_cast<int32_t>(shape_.size());
  for (size_t i = 0; i < shape_.size(); ++i) t.shape[i] = shape_[i];
  t.dtype = dtype_;
  t.device = MPT_DEVICE_CPU;
  return t;
}

double HostTensor::value(int64_t i) const {
  switch (dtype_) {
    case MPT_DTYPE_F32: { float f; std::memcpy(&f, bytes_.data() + 4 * i, 4); return f; }
    case MPT_DTYPE_F16: return decode_f16(bits16(i));
    case MPT_DTYPE_BF16: return decode_bf16(bits16(i));
    case MPT_DTYPE_I32: return i32_at(i);
    default: return NAN;
  }
}

std::vector<double> HostTensor::values() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = value(i);
  return out;
}

void HostTensor::set(int64_t i, double v) {
  switch (dtype_) {
    case MPT_DTYPE_F32: { float f = static_cast<float>(v); std::memcpy(bytes_.data() + 4 * i, &f, 4); break; }
    case MPT_DTYPE_F16: { uint16_t b = encode_f16(reference_round_f16(v)); std::memcpy(bytes_.data() + 2 * i, &b, 2); break; }
    case MPT_DTYPE_BF16: { uint16_t b = encode_bf16(reference_round_bf16(v)); std::memcpy(bytes_.data() + 2 * i, &b, 2); break; }
    case MPT_DTYPE_I32: { int32_t x = static_cast<int32_t>(v); std::memcpy(bytes_.data() + 4 * i, &x, 4); break; }
    default: break;
  }
}

int launch(const char* kernel, std::vector<HostTensor*> inputs, std::vector<HostTensor*> outputs,
           const Scalars& scalars) {
  return launch_reported(kernel, std::move(inputs), std::move(outputs), scalars, nullptr);
}

int launch_reported(const char* kernel, std::vector<HostTensor*> inputs, std::vector<HostTensor*> outputs,
                    const Scalars& scalars, mpt_launch_report* report) {
  std::vector<mpt_tensor> in, out;
  for (HostTensor* t : inputs) in.push_back(t->view());
  for (HostTensor* t : outputs) out.push_back(t->view());
  std::vector<mpt_scalar> sc;
  for (const auto& [name, value] : scalars) sc.push_back(mpt_scalar{name, value});
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = kernel;
  d.inputs = in.data();
  d.n_inputs = static_cast<int32_t>(in.size());
  d.outputs = out.data();
  d.n_outputs = static_cast<int32_t>(out.size());
  d.scalars = sc.data();
  d.n_scalars = static_cast<int32_t>(sc.size());
  if (report) {
    d.flags = MPT_LAUNCH_REPORT;
    d.report = report;
  }
  return mpt_launch(&d);
}

std::vector<double> random_values(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

}  // namespace mpt_test
