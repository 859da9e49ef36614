// The memory summaries rolled up as events are written (memory_rollup.h says when they are used).
// Each quantity below is the one trace_finalize.sql and the views v_memory_timeline and
// v_memory_peak name, computed in the same event order.
#include "memory_rollup.h"

namespace fpscope {

void MemoryRollup::add(const Event& e) {
  if (!usable()) return;
  if (e.category >= kCategories) return give_up("a memory category the views do not know");
  Rank& r = ranks_[e.rank];
  if (e.t_ns < r.last_t_ns) return give_up("a memory event older than the one before it in its rank");
  r.last_t_ns = e.t_ns;
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
  if (a.count++ == 0) a = Allocations{1, e.id, e.alloc_id, e.t_ns, e.step};
}

void MemoryRollup::write_rows(const std::string& table, sql::Statement& insert) const {
  if (table == kPeakTable) write_peak(insert);
  if (table == kByRankTable) write_by_rank(insert);
  if (table == kAllocationsTable) write_allocations(insert);
}

// summary_memory_peak: one row per category in the order of `categories`; of several ranks, the
// one whose peak is largest, the lowest among equals (std::map walks the ranks in order).
void MemoryRollup::write_peak(sql::Statement& insert) const {
  const Peak* peak = nullptr;
  int32_t peak_rank = 0;
  for (const auto& [rank, r] : ranks_) {
    if (r.peak && (!peak || r.peak->live > peak->live)) {
      peak = &*r.peak;
      peak_rank = rank;
    }
  }
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
