// The per-thread block cache behind ScratchFloats (see scratch.h): a handful of blocks per
// thread, best fit first; very large blocks are not kept.
#include "scratch.h"

#include <utility>
#include <vector>

namespace mpt {
namespace {

struct Block {
  std::unique_ptr<float[]> memory;
  size_t capacity;
};

constexpr size_t kMaxCachedBlocks = 8;
constexpr size_t kMaxCachedFloats = size_t{1} << 28;  // 1 GiB: bigger blocks go back to the system

std::vector<Block>& cache() {
  thread_local std::vector<Block> blocks;
  return blocks;
}

}  // namespace

ScratchFloats::ScratchFloats(size_t n) : size_(n) {
  if (n == 0) return;
  auto& blocks = cache();
  size_t best = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].capacity >= n && (best == blocks.size() || blocks[i].capacity < blocks[best].capacity)) best = i;
  if (best < blocks.size()) {
    block_ = std::move(blocks[best].memory);
    capacity_ = blocks[best].capacity;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    block_.reset(new float[n]);
    capacity_ = n;
  }
  data_ = block_.get();
}

void ScratchFloats::release() {
  if (!block_) return;
  auto& blocks = cache();
  if (capacity_ <= kMaxCachedFloats) {
    if (blocks.size() >= kMaxCachedBlocks) blocks.erase(blocks.begin());  // drop the oldest
    blocks.push_back(Block{std::move(block_), capacity_});
  }
  block_.reset();
  data_ = nullptr;
}

ScratchFloats::~ScratchFloats() { release(); }

ScratchFloats::ScratchFloats(ScratchFloats&& other) noexcept
    : block_(std::move(other.block_)), capacity_(other.capacity_), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = other.capacity_ = 0;
}

ScratchFloats& ScratchFloats::operator=(ScratchFloats&& other) noexcept {
  if (this != &other) {
    release();
    block_ = std::move(other.block_);
    capacity_ = other.capacity_;
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = other.capacity_ = 0;
  }
  return *this;
}

}  // namespace mpt
