// The per-thread block cache behind ScratchFloats (see scratch.h): a handful of blocks per
// thread, best fit first; very large blocks are not kept.
//
// Blocks come from the library's own allocation call, mpt_alloc (category workspace, named after
// the kernel that first needed them), and go back through mpt_free, so a tool that interposes the
// allocation calls sees every byte the kernels hold, cached scratch included. The call goes through
// the PLT (the library is linked without -Bsymbolic), which is what lets a tool see it.
#include "scratch.h"

#include <new>
#include <string>
#include <utility>
#include <vector>

#include "mpt/abi.h"

namespace mpt {
namespace {

struct Block {
  float* memory;
  size_t capacity;
};

constexpr size_t kMaxCachedBlocks = 8;
constexpr size_t kMaxCachedFloats = size_t{1} << 28;  // 1 GiB: bigger blocks go back to the system

thread_local const char* t_current_kernel = nullptr;

float* allocate_block(size_t floats) {
  const std::string name = std::string(t_current_kernel ? t_current_kernel : "kernel") + ".scratch";
  void* memory = mpt_alloc(floats * sizeof(float), MPT_DEVICE_CPU, MPT_CAT_WORKSPACE, name.c_str(), nullptr);
  if (memory == nullptr) throw std::bad_alloc();
  return static_cast<float*>(memory);
}

void free_block(float* memory) { mpt_free(memory, MPT_DEVICE_CPU); }

// The thread's cached blocks, given back when the thread ends.
struct Cache {
  std::vector<Block> blocks;
  ~Cache() {
    for (const Block& b : blocks) free_block(b.memory);
  }
};

std::vector<Block>& cache() {
  thread_local Cache c;
  return c.blocks;
}

}  // namespace

ScratchKernelScope::ScratchKernelScope(const char* kernel) : previous_(t_current_kernel) { t_current_kernel = kernel; }
ScratchKernelScope::~ScratchKernelScope() { t_current_kernel = previous_; }

ScratchFloats::ScratchFloats(size_t n) : size_(n) {
  if (n == 0) return;
  auto& blocks = cache();
  size_t best = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].capacity >= n && (best == blocks.size() || blocks[i].capacity < blocks[best].capacity)) best = i;
  if (best < blocks.size()) {
    data_ = blocks[best].memory;
    capacity_ = blocks[best].capacity;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    data_ = allocate_block(n);
    capacity_ = n;
  }
}

void ScratchFloats::release() {
  if (!data_) return;
  auto& blocks = cache();
  if (capacity_ <= kMaxCachedFloats) {
    if (blocks.size() >= kMaxCachedBlocks) {  // drop the oldest
      free_block(blocks.front().memory);
      blocks.erase(blocks.begin());
    }
    blocks.push_back(Block{data_, capacity_});
  } else {
    free_block(data_);
  }
  data_ = nullptr;
  capacity_ = 0;
}

ScratchFloats::~ScratchFloats() { release(); }

ScratchFloats::ScratchFloats(ScratchFloats&& other) noexcept
    : capacity_(std::exchange(other.capacity_, 0)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ScratchFloats& ScratchFloats::operator=(ScratchFloats&& other) noexcept {
  if (this != &other) {
    release();
    capacity_ = std::exchange(other.capacity_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace mpt
