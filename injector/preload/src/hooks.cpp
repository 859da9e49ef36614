// The exported hooks of libfpscope_inject.so: the kernel library's six calls, interposed through
// LD_PRELOAD. Each hook finds the real function once (dlsym RTLD_NEXT, cached), forwards when
// HookCall says the call is not traced, and otherwise lets the session do the work around the
// real call. An exception inside the injector never reaches the program: tracing stops instead
// (runtime.h, tracing_failed). The NVTX entry point is in nvtx_injection.cpp.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include "fpscope/contract/contract.h"
#include "mpt/abi.h"
#include "runtime.h"

// Where the kernel ABI meets the trace contract: the values the injector copies from one into the
// other are the same numbers.
namespace contract = fpscope::contract;
static_assert(MPT_DTYPE_F32 == int(contract::Dtype::F32) && MPT_DTYPE_F16 == int(contract::Dtype::F16) &&
              MPT_DTYPE_BF16 == int(contract::Dtype::BF16) && MPT_DTYPE_I32 == int(contract::Dtype::I32) &&
              MPT_DTYPE_I64 == int(contract::Dtype::I64) && MPT_DTYPE_U8 == int(contract::Dtype::U8) &&
              MPT_DTYPE_F64 == int(contract::Dtype::F64) && MPT_DTYPE_E4M3 == int(contract::Dtype::E4M3) &&
              MPT_DTYPE_E5M2 == int(contract::Dtype::E5M2) && MPT_DTYPE_E4M3FNUZ == int(contract::Dtype::E4M3FNUZ) &&
              MPT_DTYPE_E5M2FNUZ == int(contract::Dtype::E5M2FNUZ) && MPT_DTYPE_E8M0 == int(contract::Dtype::E8M0) &&
              MPT_DTYPE_E2M1 == int(contract::Dtype::E2M1));
static_assert(MPT_CAT_WEIGHT == int(contract::MemoryCategory::Weight) &&
              MPT_CAT_MASTER_WEIGHT == int(contract::MemoryCategory::MasterWeight) &&
              MPT_CAT_GRADIENT == int(contract::MemoryCategory::Gradient) &&
              MPT_CAT_ACTIVATION == int(contract::MemoryCategory::Activation) &&
              MPT_CAT_OPTIMIZER_STATE == int(contract::MemoryCategory::OptimizerState) &&
              MPT_CAT_WORKSPACE == int(contract::MemoryCategory::Workspace) &&
              MPT_CAT_DATA == int(contract::MemoryCategory::Data) && contract::kMemoryCategoryCount == 7);

#define FPSCOPE_HOOK extern "C" __attribute__((visibility("default")))

