// Every GPU comparison case (cuda_cases.cpp) run through the CUDA backend's own code, dispatch,
// argument checks, launchers and kernels, executed on the host by the emulation of
// host_emulation.h, against the CPU library. Runs everywhere. It executes the device code's
// indexing, loop orders and rounding for real; what only a GPU can show (cuBLAS's own order, real
// concurrency, speed) stays with the GPU tests. The agreement asked for is the GPU tests' own.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_cases.h"
#include "cuda_test_util.h"
#include "mpt/cuda_backend.h"

namespace mpt_cuda_test {
namespace {

/* Runs `spec` through the emulated mpt::cuda::launch(); "device" tensors are host buffers. */
LaunchResult run_emulated(const LaunchSpec& spec) {
  LaunchResult result;
  std::vector<std::vector<uint8_t>> in_bytes, out_bytes;
  for (const auto& t : spec.inputs) in_bytes.push_back(t.bytes);
  for (const auto& t : spec.outputs) out_bytes.push_back(t.bytes);
  auto describe = [](const TensorSpec& t, void* data) {
    mpt_tensor m{};
    m.data = data;
    m.name = t.name.c_str();
    m.ndim = static_cast<int32_t>(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i) m.shape[i] = t.shape[i];
    m.dtype = t.dtype;
    m.device = MPT_DEVICE_CUDA;
    return m;
  };
  std::vector<mpt_tensor> in, out;
  for (size_t i = 0; i < spec.inputs.size(); ++i) in.push_back(describe(spec.inputs[i], in_bytes[i].data()));
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    int same = spec.outputs[i].same_as_input;
    out.push_back(describe(spec.outputs[i], same >= 0 ? in_bytes[same].data() : out_bytes[i].data()));
  }
  std::vector<mpt_scalar> scalars;
  for (const auto& s : spec.scalars) scalars.push_back(mpt_scalar{s.first.c_str(), s.second});
  mpt_launch_desc d{MPT_ABI_VERSION, 0, spec.kernel.c_str(), in.data(), static_cast<int32_t>(in.size()),
                    static_cast<int32_t>(out.size()), out.data(), scalars.data(),
                    static_cast<int32_t>(scalars.size()), 0, nullptr, nullptr};
  result.status = mpt::cuda::launch(d, &result.error);
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    int same = spec.outputs[i].same_as_input;
    result.outputs.push_back(same >= 0 ? in_bytes[same] : out_bytes[i]);
  }
  return result;
}

TEST(EmulatedCuda, EmulationReportsOneDevice) {
  std::string why;
  EXPECT_TRUE(mpt::cuda::available(&why)) << why;
}

TEST(EmulatedCuda, EveryKernelCaseMatchesTheCpuLibrary) {
  int compared = 0;
  for (const ComparisonCase& c : comparison_cases()) {
    SCOPED_TRACE(c.label);
    LaunchResult cpu = run_launch(c.spec, MPT_DEVICE_CPU);
    LaunchResult emu = run_emulated(c.spec);
    ASSERT_EQ(cpu.status, MPT_OK) << cpu.error;
    EXPECT_EQ(emu.status, MPT_OK) << emu.error;
    if (emu.status != MPT_OK) continue;
    for (size_t i = 0; i < c.spec.outputs.size(); ++i) {
      const TensorSpec& t = c.spec.outputs[i];
      std::string diff = c.exact ? compare_exact(t, emu.outputs[i], cpu.outputs[i])
                                 : compare_close(t, emu.outputs[i], cpu.outputs[i], c.rtol, c.atol);
      EXPECT_EQ(diff, "");
    }
    ++compared;
  }
  std::printf("compared %d cases through the emulated device code\n", compared);
}

}  // namespace
}  // namespace mpt_cuda_test
