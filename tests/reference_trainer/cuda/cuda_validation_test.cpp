// The device backend's argument checks against the CPU library's, on any machine: the backend's
// validate() runs every check of a launch without touching a device. Every comparison case must
// pass it, and for variants of each case that break one thing (an output's shape, an input's
// dtype, a scalar left out, an input left out) the device must reject exactly what the CPU
// library rejects.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_cases.h"
#include "cuda_test_util.h"
#include "launch_args.h"
#include "mpt/cuda_backend.h"

namespace mpt_cuda_test {
namespace {

/* The launch of `spec` with every tensor marked as a device tensor, checked by validate() or, with
 * `launch`, handed to mpt::cuda::launch() (only where no GPU is present). The data pointers point
 * into a host buffer: neither call dereferences them then. */
int device_call(const LaunchSpec& spec, std::string* error, bool launch) {
  static std::vector<uint8_t> placeholder(64);
  auto describe = [](const TensorSpec& t) {
    mpt_tensor m{};
    m.data = placeholder.data();
    m.name = t.name.c_str();
    m.ndim = static_cast<int32_t>(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i) m.shape[i] = t.shape[i];
    m.dtype = t.dtype;
    m.device = MPT_DEVICE_CUDA;
    return m;
  };
  std::vector<mpt_tensor> in, out;
  for (const auto& t : spec.inputs) in.push_back(describe(t));
  for (const auto& t : spec.outputs) {
    out.push_back(describe(t));
    if (t.same_as_input >= 0) out.back().data = in[t.same_as_input].data;
  }
  // In-place pairs share a pointer; other tensors get distinct ones so in-place checks can tell.
  for (size_t i = 0; i < in.size(); ++i) in[i].data = placeholder.data() + i + 1;
  for (size_t i = 0; i < out.size(); ++i) {
    int same = spec.outputs[i].same_as_input;
    out[i].data = same >= 0 ? in[same].data : placeholder.data() + 32 + i;
  }
  std::vector<mpt_scalar> scalars;
  for (const auto& s : spec.scalars) scalars.push_back(mpt_scalar{s.first.c_str(), s.second});
  mpt_launch_desc d{MPT_ABI_VERSION, 0, spec.kernel.c_str(), in.data(), static_cast<int32_t>(in.size()),
                    static_cast<int32_t>(out.size()), out.data(), scalars.data(),
                    static_cast<int32_t>(scalars.size()), 0, nullptr, nullptr};
  return launch ? mpt::cuda::launch(d, error) : mpt::cuda::detail::validate(d, error);
}

int device_validation(const LaunchSpec& spec, std::string* error) { return device_call(spec, error, false); }

void resize_bytes(TensorSpec& t) { t.bytes.assign(static_cast<size_t>(t.numel()) * t.element_size(), 0x5a); }

/* Variants of a case that each break one thing, with a label saying what. */
std::vector<std::pair<std::string, LaunchSpec>> broken_variants(const LaunchSpec& spec) {
  std::vector<std::pair<std::string, LaunchSpec>> v;
  // The first and the last output one element wider (an in-place output keeps its input's
  // buffer: the CPU must reject the shape before writing).
  for (size_t k : {size_t{0}, spec.outputs.size() - 1}) {
    if (spec.outputs.empty() || spec.outputs[k].shape.empty()) continue;
    LaunchSpec s = spec;
    TensorSpec& o = s.outputs[k];
    o.shape.back() += 1;
    if (o.same_as_input < 0) resize_bytes(o);
    v.emplace_back("output " + std::to_string(k) + " one wider", s);
    if (spec.outputs.size() == 1) break;
  }
  if (!spec.inputs.empty() && spec.inputs[0].dtype != MPT_DTYPE_I32) {
    LaunchSpec s = spec;
    s.inputs[0].dtype = MPT_DTYPE_I32;
    resize_bytes(s.inputs[0]);
    for (auto& o : s.outputs) {
      if (o.same_as_input == 0) {
        o.dtype = MPT_DTYPE_I32;
        resize_bytes(o);
      }
    }
    v.emplace_back("input 0 as i32", s);
  }
  for (size_t i = 0; i < spec.scalars.size(); ++i) {
    LaunchSpec s = spec;
    s.scalars.erase(s.scalars.begin() + static_cast<long>(i));
    v.emplace_back("without scalar " + spec.scalars[i].first, s);
  }
  if (!spec.inputs.empty()) {
    LaunchSpec s = spec;
    bool referenced = false;
    for (const auto& o : s.outputs) referenced = referenced || o.same_as_input == int(s.inputs.size()) - 1;
    if (!referenced) {
      s.inputs.pop_back();
      v.emplace_back("without the last input", s);
    }
  }
  return v;
}

TEST(CudaValidation, EveryComparisonCasePasses) {
  for (const ComparisonCase& c : comparison_cases()) {
    std::string error;
    EXPECT_EQ(device_validation(c.spec, &error), MPT_OK) << c.label << ": " << error;
  }
}

TEST(CudaValidation, RejectsExactlyWhatTheCpuRejects) {
  int variants = 0, rejected = 0;
  for (const ComparisonCase& c : comparison_cases()) {
    for (const auto& [what, spec] : broken_variants(c.spec)) {
      LaunchResult cpu = run_launch(spec, MPT_DEVICE_CPU);
      std::string error;
      int device = device_validation(spec, &error);
      ASSERT_TRUE(cpu.status == MPT_OK || cpu.status == MPT_ERR_BAD_ARGUMENTS) << c.label << ", " << what;
      EXPECT_EQ(device, cpu.status) << c.label << ", " << what << ": cpu says '" << cpu.error
                                    << "', device says '" << error << "'";
      ++variants;
      rejected += cpu.status != MPT_OK;
      if (device == MPT_ERR_BAD_ARGUMENTS) {
        EXPECT_NE(error.find(spec.kernel), std::string::npos) << "the message names the kernel: " << error;
      }
    }
  }
  EXPECT_GT(rejected, variants / 2);
  std::printf("%d variants, %d rejected by both\n", variants, rejected);
}

TEST(CudaValidation, ArgumentErrorsComeBeforeTheMissingDevice) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-device path cannot be observed";
  LaunchSpec bad{"relu_forward", {floats("x", MPT_DTYPE_F32, {4}, {1, 2, 3, 4})},
                 {output("y", MPT_DTYPE_F32, {5})}, {}};
  std::string error;
  EXPECT_EQ(device_call(bad, &error, true), MPT_ERR_BAD_ARGUMENTS) << error;
  EXPECT_NE(error.find("shape"), std::string::npos) << error;
  LaunchSpec good{"relu_forward", bad.inputs, {output("y", MPT_DTYPE_F32, {4})}, {}};
  EXPECT_EQ(device_call(good, &error, true), MPT_ERR_DEVICE) << error;
}

}  // namespace
}  // namespace mpt_cuda_test
