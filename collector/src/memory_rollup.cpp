// The memory summaries rolled up as events are written (memory_rollup.h says when they are used).
// Each quantity below is the one trace_finalize.sql and the views v_memory_timeline and
// v_memory_peak name, computed in the same event order.
#include "memory_rollup.h"

namespace fpscope {

void MemoryRollup::add(int32_t rank, int64_t t_ns, std::optional<int64_t> step, unsigned category, bool alloc,
                       int64_t bytes) {
  if (!usable()) return;
  if (category >= kCategories) return give_up("a memory category the views do not know");
  Rank& r = ranks_[rank];
  if (t_ns < r.last_t_ns) return give_up("a memory event older than the one before it in its rank");
  r.last_t_ns = t_ns;
  const int64_t delta = alloc ? bytes : -bytes;
  r.live += delta;
  r.category_live[category] += delta;
  // v_memory_peak_moment: the largest live bytes, the first event after which they were reached.
  if (!r.peak || r.live > r.peak->live) r.peak = Peak{r.live, t_ns, step, r.category_live};

  auto [it, first] = by_rank_.try_emplace({rank, category});
  ByRank& b = it->second;
  if (first || r.category_live[category] > b.max_live) b.max_live = r.category_live[category];
  if (first || r.live > b.max_total_live) b.max_total_live = r.live;
  if (alloc) {
    b.allocated += bytes;
    ++b.allocations;
  }
  b.live_at_end += delta;
}

void MemoryRollup::write_rows(const std::string& table, sql::Statement& insert) const {
  if (table == kPeakTable) write_peak(insert);
  if (table == kByRankTable) write_by_rank(insert);
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

}  // namespace fpscope
