// Runs the CUDA kernels of reference_trainer/kernels/cuda on the host, for tests on machines
// without a GPU. Compiled into the kernel sources with MPT_HOST_EMULATION, this header stands in
// for the CUDA runtime and cuBLAS:
//   - a launch runs its blocks one after another; the threads of a block run as real threads (a
//     reused pool) that meet at __syncthreads() and at warp shuffles and votes (a block-wide
//     barrier: the kernels call them from uniform control flow), so block reductions work as on
//     the device;
//     __shared__ variables are function statics, shared by the threads of the one block running;
//   - "device" memory is host memory; copies, memsets and the stream-ordered allocator are the C
//     library's; cudaGetDeviceCount reports one device;
//   - work queued on a stream (launches, async copies and memsets, async frees) runs at once, so an
//     event is complete when it is recorded, unless a test makes the device asynchronous
//     (mpt_emulation::Streams::set_deferred): then each stream keeps its work, in order, until the
//     test runs it (run) or the host waits for it (cudaStreamSynchronize, cudaEventSynchronize, and
//     the synchronous cudaMemset and cudaFree, which wait for every stream), and cudaEventQuery says
//     cudaErrorNotReady until the stream has run what was queued before the event. The NULL stream
//     is one stream among the others (its legacy synchronisation with them is not modelled), and
//     cuBLAS runs at once either way;
//   - cublasGemmStridedBatchedEx is a plain column-major product (fp32 sums in k order), so the
//     host run also checks how the backend maps row-major tensors onto cuBLAS's arguments.
// What it cannot show: timing, memory ordering between real GPU threads, and cuBLAS's own
// summation order (the GPU tests compare fp32-partials products with a tolerance for that).
#pragma once

#include <math.h>

#include <atomic>
#include <barrier>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

// [SECTION] language

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace mpt_emulation {

inline thread_local uint3 t_thread_idx, t_block_idx;
inline thread_local dim3 t_block_dim, t_grid_dim;
inline thread_local unsigned t_shuffles = 0;                 // shuffles of this thread in its block
inline std::barrier<>* g_block_barrier = nullptr;           // of the block running now
inline std::vector<unsigned char> g_exchange(2 * 1024 * 8); // warp shuffle slots, 8 bytes a thread

/* A fixed set of host threads standing in for the threads of one block. A launch hands every
 * thread index the same job; each runs the grid's blocks in order, meeting the others at a barrier
 * between blocks, so blocks do not overlap (their __shared__ statics stay theirs). */
class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool* pool = new ThreadPool;  // never joined: lives until the process exits
    return *pool;
  }

  void run(unsigned threads, const std::function<void(unsigned)>& job) {
    while (workers_.size() < threads) add_worker();
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &job;
    active_ = threads;
    remaining_ = threads;
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

 private:
  /* Called by run() before it publishes the job: the worker waits for the generation after the
   * current one, whenever it gets to run. */
  void add_worker() {
    unsigned index = static_cast<unsigned>(workers_.size());
    uint64_t current = generation_;
    workers_.emplace_back([this, index, current] { work(index, current); });
    workers_.back().detach();
  }

  void work(unsigned index, uint64_t seen) {
    for (;;) {
      const std::function<void(unsigned)>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= active_) continue;
        job = job_;
      }
      (*job)(index);
      std::lock_guard<std::mutex> lock(mu_);
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(unsigned)>* job_ = nullptr;
  unsigned active_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;
};

/* The device's streams: work queued on each, and how much of it has run (see the header's
 * comment). A stream is known by its handle; NULL is one of them. */
class Streams {
 public:
  static Streams& instance() {
    static Streams* streams = new Streams;  // never destroyed: work may be queued during exit
    return *streams;
  }

