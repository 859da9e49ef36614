// Converts the CUPTI activity of libfpscope_gpu.so (fpscope/gpu_stats.h) into the ring's wire
// records (fpscope/contract/wire.h), for the injector to publish. Header-only and free of CUDA: the
// injector includes it without linking CUDA. Times move from CUPTI's clock to the traced
// process's monotonic clock with the offset fpscope_gpu_cupti_clock_offset() reports; strings
// (kernel names) are interned by the caller, which passes their id.
#pragma once

#include <cstdint>

#include "fpscope/gpu_stats.h"
#include "fpscope/contract/wire.h"

namespace fpscope::gpu {

template <typename R>
R wire_record(wire::RecordType type, uint32_t thread) {
  R r{};
  r.h.type = type;
  r.h.slots = static_cast<uint16_t>(sizeof(R) / wire::kSlotBytes);
  r.h.thread = thread;
  return r;
}

inline int64_t to_monotonic(uint64_t cupti_ns, int64_t offset_ns) {
  return static_cast<int64_t>(cupti_ns) + offset_ns;
}

inline wire::CudaKernelRecord kernel_record(const fpscope_gpu_kernel_activity& a, uint32_t name_id,
                                            int64_t offset_ns, uint32_t thread) {
  auto r = wire_record<wire::CudaKernelRecord>(wire::RecordType::CudaKernel, thread);
  r.start_ns = to_monotonic(a.start_ns, offset_ns);
  r.end_ns = to_monotonic(a.end_ns, offset_ns);
  r.name = name_id;
  r.correlation_id = a.correlation_id;
  r.device = a.device;
  r.stream = a.stream;
  for (int i = 0; i < 3; ++i) {
    r.grid[i] = a.grid[i];
    r.block[i] = a.block[i];
  }
  return r;
}

inline wire::CudaMemcpyRecord memcpy_record(const fpscope_gpu_memcpy_activity& a, int64_t offset_ns,
                                            uint32_t thread) {
  auto r = wire_record<wire::CudaMemcpyRecord>(wire::RecordType::CudaMemcpy, thread);
  r.start_ns = to_monotonic(a.start_ns, offset_ns);
  r.end_ns = to_monotonic(a.end_ns, offset_ns);
  r.bytes = a.bytes;
  r.correlation_id = a.correlation_id;
  r.device = a.device;
  r.stream = a.stream;
  r.copy_kind = a.copy_kind;
  r.src_kind = a.src_kind;
  r.dst_kind = a.dst_kind;
  return r;
}

inline wire::CudaMemsetRecord memset_record(const fpscope_gpu_memset_activity& a, int64_t offset_ns,
                                            uint32_t thread) {
  auto r = wire_record<wire::CudaMemsetRecord>(wire::RecordType::CudaMemset, thread);
  r.start_ns = to_monotonic(a.start_ns, offset_ns);
  r.end_ns = to_monotonic(a.end_ns, offset_ns);
  r.bytes = a.bytes;
  r.correlation_id = a.correlation_id;
  r.device = a.device;
  r.stream = a.stream;
  r.value = a.value;
  return r;
}

inline wire::CudaMemoryRecord memory_record(const fpscope_gpu_memory_activity& a, int64_t offset_ns,
                                            uint32_t thread) {
  auto r = wire_record<wire::CudaMemoryRecord>(wire::RecordType::CudaMemory, thread);
  r.t_ns = to_monotonic(a.t_ns, offset_ns);
  r.bytes = a.bytes;
  r.address = a.address;
  r.device = a.device;
  r.stream = a.stream;
  r.operation = a.operation;
  r.memory_kind = a.memory_kind;
  return r;
}

}  // namespace fpscope::gpu
