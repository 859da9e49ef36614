// The injector's side of CUPTI collection, ready to use: starts CUPTI through a loaded
// libfpscope_gpu.so (gpu_loader.h), turns each activity into its wire record (cupti_wire.h),
// interns kernel names, and hands the records to the injector's publish function one at a time.
// Header-only, no CUDA. CUPTI calls back on its own threads: publish() must accept records from a
// thread other than the program's (the forwarder never calls it concurrently with itself).
//
//   fpscope::gpu::CuptiForwarder forwarder;                     // lives until the ring closes
//   if (!forwarder.start(gpu, {publish, intern, ring_user, thread_id}, &why)) log(why);  // carry on
//   ...
//   forwarder.stop();                                           // at exit, before the ring closes
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "fpscope/cupti_wire.h"
#include "fpscope/gpu_loader.h"

namespace fpscope::gpu {

class CuptiForwarder {
 public:
  struct Sink {
    void (*publish)(const wire::RecordHeader* record, void* user);  // the record is valid during the call
    uint32_t (*intern)(const char* text, void* user);               // a string id for the text
    void* user;
    uint32_t thread;  // the wire thread number the records carry
  };

  /* Starts CUPTI with this forwarder's callbacks. False, with CUPTI's reason, when it cannot be
   * used (no device, another profiler); nothing is collected then and the program carries on. */
  bool start(const GpuLibrary& gpu, const Sink& sink, std::string* error) {
    attach(sink, 0);
    fpscope_gpu_cupti_callbacks callbacks{this, on_kernel, on_memcpy, on_memset, on_memory, nullptr};
    if (gpu.cupti_start(&callbacks) != 0) {
      if (error) *error = gpu.cupti_error();
      return false;
    }
    offset_ns_ = gpu.cupti_clock_offset();
    stop_ = gpu.cupti_stop;
    return true;
  }

  /* Synchronises the device, flushes CUPTI's buffers through the sink, and stops. */
  void stop() {
    if (stop_) stop_();
    stop_ = nullptr;
  }

  /* Sets where records go and the clock offset, without CUPTI (start() uses it; so do tests). */
  void attach(const Sink& sink, int64_t offset_ns) {
    sink_ = sink;
    offset_ns_ = offset_ns;
  }

  // [callbacks] as fpscope_gpu_cupti_callbacks takes them; `self` is the forwarder.
  static void on_kernel(const fpscope_gpu_kernel_activity* a, void* self) {
    auto* f = static_cast<CuptiForwarder*>(self);
    std::lock_guard<std::mutex> lock(f->mu_);
    uint32_t name = f->sink_.intern(a->name ? a->name : "", f->sink_.user);
    auto r = kernel_record(*a, name, f->offset_ns_, f->sink_.thread);
    f->sink_.publish(&r.h, f->sink_.user);
  }
  static void on_memcpy(const fpscope_gpu_memcpy_activity* a, void* self) {
    auto* f = static_cast<CuptiForwarder*>(self);
    std::lock_guard<std::mutex> lock(f->mu_);
    auto r = memcpy_record(*a, f->offset_ns_, f->sink_.thread);
    f->sink_.publish(&r.h, f->sink_.user);
  }
  static void on_memset(const fpscope_gpu_memset_activity* a, void* self) {
    auto* f = static_cast<CuptiForwarder*>(self);
    std::lock_guard<std::mutex> lock(f->mu_);
    auto r = memset_record(*a, f->offset_ns_, f->sink_.thread);
    f->sink_.publish(&r.h, f->sink_.user);
  }
  static void on_memory(const fpscope_gpu_memory_activity* a, void* self) {
    auto* f = static_cast<CuptiForwarder*>(self);
    std::lock_guard<std::mutex> lock(f->mu_);
    auto r = memory_record(*a, f->offset_ns_, f->sink_.thread);
    f->sink_.publish(&r.h, f->sink_.user);
  }

 private:
  std::mutex mu_;
  Sink sink_{};
  int64_t offset_ns_ = 0;
  void (*stop_)(void) = nullptr;
};

}  // namespace fpscope::gpu
