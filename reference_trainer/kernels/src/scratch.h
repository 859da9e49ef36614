// Reusable per-thread scratch memory for the kernels. Their temporaries (im2col matrices, fp32
// copies of 16-bit tensors) are megabytes: fresh allocations of that size are mapped, faulted in
// page by page and unmapped again on every launch, which cost more than the arithmetic. Blocks
// released here are kept for the next launch on the same thread. Every block is allocated with
// mpt_alloc (category workspace, "<kernel>.scratch"), so tools account for it as they do for
// tensors.
#ifndef MPT_KERNELS_SCRATCH_H
#define MPT_KERNELS_SCRATCH_H

#include <cstddef>

namespace mpt {

// While one lives, scratch blocks allocated on this thread are named after `kernel` (mpt_launch
// opens one around each kernel).
class ScratchKernelScope {
 public:
  explicit ScratchKernelScope(const char* kernel);
  ~ScratchKernelScope();
  ScratchKernelScope(const ScratchKernelScope&) = delete;
  ScratchKernelScope& operator=(const ScratchKernelScope&) = delete;

 private:
  const char* previous_;
};

// n floats of scratch (contents unspecified), returned to the thread's cache when destroyed.
class ScratchFloats {
 public:
  explicit ScratchFloats(size_t n = 0);
  ~ScratchFloats();
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;
  ScratchFloats(ScratchFloats&& other) noexcept;
  ScratchFloats& operator=(ScratchFloats&& other) noexcept;

  float* data() { return data_; }
  const float* data() const { return data_; }
  float& operator[](size_t i) { return data_[i]; }
  size_t size() const { return size_; }

 private:
  void release();
  size_t capacity_ = 0;
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mpt

#endif
