// libfpscope_torch-<version>.so's memory (observer.cpp): a storage is an allocation from the first operator
// that reads or makes it until its memory is freed. Memory of the CPU allocator has its deleter
// taken over, so the free is reported when PyTorch frees it, on whatever thread; other memory keeps
// its deleter, its storage is held weakly, and its free is reported at the first operator after the
// storage is gone. Internal to libfpscope_torch-<version>.so.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fpscope/inject_api.h"

namespace fpscope::torch_observer {

// One storage followed as an allocation.
struct Allocation {
  uint64_t ident = 0;
  int32_t category = MPT_CAT_ACTIVATION;
  std::string name;
  bool uninitialized = false;  // made by torch.empty and kin, not written by an operator since
  const void* data = nullptr;
  bool held_weakly = false;  // its deleter is not taken over: `storage` tells its end
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
};

// By the DataPtr's context (what its deleter receives). The map outlives every storage: frees can
// come after static destructors ran, so it is never destroyed.
std::mutex& memory_mutex();
std::unordered_map<void*, Allocation>& live();

// Storages held weakly (their contexts), checked for their end before each operator.
extern std::vector<void*> g_held_weakly;
// The injector reuses statistics: unseen writes are reported.
extern std::atomic<bool> g_reports_writes;

// The replacement for a deleter that reports the free and then runs it, or null for memory whose
// deleter is kept; whether a deleter is such a replacement.
c10::DeleterFnPtr replacement_for(c10::DeleterFnPtr deleter);
bool is_replacement(c10::DeleterFnPtr deleter);

// A forked child (a DataLoader worker) inherits the replaced deleters: the mutex they take must not
// be held by a thread that does not exist there (pthread_atfork's handlers).
void lock_memory_for_fork();
void unlock_memory_after_fork();

// Tells the injector that `t`'s memory changed where it did not see it (when it reuses statistics).
void report_written(const at::Tensor& t);
// "f32", "bf16", ...: a dtype as names say it.
const char* dtype_word(c10::ScalarType s);
// "data f32[3000,1,28,28]": a tensor no operator made, by its type and shape.
std::string data_name(const at::Tensor& t);
// A weakly held storage still alive and still on the memory it was first seen on (resize_ and
// set_ give a storage new memory).
bool still_holds(const Allocation& entry, void* context);
// Reports the end of the weakly held storages that are gone (the program's thread only).
void collect_weakly_held();

// A tensor whose operators are not the program's computation on data: a tensor subclass that
// dispatches in Python (torch.compile's FakeTensor, and wrappers such as torchao's float8 tensors,
// whose operators run again on the plain tensors inside them, which are measured), a functional
// wrapper (torch.compile's functionalization) or a meta tensor. Operators on one are not launches,
// and its memory, if it has any, is not the program's to follow.
inline bool without_data_of_its_own(const at::Tensor& t) {
  const c10::DispatchKeySet keys = t.key_set();
  return keys.has(c10::DispatchKey::Python) || keys.has(c10::DispatchKey::Functionalize) || t.is_meta();
}

// The storage's memory, to take its deleter over: torch 2.x guards the mutable accessor (copy-on-write
// storages), torch 1.13 has only the one.
template <typename Storage>
c10::DataPtr& mutable_memory(Storage* storage) {
  if constexpr (requires { storage->_mutable_data_ptr_no_checks(); }) {
    return storage->_mutable_data_ptr_no_checks();
  } else {
    return storage->data_ptr();
  }
}

// The allocation `t`'s storage is, counted from now when it is new (named what `name_of` says);
// null for a tensor without memory of its own to follow.
template <typename NameOf>
Allocation* adopt(const at::Tensor& t, int32_t category, NameOf name_of, bool unknown_writes) {
  if (!t.defined() || !t.has_storage() || without_data_of_its_own(t) || t.layout() != c10::kStrided) return nullptr;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  c10::DataPtr& memory = mutable_memory(storage);
  void* context = memory.get_context();
  const void* data = memory.get();
  if (context == nullptr || data == nullptr) return nullptr;
  {
    std::unique_lock<std::mutex> lock(memory_mutex());
    auto it = live().find(context);
    if (it != live().end()) {
      if (!it->second.held_weakly || still_holds(it->second, context)) return &it->second;
      // A weakly held storage ended and left its context to this one.
      const void* gone = it->second.data;
      live().erase(it);
      lock.unlock();
      fpscope_free_seen(gone);
    }
  }
  const c10::DeleterFnPtr deleter = memory.get_deleter();
  if (is_replacement(deleter)) return nullptr;  // followed, yet not in the map: cannot happen
  const c10::DeleterFnPtr replacement = replacement_for(deleter);
  const bool take_over = replacement != nullptr;
  std::string name = name_of(t);
  const int32_t device = t.is_cuda() ? MPT_DEVICE_CUDA : MPT_DEVICE_CPU;
  const uint64_t ident = fpscope_alloc_seen(data, storage->nbytes(), device, category, name.c_str());
  if (ident == 0) return nullptr;
  Allocation* entry;
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    entry = &live()[context];
    entry->ident = ident;
    entry->category = category;
    entry->name = std::move(name);
    entry->data = data;
    if (!take_over) {
      entry->held_weakly = true;
      entry->storage = t.storage().getWeakStorageImpl();
      g_held_weakly.push_back(context);
    }
  }
  if (take_over && !memory.compare_exchange_deleter(deleter, replacement)) {  // cannot follow its free
    std::lock_guard<std::mutex> lock(memory_mutex());
    live().erase(context);
    fpscope_free_seen(data);
    return nullptr;
  }
  // A tensor no watched operator made may have been filled where the front end could not see.
  if (unknown_writes && g_reports_writes) fpscope_memory_written(data, storage->nbytes());
  return entry;
}

}  // namespace fpscope::torch_observer
