// fpscope_gpu_api_v1(): the table the injector uses to measure device tensors.
//
// submit() takes a result slot (device scratch for the block partials and the result, a pinned
// host copy, an event), queues the reduction, the device-to-host copy and the event on the
// caller's stream, and returns. poll() hands over every slot whose event has completed (or, with
// wait, every slot), converting on the host with fpscope_stats' finalize(). A stream runs its work
// in order, so once one of its slots is not done, poll() asks about none of its later ones: a
// poll costs one event query per stream still running and one per result handed over, however
// many results are in flight. Slots are reused; the pool grows when all are in flight. One mutex
// guards the pool; callbacks run without it.
#include <algorithm>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fpscope/gpu_stats.h"
#include "partial_to_stats.h"
#include "stats_kernels.h"

namespace fpscope::gpu {
namespace {

// A plain array: exit() destroys the main thread's thread_local objects before it runs the exit
// handlers, and the injector's handler may still fail here.
thread_local char t_last_error[512];

bool fail(const std::string& message) {
  std::snprintf(t_last_error, sizeof t_last_error, "%s", message.c_str());
  return false;
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  return fail(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

struct Slot {
  GpuPartial* partials = nullptr;     // device, kMaxScanBlocks entries
  StatsResult* device_result = nullptr;
  StatsResult* host_result = nullptr;  // pinned
  cudaEvent_t done = nullptr;
  ~Slot() {
    if (done) cudaEventDestroy(done);
    if (host_result) cudaFreeHost(host_result);
    if (partials) cudaFree(partials);
  }
};

struct Pending {
  Slot* slot;
  cudaStream_t stream;
  uint64_t token;
  uint64_t count;
  ElementType type;
  StatsLevel level;
};

struct Finished {
  uint64_t token;
  TensorStats stats;
  bool lost = false;  // the result could not be had: handed out without statistics
};

class StatsQueue {
 public:
  bool submit(const void* data, ElementType type, size_t n, StatsLevel level, cudaStream_t stream,
              uint64_t token);
  void poll(bool wait, std::vector<Finished>* finished);

 private:
  Slot* take_slot();
  std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> free_;
  std::deque<Pending> pending_;
  // poll(): the streams with a slot not done, whose later slots are not either (kept from poll to
  // poll, so that a poll allocates nothing). A handle that names a different stream on each thread
  // (cudaStreamPerThread, or NULL with per-thread default streams) counts as one here: a slot not
  // done on one thread's stream holds back the others' until the next poll, which costs latency,
  // never a result.
  std::vector<cudaStream_t> running_;
};

Slot* StatsQueue::take_slot() {
  if (!free_.empty()) {
    Slot* s = free_.back();
    free_.pop_back();
    return s;
  }
  auto slot = std::make_unique<Slot>();
  void* device = nullptr;
  size_t bytes = sizeof(GpuPartial) * kMaxScanBlocks + sizeof(StatsResult);
  if (!check(cudaMalloc(&device, bytes), "cudaMalloc (statistics scratch)")) return nullptr;
  slot->partials = static_cast<GpuPartial*>(device);
  slot->device_result = reinterpret_cast<StatsResult*>(slot->partials + kMaxScanBlocks);
  void* host = nullptr;
  if (!check(cudaMallocHost(&host, sizeof(StatsResult)), "cudaMallocHost (statistics result)")) return nullptr;
  slot->host_result = static_cast<StatsResult*>(host);
  if (!check(cudaEventCreateWithFlags(&slot->done, cudaEventDisableTiming), "cudaEventCreate")) return nullptr;
  slots_.push_back(std::move(slot));
  return slots_.back().get();
}

bool StatsQueue::submit(const void* data, ElementType type, size_t n, StatsLevel level,
                        cudaStream_t stream, uint64_t token) {
  if (n > kMaxScanElements) {
    return fail("submit: " + std::to_string(n) + " elements are more than one scan takes (" +
                std::to_string(kMaxScanElements) + ")");
  }
  if (n > 0) {
    cudaPointerAttributes attributes{};
    if (!check(cudaPointerGetAttributes(&attributes, data), "cudaPointerGetAttributes")) return false;
    if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
      return fail("submit: the data pointer is not device memory");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Slot* slot = take_slot();
  if (!slot) return false;
  bool ok = check(queue_reduction(data, n, stats_params(type, level), slot->partials,
                                  slot->device_result, stream), "statistics kernels") &&
            check(cudaMemcpyAsync(slot->host_result, slot->device_result, sizeof(StatsResult),
                                  cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (statistics result)") &&
            check(cudaEventRecord(slot->done, stream), "cudaEventRecord");
  if (!ok) {
    free_.push_back(slot);
    return false;
  }
  pending_.push_back(Pending{slot, stream, token, n, type, level});
  return true;
}

void StatsQueue::poll(bool wait, std::vector<Finished>* finished) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.clear();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!wait && std::find(running_.begin(), running_.end(), it->stream) != running_.end()) {
      ++it;
      continue;
    }
    cudaError_t e = wait ? cudaEventSynchronize(it->slot->done) : cudaEventQuery(it->slot->done);
    if (e == cudaErrorNotReady) {
      running_.push_back(it->stream);  // a later slot on another stream may be done
      ++it;
      continue;
    }
    Finished f{it->token, {}};
    if (e == cudaSuccess) {
      const StatsResult& r = *it->slot->host_result;
      partial_to_stats(r.total, r.hist, it->count, it->type, it->level, &f.stats);
    } else {
      check(e, "statistics result");  // the result is lost; last_error() says why
      f.lost = true;
    }
    finished->push_back(f);
    free_.push_back(it->slot);
    it = pending_.erase(it);
  }
}

StatsQueue& queue() {
  static StatsQueue* q = new StatsQueue;  // never destroyed: results may be polled during exit
  return *q;
}

int api_submit(const void* device_data, int element_type, size_t n, int level, void* stream,
               uint64_t token) {
  if (element_type < 0 || element_type > 2) return fail("submit: element type must be 0 (f32), 1 (f16) or 2 (bf16)"), 1;
  if (level < 0 || level > 1) return fail("submit: level must be 0 (basic) or 1 (full)"), 1;
  if (n > 0 && !device_data) return fail("submit: no data"), 1;
  bool ok = queue().submit(device_data, static_cast<ElementType>(element_type), n,
                           static_cast<StatsLevel>(level), static_cast<cudaStream_t>(stream), token);
  return ok ? 0 : 1;
}

void api_poll(int wait, void (*done)(uint64_t, const TensorStats*, void*), void* user) {
  std::vector<Finished> finished;
  queue().poll(wait != 0, &finished);
  if (!done) return;
  for (const Finished& f : finished) done(f.token, f.lost ? nullptr : &f.stats, user);
}

const char* api_last_error() { return t_last_error; }

int api_read(void* host, const void* device_data, size_t bytes, void* stream) {
  if (bytes > 0 && (!host || !device_data)) return fail("read: no data"), 1;
  auto s = static_cast<cudaStream_t>(stream);
  bool ok = (bytes == 0 || check(cudaMemcpyAsync(host, device_data, bytes, cudaMemcpyDeviceToHost, s),
                                 "cudaMemcpyAsync (read)")) &&
            check(cudaStreamSynchronize(s), "cudaStreamSynchronize (read)");
  return ok ? 0 : 1;
}

const fpscope_gpu_api kApi = {FPSCOPE_GPU_API_VERSION, api_submit, api_poll, api_last_error, api_read};

std::string& unavailable_reason() {
  static std::string reason;
  return reason;
}

bool device_usable() {
  static const bool usable = [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      unavailable_reason() = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e);
      return false;
    }
    if (count == 0) {
      unavailable_reason() = "no CUDA device present";
      return false;
    }
    return true;
  }();
  return usable;
}

}  // namespace
}  // namespace fpscope::gpu

extern "C" {

const fpscope_gpu_api* fpscope_gpu_api_v1(void) {
  return fpscope::gpu::device_usable() ? &fpscope::gpu::kApi : nullptr;
}

const char* fpscope_gpu_unavailable_reason(void) {
  fpscope::gpu::device_usable();
  return fpscope::gpu::unavailable_reason().c_str();
}

}  // extern "C"
