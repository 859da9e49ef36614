// What the CUDA backend says about the machine it runs on. Without a GPU (the usual build
// machine) it must report that cleanly, and every device launch and allocation must fail with
// MPT_ERR_DEVICE and a message that says why; with a GPU the same calls must work. The tests
// decide which case applies with their own cudaGetDeviceCount, not the backend's.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>

#include "cuda_test_util.h"
#include "mpt/cuda_backend.h"

namespace mpt_cuda_test {
namespace {

mpt_launch_desc fill_launch(mpt_tensor* y, mpt_scalar* value) {
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = "fill";
  d.outputs = y;
  d.n_outputs = 1;
  d.scalars = value;
  d.n_scalars = 1;
  return d;
}

TEST(CudaAvailability, AgreesWithTheRuntime) {
  std::string why;
  bool available = mpt::cuda::available(&why);
  EXPECT_EQ(available, gpu_present());
  if (!available) {
    EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
    std::printf("backend reports: %s\n", why.c_str());
  }
  EXPECT_EQ(mpt::cuda::available(nullptr), available);  // cached, and NULL is accepted
}

TEST(CudaAvailability, LaunchWithoutDeviceFailsWithDeviceError) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-device path cannot be observed";
  std::string why;
  ASSERT_FALSE(mpt::cuda::available(&why));
  mpt_tensor y{};
  y.data = reinterpret_cast<void*>(0x1000);  // never dereferenced: the launch stops first
  y.ndim = 1;
  y.shape[0] = 4;
  y.dtype = MPT_DTYPE_F32;
  y.device = MPT_DEVICE_CUDA;
  mpt_scalar value{"value", 1.0};
  mpt_launch_desc d = fill_launch(&y, &value);

  std::string error;
  EXPECT_EQ(mpt::cuda::launch(d, &error), MPT_ERR_DEVICE);
  EXPECT_NE(error.find("fill"), std::string::npos) << error;
  EXPECT_NE(error.find(why), std::string::npos) << error;

  // Through the public ABI: the kernel library hands device launches to the backend.
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_DEVICE);
  EXPECT_NE(std::string(mpt_last_error()).find(why), std::string::npos) << mpt_last_error();
}

TEST(CudaAvailability, AllocationWithoutDeviceFailsCleanly) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-device path cannot be observed";
  std::string error;
  EXPECT_EQ(mpt::cuda::alloc(1024, &error), nullptr);
  EXPECT_NE(error.find("CUDA"), std::string::npos) << error;
  EXPECT_EQ(mpt_alloc(1024, MPT_DEVICE_CUDA, MPT_CAT_WORKSPACE, "probe", nullptr), nullptr);
  EXPECT_NE(std::string(mpt_last_error()).find("probe"), std::string::npos) << mpt_last_error();
  mpt::cuda::free(nullptr);  // accepted, does nothing
}

TEST(CudaAvailability, UnknownKernelIsReportedAsSuch) {
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = "no_such_kernel";
  std::string error;
  EXPECT_EQ(mpt::cuda::launch(d, &error), MPT_ERR_UNKNOWN_KERNEL);
  EXPECT_NE(error.find("no_such_kernel"), std::string::npos) << error;
}

TEST(CudaAvailability, DeviceFillWorksWhenAGpuIsPresent) {
  if (!gpu_present()) GTEST_SKIP() << "skipped: no GPU";
  LaunchSpec s{"fill", {}, {output("y", MPT_DTYPE_F16, {1000})}, {{"value", 0.1}}};
  LaunchResult r = run_launch(s, MPT_DEVICE_CUDA);
  ASSERT_EQ(r.status, MPT_OK) << r.error;
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(element_value(r.outputs[0], MPT_DTYPE_F16, i), 0.0999755859375f);
}

}  // namespace
}  // namespace mpt_cuda_test
