// Loading libfpscope_gpu.so the way the injector does (fpscope/gpu_loader.h): from a folder, with
// every entry point resolved; a wrong folder fails with the path in the message. Runs everywhere:
// without a GPU the loaded table is NULL and the reason is given.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>

#include "built_paths.h"
#include "fpscope/gpu_loader.h"

namespace fpscope_gpu_test {
namespace {

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(GpuLoader, LoadsTheBuiltLibraryAndResolvesEveryEntryPoint) {
  fpscope::gpu::GpuLibrary gpu;
  std::string error;
  ASSERT_TRUE(fpscope::gpu::load_gpu_library(gpu_library_dir(), &gpu, &error)) << error;
  ASSERT_NE(gpu.api_v1, nullptr);
  const fpscope_gpu_api* api = gpu.api_v1();
  EXPECT_EQ(api != nullptr, gpu_present());
  if (!api) {
    EXPECT_NE(std::string(gpu.unavailable_reason()).find("CUDA"), std::string::npos);
  }
  EXPECT_NE(gpu.cupti_start, nullptr);
  EXPECT_NE(gpu.cupti_stop, nullptr);
  EXPECT_NE(gpu.cupti_error, nullptr);
  EXPECT_NE(gpu.cupti_clock_offset, nullptr);
  gpu.cupti_stop();  // stopping what never started does nothing
}

TEST(GpuLoader, MissingLibrarySaysWhereItLooked) {
  fpscope::gpu::GpuLibrary gpu;
  std::string error;
  EXPECT_FALSE(fpscope::gpu::load_gpu_library("/nonexistent/folder/", &gpu, &error));
  EXPECT_NE(error.find("/nonexistent/folder/libfpscope_gpu.so"), std::string::npos) << error;
  EXPECT_EQ(gpu.handle, nullptr);
}

TEST(GpuLoader, FolderOfFindsTheObjectOfAnAddress) {
  std::string folder = fpscope::gpu::folder_of(reinterpret_cast<const void*>(&cudaGetDeviceCount));
  EXPECT_FALSE(folder.empty());
  EXPECT_EQ(folder.back(), '/');
}

}  // namespace
}  // namespace fpscope_gpu_test
