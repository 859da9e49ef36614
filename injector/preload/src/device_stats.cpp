// Loading libfpscope_gpu.so from the injector's folder (see device_stats.h).
#include "device_stats.h"

#include <dlfcn.h>

namespace fpscope::inject {

const fpscope_gpu_api* load_gpu_library(std::string* why) {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&load_gpu_library), &self) == 0 || self.dli_fname == nullptr) {
    *why = "cannot find the injector's own folder";
    return nullptr;
  }
  std::string path = self.dli_fname;
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "libfpscope_gpu.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    *why = "cannot load " + path + ": " + (e ? e : "unknown error");
    return nullptr;
  }
  using Entry = const fpscope_gpu_api* (*)();
  using Reason = const char* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "fpscope_gpu_api_v1"));
  if (entry == nullptr) {
    *why = path + " has no fpscope_gpu_api_v1";
    return nullptr;
  }
  const fpscope_gpu_api* api = entry();
  if (api == nullptr || api->version != FPSCOPE_GPU_API_VERSION) {
    auto reason = reinterpret_cast<Reason>(dlsym(handle, "fpscope_gpu_unavailable_reason"));
    *why = api ? "libfpscope_gpu.so speaks another version" : (reason && reason() ? reason() : "no usable CUDA device");
    return nullptr;
  }
  return api;
}

}  // namespace fpscope::inject
