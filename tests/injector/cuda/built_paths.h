// Where the GPU tests find what the build made. The build's own folder is compiled in; a build
// moved to another machine (a GPU machine without the development packages, gpu-checks.sh's
// pack) says where it now is with FPSCOPE_TEST_GPU_LIBRARY_DIR.
#pragma once

#include <cstdlib>
#include <string>

namespace fpscope_gpu_test {

/* The folder of libfpscope_gpu.so, with a trailing slash. */
inline std::string gpu_library_dir() {
  const char* moved = std::getenv("FPSCOPE_TEST_GPU_LIBRARY_DIR");
  return std::string(moved && *moved ? moved : FPSCOPE_GPU_LIBRARY_DIR) + "/";
}

}  // namespace fpscope_gpu_test
