// CUDA's injection entry point: a CUDA program whose environment names this library in
// CUDA_INJECTION64_PATH (`fpscope run` sets it) calls InitializeInjection() when the driver starts.
// The injector then loads libfpscope_gpu.so (gpu_loader.h) and starts CUPTI activity collection
// through cupti_forwarder.h; the records go into the ring through the session's producer (its
// mutex and string table), on a thread number of their own. A CPU-only program never gets here.
//
// Whether collection runs is recorded once per traced process as meta `injector.cupti_status`:
// `active`, or `unavailable: <reason>` (no libfpscope_gpu.so, no device, another profiler holds
// CUPTI). At exit the collection is flushed (the device synchronised first) and stopped.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "fpscope/cupti_forwarder.h"
#include "fpscope/gpu_loader.h"
#include "runtime.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);

namespace fpscope::inject {
namespace {

// Where the forwarder's callbacks deliver: the session and the thread number the records carry.
struct CuptiDestination {
  Session* session = nullptr;
  uint32_t thread = 0;
};

CuptiDestination g_destination;
// Never deleted: CUPTI may still be delivering on its own threads while the process exits.
std::atomic<gpu::CuptiForwarder*> g_forwarder{nullptr};
std::mutex g_stop_mutex;

void publish_to_ring(const wire::RecordHeader* record, void* user) {
  auto* d = static_cast<CuptiDestination*>(user);
  if (session_for_entry_point() == nullptr) return;  // tracing stopped (tracing_failed) or torn down
  guarded("CUPTI's activity delivery", [&] { d->session->publish_framed(record); });
}

uint32_t intern_in_ring(const char* text, void* user) {
  auto* d = static_cast<CuptiDestination*>(user);
  if (session_for_entry_point() == nullptr) return 0;  // tracing stopped (tracing_failed) or torn down
  return guarded("CUPTI's activity delivery", uint32_t{0},
                 [&] { return d->session->intern_string(text ? text : "", d->thread); });
}

void report_unavailable(Session* session, const std::string& why) {
  std::fprintf(stderr, "fpscope: device activity (CUPTI) is not traced: %s\n", why.c_str());
  session->injector_status("cupti_status", "unavailable: " + why);
}

// Runs before the libraries' destructors, while the CUDA runtime still works.
void stop_at_exit() { stop_device_activity(); }

void start_device_activity() {
  Session* session = session_for_entry_point();
  if (session == nullptr) return;  // not traced here: forward, as the hooks do
  gpu::GpuLibrary library;
  std::string why;
  const std::string folder = gpu::folder_of(reinterpret_cast<const void*>(&InitializeInjection));
  if (!gpu::load_gpu_library(folder, &library, &why)) {
    report_unavailable(session, why);
    return;
  }
  g_destination = CuptiDestination{session, new_thread_number()};
  auto* forwarder = new gpu::CuptiForwarder;
  if (!forwarder->start(library, {publish_to_ring, intern_in_ring, &g_destination, g_destination.thread},
                        &why)) {
    delete forwarder;  // CUPTI was not started: nothing refers to it
    report_unavailable(session, why.empty() ? "CUPTI could not be started" : why);
    return;
  }
  g_forwarder.store(forwarder, std::memory_order_release);
  session->injector_status("cupti_status", "active");
  std::atexit(stop_at_exit);
}

}  // namespace

void stop_device_activity() {
  if (g_forwarder.load(std::memory_order_acquire) == nullptr) return;  // CPU-only: nothing to do
  std::lock_guard lock(g_stop_mutex);
  gpu::CuptiForwarder* forwarder = g_forwarder.exchange(nullptr, std::memory_order_acq_rel);
  if (forwarder) forwarder->stop();  // synchronises the device, flushes (FLUSH_FORCED), stops
}

}  // namespace fpscope::inject

// Named by CUDA_INJECTION64_PATH: the CUDA driver loads the library and calls this once; a second
// call (another entry, a library that calls it too) does nothing. Returns 1: the program carries
// on whatever happened to collection.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  std::call_once(once, [] { fpscope::inject::guarded("InitializeInjection", fpscope::inject::start_device_activity); });
  return 1;
}