  /* With `on`, queued work waits until it is run; turning it off runs everything queued. */
  void set_deferred(bool on) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      deferred_ = on;
    }
    if (!on) run_all();
  }

  /* Work queued while the device is immediate runs now, after whatever its stream still holds. */
  void queue(void* stream, std::function<void()> work) {
    enum { kNow, kKept, kBehind } when = kNow;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Stream& s = streams_[stream];
      ++s.queued;
      if (deferred_) when = kKept;
      else if (!s.pending.empty()) when = kBehind;
      if (when != kNow) s.pending.push_back(std::move(work));
    }
    if (when == kKept) return;
    if (when == kBehind) {
      run(stream);
      return;
    }
    work();
    std::lock_guard<std::mutex> lock(mu_);
    ++streams_[stream].done;
  }

  /* How many operations were queued on the stream so far, and how many of them have run. */
  uint64_t queued(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_[stream].queued;
  }
  uint64_t done(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_[stream].done;
  }

  /* Runs the stream's queued work, in order, until `until` operations of it have run. */
  void run(void* stream, uint64_t until) {
    for (;;) {
      std::function<void()> work;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Stream& s = streams_[stream];
        if (s.done >= until || s.pending.empty()) return;
        work = std::move(s.pending.front());
        s.pending.pop_front();
      }
      work();
      std::lock_guard<std::mutex> lock(mu_);
      ++streams_[stream].done;
    }
  }
  void run(void* stream) { run(stream, queued(stream)); }

  /* cudaEventQuery calls so far: what a poll of events costs the host, in driver calls. */
  uint64_t event_queries() const { return event_queries_.load(); }
  void count_event_query() { ++event_queries_; }

  void run_all() {
    std::vector<void*> handles;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [handle, s] : streams_) handles.push_back(handle);
    }
    for (void* handle : handles) run(handle);
  }

 private:
  struct Stream {
    std::deque<std::function<void()>> pending;
    uint64_t queued = 0, done = 0;
  };
  std::mutex mu_;
  std::map<void*, Stream> streams_;
  bool deferred_ = false;
  std::atomic<uint64_t> event_queries_{0};
};

/* Runs `kernel(args...)` over `blocks` blocks of `threads` threads, queued on `stream`. */
template <typename Kernel>
struct Launcher {
  Kernel kernel;
  dim3 grid, block;
  void* stream = nullptr;
  template <typename... Args>
  void operator()(Args... args) const {
    const Launcher launch = *this;
    Streams::instance().queue(stream, [launch, args...] { launch.run(args...); });
  }

  template <typename... Args>
  void run(Args... args) const {
    std::barrier<> barrier(static_cast<std::ptrdiff_t>(block.x));
    g_block_barrier = &barrier;
    std::function<void(unsigned)> job = [&](unsigned t) {
      t_thread_idx = uint3{t, 0, 0};
      t_block_dim = block;
      t_grid_dim = grid;
      for (unsigned b = 0; b < grid.x; ++b) {
        t_block_idx = uint3{b, 0, 0};
        t_shuffles = 0;  // the threads of a block count their shuffles together
        kernel(args...);
        barrier.arrive_and_wait();  // the next block starts when this one has finished
      }
    };
    ThreadPool::instance().run(block.x, job);
    g_block_barrier = nullptr;
  }
};

template <typename Kernel>
Launcher<Kernel> launcher(Kernel kernel, dim3 blocks, dim3 threads, void* stream = nullptr) {
  return Launcher<Kernel>{kernel, blocks, threads, stream};
}

}  // namespace mpt_emulation

#define threadIdx (::mpt_emulation::t_thread_idx)
#define blockIdx (::mpt_emulation::t_block_idx)
#define blockDim (::mpt_emulation::t_block_dim)
#define gridDim (::mpt_emulation::t_grid_dim)

inline void __syncthreads() { mpt_emulation::g_block_barrier->arrive_and_wait(); }

/* The value of lane (lane + offset) of this thread's warp, or its own past the warp's end. Two
 * exchange buffers used in turn need one barrier per call: a thread cannot write a buffer again
 * before every thread has passed the next call's barrier, which follows its read. */
template <typename T>
T __shfl_down_sync(unsigned /*mask*/, T v, int offset) {
  static_assert(sizeof(T) <= 8);
  unsigned char* buffer = &mpt_emulation::g_exchange[(mpt_emulation::t_shuffles++ % 2) * 8 * 1024];
  unsigned t = threadIdx.x, lane = t % 32;
  std::memcpy(buffer + 8 * t, &v, sizeof(T));
  __syncthreads();
  T out = v;
  if (lane + static_cast<unsigned>(offset) < 32 && t + offset < blockDim.x) {
    std::memcpy(&out, buffer + 8 * (t + offset), sizeof(T));
  }
  return out;
}

/* The lanes of this thread's warp whose `v` equals its own, as a bit set (the whole warp takes
 * part; the exchange is the shuffles' own, so it needs the same block-uniform calls). */
