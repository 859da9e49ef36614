// The exported C entry points of libmpt_kernels.so (include/mpt/abi.h): launch dispatch by kernel
// name and device, the thread's last error, host allocation with ids, the no-op logging calls a
// tool interposes, and the thread count. Nothing else leaves the library (see exports.map).

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "kernel_context.h"
#include "kernels.h"
#include "launch_report.h"
#include "mpt/abi.h"
#include "parallel.h"
#include "registry.h"
#include "scratch.h"

#if defined(MPT_WITH_CUDA) && __has_include("mpt/cuda_backend.h")
#include "mpt/cuda_backend.h"
#define MPT_CUDA_BACKEND 1
#endif

namespace {

constexpr const char* kNoCuda = "this libmpt_kernels was built without CUDA";

thread_local std::string t_last_error;
std::atomic<uint64_t> g_next_allocation_id{1};

int failure(int status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

bool any_tensor_on_cuda(const mpt_launch_desc& d) {
  for (int i = 0; i < d.n_inputs; ++i)
    if (d.inputs[i].device == MPT_DEVICE_CUDA) return true;
  for (int i = 0; i < d.n_outputs; ++i)
    if (d.outputs[i].device == MPT_DEVICE_CUDA) return true;
  return false;
}

// Checks what every launch needs before a kernel sees it; returns MPT_OK or a status.
int check_descriptor(const mpt_launch_desc* d) {
  if (!d) return failure(MPT_ERR_BAD_ARGUMENTS, "mpt_launch: the launch descriptor is NULL");
  if (d->abi_version < MPT_ABI_OLDEST_VERSION || d->abi_version > MPT_ABI_VERSION)
    return failure(MPT_ERR_ABI_VERSION, "mpt_launch: abi_version " + std::to_string(d->abi_version) +
                                            " but this library implements " + std::to_string(MPT_ABI_OLDEST_VERSION) +
                                            " to " + std::to_string(MPT_ABI_VERSION) +
                                            "; rebuild the program against this abi.h");
  if (!d->kernel) return failure(MPT_ERR_BAD_ARGUMENTS, "mpt_launch: kernel name is NULL");
  std::string kernel = d->kernel;
  if ((d->flags & ~MPT_LAUNCH_REPORT) != 0)
    return failure(MPT_ERR_BAD_ARGUMENTS, kernel + ": unknown flags " + std::to_string(d->flags) + " (abi.h defines MPT_LAUNCH_REPORT)");
  if ((d->flags & MPT_LAUNCH_REPORT) != 0 && (d->abi_version < 2 || d->report == nullptr))
    return failure(MPT_ERR_BAD_ARGUMENTS, kernel + ": MPT_LAUNCH_REPORT needs an abi_version 2 descriptor whose report is not NULL");
  if (d->n_inputs < 0 || d->n_outputs < 0 || d->n_scalars < 0)
    return failure(MPT_ERR_BAD_ARGUMENTS, kernel + ": negative tensor or scalar count");
  if ((d->n_inputs && !d->inputs) || (d->n_outputs && !d->outputs) || (d->n_scalars && !d->scalars))
    return failure(MPT_ERR_BAD_ARGUMENTS, kernel + ": a tensor or scalar array is NULL but its count is not 0");
  for (int side = 0; side < 2; ++side) {
    const mpt_tensor* tensors = side ? d->outputs : d->inputs;
    int count = side ? d->n_outputs : d->n_inputs;
    for (int i = 0; i < count; ++i)
      if (tensors[i].device != MPT_DEVICE_CPU && tensors[i].device != MPT_DEVICE_CUDA)
        return failure(MPT_ERR_BAD_ARGUMENTS, kernel + ": " + (side ? "output " : "input ") + std::to_string(i) +
                                                  " has unknown device " + std::to_string(tensors[i].device));
  }
  return MPT_OK;
}

int launch_on_cuda(const mpt_launch_desc& d) {
#ifdef MPT_CUDA_BACKEND
  std::string error;
  int status = mpt::cuda::launch(d, &error);
  if (status != MPT_OK) t_last_error = error.empty() ? std::string(d.kernel) + ": CUDA launch failed" : error;
  return status;
#else
  (void)d;
  return failure(MPT_ERR_DEVICE, kNoCuda);
#endif
}

int launch_on_cpu(const mpt_launch_desc& d) {
  mpt::KernelFunction kernel = mpt::find_kernel(d.kernel);
  if (!kernel)
    return failure(MPT_ERR_UNKNOWN_KERNEL, std::string("unknown kernel '") + d.kernel +
                                               "' (docs/kernels.md lists the kernels of this library)");
  try {
    const mpt::ScratchKernelScope scratch_names(d.kernel);
    std::optional<mpt::LaunchReport> report;
    if (d.flags & MPT_LAUNCH_REPORT) report.emplace(d, d.report);
    const mpt::CurrentReportScope reporting(report ? &*report : nullptr);
    kernel(mpt::Launch(d));
    return MPT_OK;
  } catch (const mpt::KernelFailure& f) {
    return failure(f.status, f.message);
  } catch (const std::bad_alloc&) {
    return failure(MPT_ERR_DEVICE, std::string(d.kernel) + ": out of host memory for the kernel's scratch buffers");
  } catch (const std::exception& e) {
    return failure(MPT_ERR_DEVICE, std::string(d.kernel) + ": " + e.what());
  }
}

}  // namespace

extern "C" {

MPT_API int mpt_launch(const mpt_launch_desc* launch) {
  int status = check_descriptor(launch);
  if (status != MPT_OK) return status;
  return any_tensor_on_cuda(*launch) ? launch_on_cuda(*launch) : launch_on_cpu(*launch);
}

MPT_API uint32_t mpt_abi_version(void) { return MPT_ABI_VERSION; }

MPT_API const char* mpt_last_error(void) { return t_last_error.c_str(); }

MPT_API void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name, uint64_t* id_out) {
  void* ptr = nullptr;
  if (device == MPT_DEVICE_CPU) {
    size_t rounded = (bytes + 63) / 64 * 64;
    ptr = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!ptr) {
      failure(MPT_ERR_DEVICE, "mpt_alloc: cannot allocate " + std::to_string(bytes) + " bytes of host memory for '" +
                                  (name ? name : "") + "'");
      return nullptr;
    }
    std::memset(ptr, 0, rounded ? rounded : 64);
  } else if (device == MPT_DEVICE_CUDA) {
#ifdef MPT_CUDA_BACKEND
    std::string error;
    ptr = mpt::cuda::alloc(bytes, &error);
    if (!ptr) {
      failure(MPT_ERR_DEVICE, "mpt_alloc: '" + std::string(name ? name : "") + "': " + error);
      return nullptr;
    }
#else
    failure(MPT_ERR_DEVICE, kNoCuda);
    return nullptr;
#endif
  } else {
    failure(MPT_ERR_BAD_ARGUMENTS, "mpt_alloc: unknown device " + std::to_string(device));
    return nullptr;
  }
  (void)category;
  uint64_t id = g_next_allocation_id.fetch_add(1, std::memory_order_relaxed);
  if (id_out) *id_out = id;
  return ptr;
}

