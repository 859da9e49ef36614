// Every kernel on the GPU against the CPU library on the same inputs (cuda_cases.cpp). Each case
// is first checked to be a valid CPU launch (this runs everywhere), then compared on the device
// (skipped where no GPU is present). Also: the catalogue in docs/kernels.md is fully covered, and
// device launches reject bad arguments as the CPU does.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cuda_cases.h"
#include "cuda_test_util.h"

namespace mpt_cuda_test {
namespace {

TEST(CudaComparisonCases, EveryCaseIsAValidCpuLaunch) {
  for (const ComparisonCase& c : comparison_cases()) {
    LaunchResult cpu = run_launch(c.spec, MPT_DEVICE_CPU);
    EXPECT_EQ(cpu.status, MPT_OK) << c.label << ": " << cpu.error;
  }
}

TEST(CudaComparisonCases, CoverEveryKernelOfTheCatalogue) {
  // The source tree's docs/kernels.md; MPT_TEST_KERNELS_DOC names it for a build moved elsewhere.
  const char* moved = std::getenv("MPT_TEST_KERNELS_DOC");
  const std::string path = moved && *moved ? moved : MPT_KERNELS_DOC;
  std::ifstream doc(path);
  ASSERT_TRUE(doc) << "cannot read " << path;
  std::stringstream text;
  text << doc.rdbuf();
  std::set<std::string> documented, covered;
  std::regex row(R"(\n\| `([a-z0-9_]+)` \|)");
  std::string s = text.str();
  for (std::sregex_iterator it(s.begin(), s.end(), row), end; it != end; ++it) documented.insert((*it)[1]);
  for (const ComparisonCase& c : comparison_cases()) covered.insert(c.spec.kernel);
  ASSERT_GT(documented.size(), 20u);
  // The collectives run on the CPU only (docs/kernels.md): nothing to compare.
  const std::set<std::string> cpu_only = {"allreduce_sum"};
  for (const std::string& k : documented)
    EXPECT_TRUE(covered.count(k) || cpu_only.count(k)) << "no GPU comparison for " << k;
}

/* One test over every case rather than one test per case: each process start pays for loading
 * cuBLAS, and the cases are many. A mismatch names its case. */
TEST(CudaMatchesCpu, EveryKernelCase) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  int compared = 0;
  for (const ComparisonCase& c : comparison_cases()) {
    SCOPED_TRACE(c.label);
    LaunchResult cpu = run_launch(c.spec, MPT_DEVICE_CPU);
    LaunchResult gpu = run_launch(c.spec, MPT_DEVICE_CUDA);
    ASSERT_EQ(cpu.status, MPT_OK) << cpu.error;
    EXPECT_EQ(gpu.status, MPT_OK) << gpu.error;
    if (gpu.status != MPT_OK) continue;
    for (size_t i = 0; i < c.spec.outputs.size(); ++i) {
      const TensorSpec& t = c.spec.outputs[i];
      std::string diff = c.exact ? compare_exact(t, gpu.outputs[i], cpu.outputs[i])
                                 : compare_close(t, gpu.outputs[i], cpu.outputs[i], c.rtol, c.atol);
      EXPECT_EQ(diff, "");
    }
    ++compared;
  }
  std::printf("compared %d cases on the GPU\n", compared);
}

/* Work goes on the launch's stream: after synchronising that stream alone, the results are there.
 * (A cuBLAS product and a pointwise kernel, so both paths take the stream.) */
TEST(CudaStreams, LaunchesRunOnTheGivenStream) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::mt19937 rng(3);
  TensorSpec x = random_floats("x", MPT_DTYPE_F16, {8, 16}, rng), w = random_floats("w", MPT_DTYPE_F16, {4, 16}, rng);
  TensorSpec b = random_floats("b", MPT_DTYPE_F16, {4}, rng);
  std::vector<void*> device;
  auto upload = [&](const TensorSpec& t) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, t.bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    device.push_back(p);
    mpt_tensor m{};
    m.data = p;
    m.ndim = static_cast<int32_t>(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i) m.shape[i] = t.shape[i];
    m.dtype = t.dtype;
    m.device = MPT_DEVICE_CUDA;
    return m;
  };
  TensorSpec y_spec = output("y", MPT_DTYPE_F32, {8, 4}), r_spec = output("r", MPT_DTYPE_F32, {8, 4});
  mpt_tensor in[3] = {upload(x), upload(w), upload(b)}, y = upload(y_spec), r = upload(r_spec);
  mpt_launch_desc linear{MPT_ABI_VERSION, 0, "linear_forward", in, 3, 1, &y, nullptr, 0, 0, stream, nullptr};
  ASSERT_EQ(mpt_launch(&linear), MPT_OK) << mpt_last_error();
  mpt_launch_desc relu{MPT_ABI_VERSION, 0, "relu_forward", &y, 1, 1, &r, nullptr, 0, 0, stream, nullptr};
  ASSERT_EQ(mpt_launch(&relu), MPT_OK) << mpt_last_error();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<uint8_t> got(r_spec.bytes.size());
  ASSERT_EQ(cudaMemcpy(got.data(), r.data, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  LaunchSpec cpu_linear{"linear_forward", {x, w, b}, {y_spec}, {}};
  LaunchResult cpu = run_launch(cpu_linear, MPT_DEVICE_CPU);
  ASSERT_EQ(cpu.status, MPT_OK) << cpu.error;
  LaunchSpec cpu_relu{"relu_forward", {floats("y", MPT_DTYPE_F32, {8, 4}, {})}, {r_spec}, {}};
  cpu_relu.inputs[0].bytes = cpu.outputs[0];
  LaunchResult expected = run_launch(cpu_relu, MPT_DEVICE_CPU);
  EXPECT_EQ(compare_close(r_spec, got, expected.outputs[0], 1e-4, 1e-4), "");
  for (void* p : device) cudaFree(p);
  cudaStreamDestroy(stream);
}

TEST(CudaErrors, HostTensorInADeviceLaunchIsRejected) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  // relu with x on the device and y on the host: run_launch cannot mix, so build it by hand.
  void* x = mpt_alloc(64, MPT_DEVICE_CUDA, MPT_CAT_WORKSPACE, "x", nullptr);
  ASSERT_NE(x, nullptr) << mpt_last_error();
  float host[16] = {};
  mpt_tensor in{}, out{};
  in.data = x; in.ndim = 1; in.shape[0] = 16; in.dtype = MPT_DTYPE_F32; in.device = MPT_DEVICE_CUDA;
  out = in;
  out.data = host;
  out.device = MPT_DEVICE_CPU;
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = "relu_forward";
  d.inputs = &in; d.n_inputs = 1; d.outputs = &out; d.n_outputs = 1;
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("not a device tensor"), std::string::npos) << mpt_last_error();
  mpt_free(x, MPT_DEVICE_CUDA);
}

TEST(CudaErrors, WrongShapesAreRejectedOnTheDevice) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  std::mt19937 rng(1);
  LaunchSpec s{"linear_forward",
               {random_floats("x", MPT_DTYPE_F32, {4, 8}, rng), random_floats("w", MPT_DTYPE_F32, {3, 7}, rng),
                random_floats("b", MPT_DTYPE_F32, {3}, rng)},
               {output("y", MPT_DTYPE_F32, {4, 3})}, {}};
  LaunchResult gpu = run_launch(s, MPT_DEVICE_CUDA);
  EXPECT_EQ(gpu.status, MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(gpu.error.find("linear_forward"), std::string::npos) << gpu.error;
  LaunchSpec missing{"sgd_step", s.inputs, {}, {{"lr", 0.1}}};
  missing.outputs = {in_place(s.inputs[0], 0), in_place(s.inputs[2], 2)};
  EXPECT_EQ(run_launch(missing, MPT_DEVICE_CUDA).status, MPT_ERR_BAD_ARGUMENTS);
}

}  // namespace
}  // namespace mpt_cuda_test
