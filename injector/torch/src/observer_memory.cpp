// libfpscope_torch-<version>.so's memory: storages as allocations (observer_memory.h).
#include "observer_memory.h"

namespace fpscope::torch_observer {

std::mutex& memory_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<void*, Allocation>& live() {
  static auto* m = new std::unordered_map<void*, Allocation>;
  return *m;
}

std::vector<void*> g_held_weakly;

namespace {

// The CPU allocator's deleters (the default one and the one in use, often the same), and a
// replacement for each that reports the free and then runs it: the memory is freed even when the
// map has no entry for it.
c10::DeleterFnPtr g_cpu_deleters[2] = {nullptr, nullptr};

template <int Which>
void free_watched(void* context) {
  const void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    auto it = live().find(context);
    if (it != live().end()) {
      data = it->second.data;
      live().erase(it);
    }
  }
  if (data) fpscope_free_seen(data);
  g_cpu_deleters[Which](context);
}

}  // namespace

c10::DeleterFnPtr replacement_for(c10::DeleterFnPtr deleter) {
  static const bool known = [] {
    g_cpu_deleters[0] = c10::GetCPUAllocator()->raw_deleter();
    g_cpu_deleters[1] = c10::GetDefaultCPUAllocator()->raw_deleter();
    return true;
  }();
  (void)known;
  if (deleter == nullptr) return nullptr;
  if (deleter == g_cpu_deleters[0]) return &free_watched<0>;
  if (deleter == g_cpu_deleters[1]) return &free_watched<1>;
  return nullptr;
}

bool is_replacement(c10::DeleterFnPtr deleter) { return deleter == &free_watched<0> || deleter == &free_watched<1>; }

void lock_memory_for_fork() { memory_mutex().lock(); }
void unlock_memory_after_fork() { memory_mutex().unlock(); }

std::atomic<bool> g_reports_writes{false};

void report_written(const at::Tensor& t) {
  if (!g_reports_writes || t.layout() != c10::kStrided || without_data_of_its_own(t) || t.numel() == 0) return;
  fpscope_memory_written(t.data_ptr(), static_cast<uint64_t>(t.numel()) * t.element_size());
}

const char* dtype_word(c10::ScalarType s) {
  switch (s) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::Double: return "f64";
    default: return c10::toString(s);
  }
}

std::string data_name(const at::Tensor& t) {
  std::string name = std::string("data ") + dtype_word(t.scalar_type()) + "[";
  for (int64_t i = 0; i < t.dim(); ++i) name += (i ? "," : "") + std::to_string(t.size(i));
  return name + "]";
}

bool still_holds(const Allocation& entry, void* context) {
  c10::intrusive_ptr<c10::StorageImpl> storage = entry.storage.lock();
  return storage && storage->data_ptr().get_context() == context;
}

void collect_weakly_held() {
  if (g_held_weakly.empty()) return;
  std::vector<const void*> freed;
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    size_t kept = 0;
    for (void* context : g_held_weakly) {
      auto it = live().find(context);
      if (it == live().end() || !it->second.held_weakly) continue;  // gone, or another storage's now
      if (!still_holds(it->second, context)) {
        freed.push_back(it->second.data);
        live().erase(it);
      } else {
        g_held_weakly[kept++] = context;
      }
    }
    g_held_weakly.resize(kept);
  }
  for (const void* data : freed) fpscope_free_seen(data);
}

}  // namespace fpscope::torch_observer
