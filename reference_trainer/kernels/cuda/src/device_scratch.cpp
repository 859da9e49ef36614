/* The per-thread device scratch cache behind Scratch (see device_scratch.h): a handful of blocks
 * per thread, best fit on the same stream first; very large blocks are not kept. */
#include "device_scratch.h"

#include <string>
#include <vector>

#include "mpt/abi.h"

namespace mpt::cuda::detail {
namespace {

#if defined(MPT_HOST_EMULATION)
constexpr int kScratchDevice = MPT_DEVICE_CPU;  // the emulation's device memory is host memory
#else
constexpr int kScratchDevice = MPT_DEVICE_CUDA;
#endif

constexpr size_t kMaxCachedBlocks = 8;
constexpr size_t kMaxCachedBytes = size_t{1} << 30;  // bigger blocks go back at once

struct Block {
  void* memory;
  size_t capacity;
  cudaStream_t stream;
};

thread_local const char* t_current_kernel = nullptr;

/* The thread's cached blocks, freed when the thread ends. mpt_free of device memory is cudaFree,
 * which waits for the device, so no queued work still reads a block when it goes. */
struct Cache {
  std::vector<Block> blocks;
  void clear() {
    for (const Block& b : blocks) mpt_free(b.memory, kScratchDevice);
    blocks.clear();
  }
  ~Cache() { clear(); }
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

}  // namespace

ScratchKernelScope::ScratchKernelScope(const char* kernel) : previous_(t_current_kernel) { t_current_kernel = kernel; }
ScratchKernelScope::~ScratchKernelScope() { t_current_kernel = previous_; }

cudaError_t Scratch::get(size_t bytes, void** out) {
  if (bytes == 0) bytes = 1;
  if (memory_ && capacity_ >= bytes) {
    *out = memory_;
    return cudaSuccess;
  }
  release();
  auto& blocks = cache().blocks;
  size_t best = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].stream == stream_ && blocks[i].capacity >= bytes &&
        (best == blocks.size() || blocks[i].capacity < blocks[best].capacity)) {
      best = i;
    }
  }
  if (best < blocks.size()) {
    memory_ = blocks[best].memory;
    capacity_ = blocks[best].capacity;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    const std::string name = std::string(t_current_kernel ? t_current_kernel : "kernel") + ".scratch";
    memory_ = mpt_alloc(bytes, kScratchDevice, MPT_CAT_WORKSPACE, name.c_str(), nullptr);
    if (memory_ == nullptr) {
      *out = nullptr;
      return cudaErrorMemoryAllocation;
    }
    capacity_ = bytes;
  }
  *out = memory_;
  return cudaSuccess;
}

void Scratch::release() {
  if (!memory_) return;
  auto& blocks = cache().blocks;
  if (capacity_ <= kMaxCachedBytes) {
    if (blocks.size() >= kMaxCachedBlocks) {  // drop the oldest
      mpt_free(blocks.front().memory, kScratchDevice);
      blocks.erase(blocks.begin());
    }
    blocks.push_back(Block{memory_, capacity_, stream_});
  } else {
    mpt_free(memory_, kScratchDevice);
  }
  memory_ = nullptr;
  capacity_ = 0;
}

Scratch::~Scratch() { release(); }

void drop_scratch_cache() { cache().clear(); }

}  // namespace mpt::cuda::detail
