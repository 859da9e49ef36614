// CUPTI collection for libfpscope_gpu.so: runtime API calls (callback API) and device activity
// (kernels, memory copies, memsets, device allocations and frees) from dynamically allocated
// activity buffers, handed to the caller's callbacks as plain structs (fpscope/gpu_stats.h).
//
// One CUPTI subscriber is allowed per process: when another profiler holds it, cuptiSubscribe
// fails and start() says so; the caller carries on without device activity. Every CUPTI call is
// checked and a failure names the call, its file and line. stop() synchronises the device and
// forces a flush, so records of kernels still running at exit are delivered; records still inside
// CUPTI when the process is killed are lost.
#include <cupti.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "fpscope/gpu_stats.h"

namespace fpscope::gpu {
namespace {

constexpr size_t kBufferBytes = 4 << 20;
constexpr size_t kRecordAlignment = 8;

struct CuptiState {
  std::mutex mu;
  bool started = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  fpscope_gpu_cupti_callbacks callbacks{};
  std::string error;
  int64_t clock_offset_ns = 0;
  size_t dropped = 0;
};

CuptiState& state() {
  static CuptiState* s = new CuptiState;  // never destroyed: CUPTI may call back during exit
  return *s;
}

/* Records a failed CUPTI call as "<call> failed at <file>:<line>: <CUPTI's reason>". */
bool cupti_ok(CUptiResult r, const char* call, const char* file, int line) {
  if (r == CUPTI_SUCCESS) return true;
  const char* reason = nullptr;
  cuptiGetResultString(r, &reason);
  state().error = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  (reason ? reason : "unknown CUPTI error");
  return false;
}
#define FPSCOPE_CUPTI(call) cupti_ok((call), #call, __FILE__, __LINE__)

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// [SECTION] runtime API callbacks

void CUPTIAPI on_runtime_api(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                             const void* data) {
  auto* s = static_cast<CuptiState*>(user);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || !s->callbacks.api_call) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite == CUPTI_API_ENTER) {
    *info->correlationData = static_cast<uint64_t>(monotonic_ns());
    return;
  }
  fpscope_gpu_api_call call{};
  call.start_ns = *info->correlationData;
  call.end_ns = static_cast<uint64_t>(monotonic_ns());
  call.name = info->functionName;
  call.correlation_id = info->correlationId;
  s->callbacks.api_call(&call, s->callbacks.user);
  (void)id;
}

// [SECTION] activity buffers

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void deliver(const CUpti_Activity* record, const fpscope_gpu_cupti_callbacks& cb) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      fpscope_gpu_kernel_activity a{k->start, k->end, k->name, k->correlationId, k->deviceId,
                                    k->contextId, k->streamId, {k->gridX, k->gridY, k->gridZ},
                                    {k->blockX, k->blockY, k->blockZ},
                                    k->staticSharedMemory + k->dynamicSharedMemory,
                                    k->registersPerThread};
      if (cb.kernel) cb.kernel(&a, cb.user);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      fpscope_gpu_memcpy_activity a{m->start, m->end, m->bytes, m->correlationId, m->deviceId,
                                    m->streamId, m->copyKind, m->srcKind, m->dstKind};
      if (cb.memcpy) cb.memcpy(&a, cb.user);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      fpscope_gpu_memset_activity a{m->start, m->end, m->bytes, m->correlationId, m->deviceId,
                                    m->streamId, m->value};
      if (cb.memset) cb.memset(&a, cb.user);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      fpscope_gpu_memory_activity a{m->timestamp, m->bytes, m->address, m->deviceId, m->streamId,
                                    static_cast<uint8_t>(m->memoryOperationType),
                                    static_cast<uint8_t>(m->memoryKind)};
      if (cb.memory) cb.memory(&a, cb.user);
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                               size_t valid_size) {
  CuptiState& s = state();
  CUpti_Activity* record = nullptr;
  while (valid_size > 0) {
    CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
    if (!cupti_ok(r, "cuptiActivityGetNextRecord(buffer, valid_size, &record)", __FILE__, __LINE__)) break;
    deliver(record, s.callbacks);
  }
  size_t dropped = 0;
  if (FPSCOPE_CUPTI(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped))) s.dropped += dropped;
  std::free(buffer);
  (void)size;
}

// [SECTION] start and stop

const CUpti_ActivityKind kActivityKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                             CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                             CUPTI_ACTIVITY_KIND_MEMORY2};

bool start_locked(CuptiState& s, const fpscope_gpu_cupti_callbacks& callbacks) {
  s.callbacks = callbacks;
  CUptiResult r = cuptiSubscribe(&s.subscriber, on_runtime_api, &s);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    s.error = "CUPTI is already in use by another profiler (cuptiSubscribe: multiple subscribers "
              "not supported); device activity will not be traced";
    return false;
  }
  if (!cupti_ok(r, "cuptiSubscribe(&s.subscriber, on_runtime_api, &s)", __FILE__, __LINE__)) return false;
  if (!FPSCOPE_CUPTI(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)) ||
      !FPSCOPE_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed))) {
    cuptiUnsubscribe(s.subscriber);
    return false;
  }
  for (CUpti_ActivityKind kind : kActivityKinds) {
    if (!FPSCOPE_CUPTI(cuptiActivityEnable(kind))) {
      cuptiUnsubscribe(s.subscriber);
      return false;
    }
  }
  uint64_t cupti_now = 0;
  if (FPSCOPE_CUPTI(cuptiGetTimestamp(&cupti_now))) {
    s.clock_offset_ns = monotonic_ns() - static_cast<int64_t>(cupti_now);
  }
  return true;
}

}  // namespace
}  // namespace fpscope::gpu

extern "C" {

int fpscope_gpu_cupti_start(const fpscope_gpu_cupti_callbacks* callbacks) {
  using namespace fpscope::gpu;
  CuptiState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.started) return 0;
  if (!callbacks) {
    s.error = "fpscope_gpu_cupti_start: no callbacks";
    return 1;
  }
  if (!start_locked(s, *callbacks)) return 1;
  s.started = true;
  return 0;
}

void fpscope_gpu_cupti_stop(void) {
  using namespace fpscope::gpu;
  CuptiState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.started) return;
  s.started = false;
  cudaDeviceSynchronize();  // kernels still running finish, so their records exist
  FPSCOPE_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  for (CUpti_ActivityKind kind : kActivityKinds) FPSCOPE_CUPTI(cuptiActivityDisable(kind));
  FPSCOPE_CUPTI(cuptiUnsubscribe(s.subscriber));
  if (s.dropped > 0 && s.error.empty()) {
    s.error = std::to_string(s.dropped) + " CUPTI activity records were dropped";
  }
}

const char* fpscope_gpu_cupti_error(void) { return fpscope::gpu::state().error.c_str(); }

int64_t fpscope_gpu_cupti_clock_offset(void) { return fpscope::gpu::state().clock_offset_ns; }

}  // extern "C"
