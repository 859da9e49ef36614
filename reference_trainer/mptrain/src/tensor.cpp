// Allocation bookkeeping and the Tensor handle (see tensor.h).
#include "tensor.h"

#include "errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace mptrain {

std::string category_name(int category) {
  switch (category) {
    case MPT_CAT_WEIGHT: return "weight";
    case MPT_CAT_MASTER_WEIGHT: return "master_weight";
    case MPT_CAT_GRADIENT: return "gradient";
    case MPT_CAT_ACTIVATION: return "activation";
    case MPT_CAT_OPTIMIZER_STATE: return "optimizer_state";
    case MPT_CAT_WORKSPACE: return "workspace";
    case MPT_CAT_DATA: return "data";
    default: return "category" + std::to_string(category);
  }
}

void MemoryLedger::on_alloc(int category, std::size_t bytes) {
  auto c = static_cast<std::size_t>(category);
  live_[c] += bytes;
  peak_[c] = std::max(peak_[c], live_[c]);
  live_total_ += bytes;
  peak_total_ = std::max(peak_total_, live_total_);
  ++allocations_;
}

void MemoryLedger::on_free(int category, std::size_t bytes) {
  live_[static_cast<std::size_t>(category)] -= bytes;
  live_total_ -= bytes;
  ++frees_;
}

MemoryLedger& memory_ledger() {
  static MemoryLedger ledger;
  return ledger;
}

Allocation::Allocation(std::size_t bytes, mpt_device device, int category, const std::string& name)
    : bytes_(bytes), device_(device), category_(category) {
  // mpt_alloc(0) may legitimately return NULL; every tensor here holds at least one element.
  data_ = mpt_alloc(std::max<std::size_t>(bytes, 1), device, category, name.c_str(), &id_);
  if (data_ == nullptr) {
    std::string why = mpt_last_error();
    std::string message = fmt::format("cannot allocate {} bytes for '{}' on {}: {}", bytes, name,
                                      device == MPT_DEVICE_CUDA ? "cuda" : "cpu", why);
    if (device == MPT_DEVICE_CUDA) throw DeviceError(message);
    throw KernelError(message);
  }
  memory_ledger().on_alloc(category, bytes);
}

Allocation::~Allocation() {
  mpt_free(data_, device_);
  memory_ledger().on_free(category_, bytes_);
}

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

Tensor Tensor::allocate(std::string name, Shape shape, DType dtype, mpt_device device, int category) {
  if (shape.size() > MPT_MAX_DIMS) throw KernelError("tensor '" + name + "' has too many dimensions");
  Tensor t;
  t.name_ = std::move(name);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.allocation_ = std::make_shared<Allocation>(t.bytes(), device, category, t.name_);
  return t;
}

int64_t Tensor::numel() const {
  return std::accumulate(shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor view = *this;
  view.shape_ = std::move(shape);
  if (view.numel() != numel()) {
    throw KernelError(fmt::format("cannot view '{}' {} as {}", name_, shape_text(shape_), shape_text(view.shape_)));
  }
  return view;
}

mpt_tensor Tensor::abi() const {
  mpt_tensor t{};
  t.data = data();
  t.id = id();
  t.name = name_.c_str();
  for (std::size_t i = 0; i < shape_.size(); ++i) t.shape[i] = shape_[i];
  t.ndim = static_cast<int32_t>(shape_.size());
  t.dtype = dtype_;
  t.device = device_;
  return t;
}

}  // namespace mptrain
