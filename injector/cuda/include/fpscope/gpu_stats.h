// libfpscope_gpu.so: fpscope's tensor statistics on the GPU, and CUPTI activity collection.
//
// The injector dlopen()s this library the first time it meets a device tensor and asks for the
// table below with fpscope_gpu_api_v1(). submit() queues a one-pass reduction of a device array on
// the caller's stream and returns at once; the numbers (exactly those of fpscope::compute_stats,
// see docs/statistics.md) land in pinned host memory and are handed out by poll() once the
// stream has reached them. Nothing in submit() waits for the device.
//
// fpscope_gpu_cupti_start() subscribes CUPTI to the runtime API and device activity (kernels,
// copies, sets, device memory) and hands what it collects to the caller's callbacks; see
// docs/gpu.md. It fails cleanly (returns nonzero, last_error() says why) when CUPTI is missing or
// another profiler already holds the subscription.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/tensor_stats.h"

extern "C" {

// The table's version: the injector refuses a library that speaks another. 2 added read().
#define FPSCOPE_GPU_API_VERSION 2

struct fpscope_gpu_api {
  uint32_t version;  // FPSCOPE_GPU_API_VERSION
  // Queues a one-pass reduction of n elements at device_data on `stream` (a cudaStream_t, NULL
  // for the default stream). element_type is an fpscope::ElementType, level an
  // fpscope::StatsLevel. Returns 0 when queued, nonzero on failure (last_error() says why).
  int (*submit)(const void* device_data, int element_type, size_t n, int level, void* stream,
                uint64_t token);
  // Hands every finished result to done(); with wait != 0, first waits for all submitted work.
  // Results come back in submission order per stream. A result the device could not give (its
  // event failed) comes back once, with stats null; last_error() says why.
  void (*poll)(int wait, void (*done)(uint64_t token, const fpscope::TensorStats* stats, void* user),
               void* user);
  const char* (*last_error)(void);
  // Copies `bytes` from device_data into host memory once the work queued on `stream` before it
  // has run, and waits for that (a few scalars, such as the loss scaler's); with bytes 0, only
  // waits for the stream. Returns 0, or nonzero on failure (last_error() says why).
  int (*read)(void* host, const void* device_data, size_t bytes, void* stream);
};

// The table, or NULL when no CUDA device can be used (last error in the table is then not
// available: the reason goes to fpscope_gpu_unavailable_reason()).
__attribute__((visibility("default"))) const fpscope_gpu_api* fpscope_gpu_api_v1(void);
__attribute__((visibility("default"))) const char* fpscope_gpu_unavailable_reason(void);

// ---- CUPTI activity ------------------------------------------------------------------------
// Records handed to the caller. Times are CUPTI timestamps in nanoseconds (the same clock as
// cuptiGetTimestamp()); fpscope_gpu_cupti_clock_offset() gives CLOCK_MONOTONIC minus that clock.
struct fpscope_gpu_kernel_activity {
  uint64_t start_ns, end_ns;
  const char* name;          // valid during the callback only
  uint32_t correlation_id;
  uint32_t device, context, stream;
  int32_t grid[3], block[3];
  int32_t shared_bytes, registers_per_thread;
};
struct fpscope_gpu_memcpy_activity {
  uint64_t start_ns, end_ns, bytes;
  uint32_t correlation_id, device, stream;
  uint8_t copy_kind;         // CUpti_ActivityMemcpyKind
  uint8_t src_kind, dst_kind;  // CUpti_ActivityMemoryKind
};
struct fpscope_gpu_memset_activity {
  uint64_t start_ns, end_ns, bytes;
  uint32_t correlation_id, device, stream, value;
};
struct fpscope_gpu_memory_activity {
  uint64_t t_ns, bytes, address;
  uint32_t device, stream;
  uint8_t operation;         // 1 allocation, 2 release (CUpti_ActivityMemoryOperationType)
  uint8_t memory_kind;       // CUpti_ActivityMemoryKind
};
struct fpscope_gpu_api_call {
  uint64_t start_ns, end_ns;  // CLOCK_MONOTONIC, taken in the callback
  const char* name;           // runtime function name, valid during the callback only
  uint32_t correlation_id;
};

struct fpscope_gpu_cupti_callbacks {
  void* user;
  void (*kernel)(const fpscope_gpu_kernel_activity*, void* user);
  void (*memcpy)(const fpscope_gpu_memcpy_activity*, void* user);
  void (*memset)(const fpscope_gpu_memset_activity*, void* user);
  void (*memory)(const fpscope_gpu_memory_activity*, void* user);
  void (*api_call)(const fpscope_gpu_api_call*, void* user);  // may be NULL
};

// Starts collection (idempotent). Returns 0 on success; nonzero when CUPTI cannot be used, with
// the reason in fpscope_gpu_cupti_error(). Callbacks may run on CUPTI's own threads.
__attribute__((visibility("default"))) int fpscope_gpu_cupti_start(
    const fpscope_gpu_cupti_callbacks* callbacks);
// Synchronises the device, flushes every activity buffer (forced) and stops. Safe to call twice.
__attribute__((visibility("default"))) void fpscope_gpu_cupti_stop(void);
__attribute__((visibility("default"))) const char* fpscope_gpu_cupti_error(void);
// CLOCK_MONOTONIC nanoseconds minus CUPTI timestamp nanoseconds, measured at start.
__attribute__((visibility("default"))) int64_t fpscope_gpu_cupti_clock_offset(void);

}  // extern "C"
