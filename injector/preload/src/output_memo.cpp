// OutputMemo (see output_memo.h): allocations by base address, each with a write generation
// and the remembered statistics of tensors inside it.
#include "output_memo.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace fpscope::inject {

namespace {

uintptr_t begin_of(const OutputMemo::Key& key) { return reinterpret_cast<uintptr_t>(key.data); }
uintptr_t end_of(const OutputMemo::Key& key) { return begin_of(key) + key.count * element_bytes(key.type); }

}  // namespace

static_assert(std::is_standard_layout_v<TensorStats> && std::is_trivially_copyable_v<TensorStats> &&
                  offsetof(TensorStats, hist) + sizeof(TensorStats::hist) == sizeof(TensorStats),
              "an entry keeps a TensorStats as the bytes before its histogram, then the histogram");

void OutputMemo::Entry::store(const TensorStats& stats) {
  std::memcpy(head, &stats, kStatsHeadBytes);
  const auto [first, end] = populated_bins(stats.hist);
  hist_first = static_cast<uint16_t>(first);
  hist_count = static_cast<uint16_t>(end - first);
  if (hist_count <= kInlineBins) {
    wide.clear();
    std::copy_n(stats.hist.begin() + first, hist_count, bins.begin());
  } else {
    wide.assign(stats.hist.begin() + first, stats.hist.begin() + end);
  }
}

void OutputMemo::Entry::load(TensorStats* out) const {
  std::memcpy(static_cast<void*>(out), head, kStatsHeadBytes);
  out->hist.fill(0);
  const uint64_t* span = hist_count <= kInlineBins ? bins.data() : wide.data();
  std::copy_n(span, hist_count, out->hist.begin() + hist_first);
}

const OutputMemo::Region* OutputMemo::holding(uintptr_t begin, uintptr_t end) const {
  auto it = regions_.upper_bound(begin);
  if (it == regions_.begin()) return nullptr;
  --it;
  return end <= it->first + it->second.bytes ? &it->second : nullptr;
}

OutputMemo::Region* OutputMemo::holding(uintptr_t begin, uintptr_t end) {
  return const_cast<Region*>(static_cast<const OutputMemo*>(this)->holding(begin, end));
}

void OutputMemo::allocated(const void* base, uint64_t bytes, bool remembered) {
  std::lock_guard lock(mutex_);
  // An allocation the memo never saw freed (the program freed it before tracing began) may
  // overlap the new one: forget it.
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  auto it = regions_.upper_bound(b);
  if (it != regions_.begin() && std::prev(it)->first + std::prev(it)->second.bytes > b) --it;
  while (it != regions_.end() && it->first < b + bytes) it = regions_.erase(it);
  if (remembered) regions_.insert_or_assign(b, Region{bytes, next_generation_++, {}});
}

void OutputMemo::freed(const void* base) {
  std::lock_guard lock(mutex_);
  regions_.erase(reinterpret_cast<uintptr_t>(base));
}

void OutputMemo::written(const void* data, uint64_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + (bytes == 0 ? 1 : bytes);
  std::lock_guard lock(mutex_);
  // Every allocation the write touches, from the one holding its first byte onwards.
  auto it = regions_.upper_bound(begin);
  if (it != regions_.begin() && std::prev(it)->first + std::prev(it)->second.bytes > begin) --it;
  for (; it != regions_.end() && it->first < end; ++it) {
    it->second.generation = next_generation_++;
    it->second.entries.clear();
  }
}

void OutputMemo::written_anywhere() {
  std::lock_guard lock(mutex_);
  for (auto& [base, r] : regions_) {
    r.generation = next_generation_++;
    r.entries.clear();
  }
}

uint64_t OutputMemo::generation(const Key& key) const {
  std::lock_guard lock(mutex_);
  const Region* r = holding(begin_of(key), end_of(key));
  return r ? r->generation : 0;
}

void OutputMemo::remember(const Key& key, StatsLevel level, uint64_t generation, const TensorStats& stats) {
  if (generation == 0) return;
  std::lock_guard lock(mutex_);
  Region* r = holding(begin_of(key), end_of(key));
  if (r == nullptr || r->generation != generation) return;
  Entry* e = nullptr;
  for (Entry& known : r->entries) {
    if (known.key == key) {
      e = &known;
      break;
    }
  }
  if (e == nullptr) {
    e = &r->entries.emplace_back();
    e->key = key;
  }
  e->level = level;
  e->intended = 0;
  e->store(stats);
}

void OutputMemo::intended(const Key& key, StatsLevel level, uint8_t kinds) {
  std::lock_guard lock(mutex_);
  Region* r = holding(begin_of(key), end_of(key));
  if (r == nullptr) return;
  for (Entry& e : r->entries)
    if (e.key == key && e.level == level) e.intended = kinds;
}

bool OutputMemo::recall(const Key& key, StatsLevel level, TensorStats* out, uint8_t* intended) const {
  std::lock_guard lock(mutex_);
  const Region* r = holding(begin_of(key), end_of(key));
  if (r == nullptr) return false;
  for (const Entry& e : r->entries) {
    if (e.key == key && e.level == level) {
      e.load(out);
      if (intended) *intended = e.intended;
      ++hits_;
      return true;
    }
  }
  return false;
}

uint64_t OutputMemo::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

size_t OutputMemo::entries() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [base, r] : regions_) n += r.entries.size();
  return n;
}

}  // namespace fpscope::inject