MPT_API void mpt_free(void* ptr, int32_t device) {
  if (!ptr) return;
  if (device == MPT_DEVICE_CUDA) {
#ifdef MPT_CUDA_BACKEND
    mpt::cuda::free(ptr);
#endif
    return;
  }
  std::free(ptr);
}

// The library ignores logged values and declared host writes; tools interpose these calls.
// noinline and the empty asm keep them real, out-of-line functions.
__attribute__((noinline)) MPT_API void mpt_host_written(const void* data, size_t bytes) {
  (void)data; (void)bytes;
  __asm__ volatile("");
}

__attribute__((noinline)) MPT_API void mpt_log_scalar(const char* name, double value, int64_t step) {
  (void)name; (void)value; (void)step;
  __asm__ volatile("");
}

__attribute__((noinline)) MPT_API void mpt_log_text(const char* key, const char* value) {
  (void)key; (void)value;
  __asm__ volatile("");
}

MPT_API void mpt_set_communicator(const mpt_communicator* communicator) { mpt::set_communicator(communicator); }

MPT_API void mpt_set_num_threads(int n) {
  // OpenBLAS stays single-threaded; products are split over the library's own pool (gemm.cpp).
  int threads = n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  mpt::set_num_threads(threads);
}

MPT_API void mpt_parallel_tasks(int64_t tasks, void (*task)(void* context, int64_t i), void* context) {
  if (mpt::parallel_tasks(tasks, task, context)) return;
  for (int64_t i = 0; i < tasks; ++i) task(context, i);
}

}  // extern "C"
