// A CUDA-free program that does what the CUDA driver does with CUDA_INJECTION64_PATH: it dlopens
// the library named there and calls its InitializeInjection() (twice: the entry is idempotent).
// Before that it logs one text value through the kernel library, so the injector is tracing.
//   cuda_injection_target cpu-only              log only; never touch the injection entry
//   cuda_injection_target inject                also call InitializeInjection
//   cuda_injection_target inject-missing-gpu    same, with FPSCOPE_GPU_LIBRARY naming a missing file
// Exits 0 when every call returned what it should, 1 otherwise (the reason on stderr).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mpt/abi.h"

namespace {

int call_injection_entry() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "CUDA_INJECTION64_PATH is not set\n");
    return 1;
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  using Entry = int (*)(void);
  auto entry = reinterpret_cast<Entry>(dlsym(library, "InitializeInjection"));
  if (entry == nullptr) {
    std::fprintf(stderr, "%s has no InitializeInjection\n", path);
    return 1;
  }
  const int first = entry(), second = entry();
  if (first != 1 || second != 1) {
    std::fprintf(stderr, "InitializeInjection returned %d then %d, expected 1 and 1\n", first, second);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  mpt_log_text("precision", "fp32");
  if (std::strcmp(mode, "cpu-only") == 0) return 0;
  if (std::strcmp(mode, "inject-missing-gpu") == 0)
    setenv("FPSCOPE_GPU_LIBRARY", "/nonexistent/libfpscope_gpu.so", 1);
  else if (std::strcmp(mode, "inject") != 0) {
    std::fprintf(stderr, "usage: cuda_injection_target cpu-only|inject|inject-missing-gpu\n");
    return 2;
  }
  return call_injection_entry();
}