inline unsigned __match_any_sync(unsigned /*mask*/, int v) {
  unsigned char* buffer = &mpt_emulation::g_exchange[(mpt_emulation::t_shuffles++ % 2) * 8 * 1024];
  unsigned t = threadIdx.x, warp_first = t - t % 32;
  std::memcpy(buffer + 8 * t, &v, sizeof v);
  __syncthreads();
  unsigned peers = 0;
  for (unsigned lane = 0; lane < 32 && warp_first + lane < blockDim.x; ++lane) {
    int other;
    std::memcpy(&other, buffer + 8 * (warp_first + lane), sizeof other);
    if (other == v) peers |= 1u << lane;
  }
  return peers;
}

inline int __popc(int v) { return __builtin_popcount(static_cast<unsigned>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }

template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> a(*address);
  T seen = a.load();
  while (seen < value && !a.compare_exchange_weak(seen, value)) {
  }
  return seen;
}

template <typename T>
T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}

inline float __int_as_float(int v) { return __builtin_bit_cast(float, v); }
inline float __uint_as_float(unsigned v) { return __builtin_bit_cast(float, v); }
inline unsigned __float_as_uint(float v) { return __builtin_bit_cast(unsigned, v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }

// [SECTION] runtime

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                   cudaErrorNotReady = 600 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
using cudaStream_t = void*;

inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::calloc(1, bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
inline cudaError_t cudaFree(void* p) {
  mpt_emulation::Streams::instance().run_all();  // cudaFree waits for the device
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  mpt_emulation::Streams::instance().queue(stream, [p] { std::free(p); });
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  mpt_emulation::Streams::instance().run_all();
  std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t stream) {
  mpt_emulation::Streams::instance().queue(stream, [p, v, n] { std::memset(p, v, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t stream) {
  mpt_emulation::Streams::instance().queue(stream, [d, s, n] { std::memmove(d, s, n); });
  return cudaSuccess;
}

struct CUmemPool_st {};
using cudaMemPool_t = CUmemPool_st*;
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int) {
  static CUmemPool_st the_pool;
  *pool = &the_pool;
  return cudaSuccess;
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }

// An event is complete once its stream has run what was queued before it was recorded (at once
// unless the device is deferred); all memory is "device".
struct CUevent_st {
  void* stream = nullptr;
  uint64_t position = 0;  // the stream's operations queued when it was recorded
};
using cudaEvent_t = CUevent_st*;
inline constexpr unsigned cudaEventDisableTiming = 2;
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2,
                      cudaMemoryTypeManaged = 3 };
struct cudaPointerAttributes {
  cudaMemoryType type = cudaMemoryTypeDevice;
};
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { *e = new CUevent_st; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  e->stream = stream;
  e->position = mpt_emulation::Streams::instance().queued(stream);
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  mpt_emulation::Streams::instance().count_event_query();
  return mpt_emulation::Streams::instance().done(e->stream) >= e->position ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  mpt_emulation::Streams::instance().run(e->stream, e->position);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  mpt_emulation::Streams::instance().run(stream);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void*) {
  *a = cudaPointerAttributes{};
  return cudaSuccess;
}

// [SECTION] cuBLAS

enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
struct cublasContext {};
using cublasHandle_t = cublasContext*;

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  static cublasContext context;
  *h = &context;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline const char* cublasGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_EMULATED"; }
inline const char* cublasGetStatusString(cublasStatus_t) { return "emulated cuBLAS error"; }

namespace mpt_emulation {
inline float element(const void* p, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
  uint16_t h = static_cast<const uint16_t*>(p)[i];
  if (t == CUDA_R_16BF) return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16);
  // IEEE binary16, exactly (subnormals included).
  int e = (h >> 10) & 31, m = h & 1023;
  float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24)
              : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}
}  // namespace mpt_emulation

/* C = op(A) op(B) + beta*C per batch entry, column-major, fp32 sums in k order. */
inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
    const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
    cudaDataType, int ldc, long long stride_c, int batch, cublasComputeType_t, cublasGemmAlgo_t) {
  using mpt_emulation::element;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int q = 0; q < batch; ++q) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int p = 0; p < k; ++p) {
          int64_t ia = op_a == CUBLAS_OP_N ? i + int64_t{p} * lda : p + int64_t{i} * lda;
          int64_t ib = op_b == CUBLAS_OP_N ? p + int64_t{j} * ldb : j + int64_t{p} * ldb;
          sum += element(a, a_type, q * stride_a + ia) * element(b, b_type, q * stride_b + ib);
        }
        float* out = static_cast<float*>(c) + q * stride_c + i + int64_t{j} * ldc;
        *out = al * sum + (be == 0.0f ? 0.0f : be * *out);
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
