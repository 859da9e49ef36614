// Tensors of the trainer: a small handle (data, allocation id, name, shape, dtype, device) over
// memory from mpt_alloc(), freed by RAII when the last handle to the allocation goes. A
// MemoryLedger keeps the program's own account of live and peak bytes per category, so the
// memory report does not depend on any tool watching the library.
#pragma once

#include "dtype.h"

#include <mpt/abi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mptrain {

inline constexpr int kNumCategories = 7;

std::string category_name(int category);  // "weight", "master_weight", ...

class MemoryLedger {
 public:
  void on_alloc(int category, std::size_t bytes);
  void on_free(int category, std::size_t bytes);

  std::size_t peak(int category) const { return peak_[static_cast<std::size_t>(category)]; }
  std::size_t peak_total() const { return peak_total_; }
  std::size_t live_total() const { return live_total_; }
  uint64_t allocations() const { return allocations_; }
  uint64_t frees() const { return frees_; }

 private:
  std::array<std::size_t, kNumCategories> live_{};
  std::array<std::size_t, kNumCategories> peak_{};
  std::size_t live_total_ = 0;
  std::size_t peak_total_ = 0;
  uint64_t allocations_ = 0;
  uint64_t frees_ = 0;
};

// The process-wide ledger (mpt_alloc is process-wide too).
MemoryLedger& memory_ledger();

// One mpt_alloc() allocation; frees itself.
class Allocation {
 public:
  Allocation(std::size_t bytes, mpt_device device, int category, const std::string& name);
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  void* data() const { return data_; }
  uint64_t id() const { return id_; }
  std::size_t bytes() const { return bytes_; }
  int category() const { return category_; }

 private:
  void* data_ = nullptr;
  uint64_t id_ = 0;
  std::size_t bytes_ = 0;
  mpt_device device_;
  int category_;
};

using Shape = std::vector<int64_t>;

std::string shape_text(const Shape& shape);  // "[32,5,26,26]"

class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled tensor.
  static Tensor allocate(std::string name, Shape shape, DType dtype, mpt_device device, int category);

  bool defined() const { return allocation_ != nullptr; }
  void* data() const { return allocation_ ? allocation_->data() : nullptr; }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data()); }
  uint64_t id() const { return allocation_ ? allocation_->id() : 0; }
  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(std::size_t i) const { return shape_.at(i); }
  int64_t numel() const;
  DType dtype() const { return dtype_; }
  mpt_device device() const { return device_; }
  int category() const { return allocation_ ? allocation_->category() : -1; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  // Same memory, another shape with as many elements (flatten, un-flatten of gradients).
  Tensor reshaped(Shape shape) const;

  // The ABI view; valid while this Tensor lives.
  mpt_tensor abi() const;

  void reset() { allocation_.reset(); }

 private:
  std::shared_ptr<Allocation> allocation_;
  std::string name_;
  Shape shape_;
  DType dtype_ = MPT_DTYPE_F32;
  mpt_device device_ = MPT_DEVICE_CPU;
};

}  // namespace mptrain