namespace {

using fpscope::inject::guarded;
using fpscope::inject::HookCall;

enum Hook { kLaunch, kAlloc, kFree, kHostWritten, kLogScalar, kLogText, kHookCount };

struct RealFunction {
  const char* name;
  std::atomic<void*> address{nullptr};
};

// The table of hooked functions; every one is required (the program links the kernel library).
RealFunction g_real[kHookCount] = {
    {"mpt_launch"}, {"mpt_alloc"}, {"mpt_free"}, {"mpt_host_written"}, {"mpt_log_scalar"}, {"mpt_log_text"},
};

template <typename Fn>
Fn real(Hook hook) {
  void* address = g_real[hook].address.load(std::memory_order_acquire);
  if (address == nullptr) {
    address = dlsym(RTLD_NEXT, g_real[hook].name);
    if (address == nullptr) {
      std::fprintf(stderr, "fpscope: %s is not defined by any library loaded after the injector (%s)\n",
                   g_real[hook].name, dlerror());
      std::abort();
    }
    g_real[hook].address.store(address, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(address);
}

// The real kernel of the launch this thread is in, called through run_real_kernel so that the
// hook knows whether it ran (and what it returned) when the session throws around it. A launch
// from inside a kernel is forwarded by HookCall before it gets here, so one is set at a time.
struct RealKernel {
  int (*fn)(const mpt_launch_desc*);
  bool ran = false;
  int status = 0;
  std::exception_ptr thrown;  // the kernel's own exception, for the program as it would be untraced
};
// initial-exec: the preloaded library's TLS is static, and its access is then a plain load.
__attribute__((tls_model("initial-exec"))) thread_local RealKernel* t_real_kernel = nullptr;

int run_real_kernel(const mpt_launch_desc* launch) {
  RealKernel& k = *t_real_kernel;
  k.ran = true;
  try {
    k.status = k.fn(launch);
  } catch (...) {
    k.thrown = std::current_exception();
    throw;
  }
  return k.status;
}

}  // namespace

// The newest descriptor version the real library takes: 1 for a library older than the call.
static uint32_t library_abi_version() {
  static const uint32_t version = [] {
    auto fn = reinterpret_cast<uint32_t (*)()>(dlsym(RTLD_NEXT, "mpt_abi_version"));
    return fn != nullptr ? fn() : 1u;
  }();
  return version;
}

FPSCOPE_HOOK int mpt_launch(const mpt_launch_desc* launch) {
  auto real_launch = real<int (*)(const mpt_launch_desc*)>(kLaunch);
  HookCall call;
  if (!call.session()) return real_launch(launch);
  const uint32_t library_abi = library_abi_version();
  RealKernel kernel{real_launch, false, 0, nullptr};
  RealKernel* const outer = std::exchange(t_real_kernel, &kernel);
  int status = 0;
  try {
    status = call.session()->launch(launch, run_real_kernel, library_abi);
  } catch (...) {
    t_real_kernel = outer;
    if (kernel.thrown) std::rethrow_exception(kernel.thrown);  // the kernel's, not the injector's
    fpscope::inject::tracing_failed("mpt_launch");
    return kernel.ran ? kernel.status : real_launch(launch);  // the kernel runs once either way
  }
  t_real_kernel = outer;
  return status;
}

FPSCOPE_HOOK void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name,
                             uint64_t* id_out) {
  auto real_alloc = real<void* (*)(size_t, int32_t, int32_t, const char*, uint64_t*)>(kAlloc);
  HookCall call(HookCall::Inside::Nested);  // kernels allocate scratch from inside mpt_launch
  if (!call.session()) return real_alloc(bytes, device, category, name, id_out);
  uint64_t id = 0;
  void* ptr = real_alloc(bytes, device, category, name, &id);
  if (id_out) *id_out = id;
  if (ptr) guarded("mpt_alloc", [&] { call.session()->allocated(ptr, bytes, device, category, name, id); });
  return ptr;
}

FPSCOPE_HOOK void mpt_free(void* ptr, int32_t device) {
  auto real_free = real<void (*)(void*, int32_t)>(kFree);
  HookCall call(HookCall::Inside::Nested);
  // Reported before the real free: once freed, the address may be handed out again at once.
  if (call.session() && ptr) guarded("mpt_free", [&] { call.session()->freed(ptr); });
  real_free(ptr, device);
}

FPSCOPE_HOOK void mpt_host_written(const void* data, size_t bytes) {
  auto real_written = real<void (*)(const void*, size_t)>(kHostWritten);
  HookCall call(HookCall::Inside::Nested);
  if (call.session() && data) guarded("mpt_host_written", [&] { call.session()->host_written(data, bytes); });
  real_written(data, bytes);
}

FPSCOPE_HOOK void mpt_log_scalar(const char* name, double value, int64_t step) {
  auto real_log = real<void (*)(const char*, double, int64_t)>(kLogScalar);
  HookCall call;
  real_log(name, value, step);
  if (call.session()) guarded("mpt_log_scalar", [&] { call.session()->log_scalar(name, value, step); });
}

FPSCOPE_HOOK void mpt_log_text(const char* key, const char* value) {
  auto real_log = real<void (*)(const char*, const char*)>(kLogText);
  HookCall call;
  real_log(key, value);
  if (call.session()) guarded("mpt_log_text", [&] { call.session()->log_text(key, value); });
}
