// The memory summaries made from the events kept as they were written (memory_rollup.h). Each
// quantity below is the one trace_finalize.sql and the views v_memory_timeline and v_memory_peak
// name, computed in the same event order.
#include "memory_rollup.h"

#include <algorithm>
#include <tuple>

namespace fpscope {

void MemoryRollup::add(const Event& e) {
  if (!usable()) return;
  if (e.category >= kCategories) return give_up("a memory category the views do not know");
  if (events_.size() == kMaxEvents) {
    events_ = {};
    return give_up("more memory events than the rollup keeps");
  }
  events_.push_back(e);
  folded_ = false;
}

void MemoryRollup::relabel(int64_t id, unsigned category, int64_t name_id) {
  if (!usable()) return;
  if (category >= kCategories) return give_up("a memory category the views do not know");
  const auto it = std::lower_bound(events_.begin(), events_.end(), id,
                                   [](const Event& e, int64_t row) { return e.id < row; });
  if (it == events_.end() || it->id != id) return give_up("a relabelled allocation whose event the rollup lacks");
  it->category = category;
  it->name_id = name_id;
  folded_ = false;
}

void MemoryRollup::fold_events() const {
  if (folded_) return;
  folded_ = true;
  ranks_.clear();
  by_rank_.clear();
  allocations_.clear();
  const auto timeline_order = [](const Event& a, const Event& b) {
    return std::tie(a.rank, a.t_ns, a.id) < std::tie(b.rank, b.t_ns, b.id);
  };
  if (std::is_sorted(events_.begin(), events_.end(), timeline_order)) {
    for (const Event& e : events_) fold(e);
    return;
  }
  std::vector<const Event*> order(events_.size());
  for (size_t i = 0; i < events_.size(); ++i) order[i] = &events_[i];
  std::sort(order.begin(), order.end(), [&](const Event* a, const Event* b) { return timeline_order(*a, *b); });
  for (const Event* e : order) fold(*e);
}

// One event, in the timeline's order.
void MemoryRollup::fold(const Event& e) const {
  Rank& r = ranks_[e.rank];
  const int64_t delta = e.alloc ? e.bytes : -e.bytes;
  r.live += delta;
  r.category_live[e.category] += delta;
  // v_memory_peak_moment: the largest live bytes, the first event after which they were reached.
  if (!r.peak || r.live > r.peak->live) r.peak = Peak{r.live, e.t_ns, e.step, r.category_live};

  auto [it, first] = by_rank_.try_emplace({e.rank, e.category});
  ByRank& b = it->second;
  if (first || r.category_live[e.category] > b.max_live) b.max_live = r.category_live[e.category];
  if (first || r.live > b.max_total_live) b.max_total_live = r.live;
  b.live_at_end += delta;
  if (!e.alloc) return;
  b.allocated += e.bytes;
  ++b.allocations;
  // summary_allocations: the bare columns are the group's first event's (the smallest id).
  Allocations& a = allocations_[{e.name_id, e.category, e.bytes}];
  if (a.count == 0 || e.id < a.first_event_id) a = Allocations{a.count, e.id, e.alloc_id, e.t_ns, e.step};
  ++a.count;
}

void MemoryRollup::write_rows(const std::string& table, sql::Statement& insert) const {
  fold_events();
  if (table == kPeakTable) write_peak(insert);
  if (table == kByRankTable) write_by_rank(insert);
  if (table == kMemoryTable) write_memory(insert);
  if (table == kAllocationsTable) write_allocations(insert);
}

// summary_memory_peak: one row per category in the order of `categories`; of several ranks, the
// one whose peak is largest, the lowest among equals (std::map walks the ranks in order).
const MemoryRollup::Peak* MemoryRollup::peak_of_ranks(int32_t* peak_rank) const {
  fold_events();
  const Peak* peak = nullptr;
  for (const auto& [rank, r] : ranks_) {
    if (r.peak && (!peak || r.peak->live > peak->live)) {
      peak = &*r.peak;
      *peak_rank = rank;
    }
  }
  return peak;
}

std::optional<MemoryRollup::PeakMoment> MemoryRollup::peak_moment() const {
  int32_t rank = 0;
  const Peak* peak = peak_of_ranks(&rank);
  if (!peak) return std::nullopt;
  return PeakMoment{peak->live, peak->t_ns, peak->step, rank};
}

std::map<int32_t, int64_t> MemoryRollup::peak_by_rank() const {
  fold_events();
  std::map<int32_t, int64_t> peaks;
  for (const auto& [key, b] : by_rank_) {
    const auto [it, added] = peaks.try_emplace(key.first, b.max_total_live);
    if (!added) it->second = std::max(it->second, b.max_total_live);
  }
  return peaks;
}

void MemoryRollup::write_peak(sql::Statement& insert) const {
  int32_t peak_rank = 0;
  const Peak* peak = peak_of_ranks(&peak_rank);
  for (int c = 0; c < kCategories; ++c) {
    insert.bind(1, contract::kMemoryCategoryNames[static_cast<size_t>(c)]);
    insert.bind(2, peak ? peak->category_live[static_cast<size_t>(c)] : int64_t{0});
    if (peak) {
      insert.bind(3, peak->t_ns).bind(4, peak->live).bind(5, peak_rank).bind(6, peak->step);
    } else {
      insert.bind_null(3).bind_null(4).bind_null(5).bind_null(6);
    }
    insert.run();
  }
}

// summary_memory: one row per category of `categories`, in its order: the category's live bytes at
// the trace's peak, and its summary_memory_by_rank rows over the ranks (0 without any).
void MemoryRollup::write_memory(sql::Statement& insert) const {
  int32_t peak_rank = 0;
  const Peak* peak = peak_of_ranks(&peak_rank);
  for (int c = 0; c < kCategories; ++c) {
    const auto category = static_cast<unsigned>(c);
    std::optional<int64_t> max_live;  // may be negative: a free seen before its allocation
    ByRank all;
    for (const auto& [key, b] : by_rank_) {
      if (key.second != category) continue;
      if (!max_live || b.max_live > *max_live) max_live = b.max_live;
      all.allocated += b.allocated;
      all.allocations += b.allocations;
      all.live_at_end += b.live_at_end;
    }
    insert.run_with(c, peak ? peak->category_live[category] : int64_t{0}, max_live.value_or(0), all.allocated,
                    all.allocations, all.live_at_end);
  }
}

void MemoryRollup::write_by_rank(sql::Statement& insert) const {
  for (const auto& [key, b] : by_rank_) {
    insert.run_with(key.first, key.second, b.max_live, b.allocated, b.allocations, b.live_at_end, b.max_total_live);
  }
}

void MemoryRollup::write_allocations(sql::Statement& insert) const {
  for (const auto& [key, a] : allocations_) {
    const auto& [name_id, category, bytes] = key;
    insert.run_with(name_id, category, bytes, a.count, a.first_event_id, a.first_alloc_id, a.first_alloc_ns,
                    a.first_step);
  }
}

}  // namespace fpscope
