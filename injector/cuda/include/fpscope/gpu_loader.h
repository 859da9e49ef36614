// Loading libfpscope_gpu.so at run time, for the injector: it must not link CUDA itself (a CPU-only
// program never loads the CUDA runtime because of fpscope), so it dlopen()s this library the first
// time it needs the GPU, from the folder it was itself loaded from. Header-only, libc and libdl only.
//
//   fpscope::gpu::GpuLibrary gpu;
//   std::string error;
//   if (fpscope::gpu::load_gpu_library(fpscope::gpu::folder_of(&some_function_of_mine), &gpu, &error)) {
//     const fpscope_gpu_api* api = gpu.api_v1();   // NULL without a usable device: gpu.unavailable_reason()
//   }
//
// FPSCOPE_GPU_LIBRARY, when set, names the file to load instead.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "fpscope/contract/environment.h"
#include "fpscope/gpu_stats.h"

namespace fpscope::gpu {

inline constexpr const char* kGpuLibraryName = "libfpscope_gpu.so";

struct GpuLibrary {
  void* handle = nullptr;
  const fpscope_gpu_api* (*api_v1)(void) = nullptr;
  const char* (*unavailable_reason)(void) = nullptr;
  int (*cupti_start)(const fpscope_gpu_cupti_callbacks*) = nullptr;
  void (*cupti_stop)(void) = nullptr;
  const char* (*cupti_error)(void) = nullptr;
  int64_t (*cupti_clock_offset)(void) = nullptr;
};

/* The folder of the shared object that contains `address` (a function or variable of the caller),
 * with a trailing '/', or "" when it cannot be told. */
inline std::string folder_of(const void* address) {
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  std::string::size_type slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

template <typename F>
bool resolve(void* handle, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out) return true;
  if (error) *error = std::string(kGpuLibraryName) + " has no symbol " + name + ": rebuild fpscope";
  return false;
}

/* Loads the library (RTLD_NOW | RTLD_LOCAL) from `folder` (as folder_of() gives it; "" lets the
 * dynamic linker search) and resolves every entry point. Returns false and says why when the file,
 * one of its dependencies (the CUDA runtime, CUPTI) or a symbol is missing. Idempotent per process:
 * dlopen() of a loaded library returns the same handle. */
inline bool load_gpu_library(const std::string& folder, GpuLibrary* out, std::string* error) {
  const char* override_path = std::getenv(contract::env::kGpuLibrary);
  std::string path = override_path && *override_path ? override_path : folder + kGpuLibraryName;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (error) {
      const char* why = dlerror();
      *error = "cannot load " + path + ": " + (why ? why : "unknown error") +
               " (fpscope built without CUDA, or the CUDA runtime is not installed)";
    }
    return false;
  }
  GpuLibrary lib;
  lib.handle = handle;
  if (!resolve(handle, "fpscope_gpu_api_v1", &lib.api_v1, error) ||
      !resolve(handle, "fpscope_gpu_unavailable_reason", &lib.unavailable_reason, error) ||
      !resolve(handle, "fpscope_gpu_cupti_start", &lib.cupti_start, error) ||
      !resolve(handle, "fpscope_gpu_cupti_stop", &lib.cupti_stop, error) ||
      !resolve(handle, "fpscope_gpu_cupti_error", &lib.cupti_error, error) ||
      !resolve(handle, "fpscope_gpu_cupti_clock_offset", &lib.cupti_clock_offset, error)) {
    dlclose(handle);
    return false;
  }
  *out = lib;
  return true;
}

}  // namespace fpscope::gpu
