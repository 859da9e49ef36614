// The memory summaries of trace_finalize.sql, summary_memory_peak, summary_memory_by_rank,
// summary_memory and summary_allocations, made from the memory events the writer keeps as it writes them
// (summary_rollup.h), so that the end of the run need not walk the timeline with SQLite's window
// functions (about a microsecond per event and window: 30 to 150 ms of a run's end here) nor group
// every event again.
//
// The events are kept in memory (72 bytes each, 72 MiB at the most) with what later records change
// of them (a relabelled allocation's category and name), and walked once at the end in the
// timeline's order, (rank, t_ns, id), sorted if they did not arrive in it. The rollup gives up on a
// category the views do not know, and beyond kMaxEvents events (its memory would grow without
// bound).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fpscope/contract/memory_categories.h"
#include "summary_rollup.h"

namespace fpscope {

class MemoryRollup : public SummaryRollup {
 public:
  std::vector<std::string> tables() const override { return {kPeakTable, kByRankTable, kMemoryTable, kAllocationsTable}; }
  int columns(const std::string& table) const override {
    return table == kPeakTable || table == kMemoryTable ? 6 : table == kByRankTable ? 7 : 8;
  }
  void write_rows(const std::string& table, sql::Statement& insert) const override;

  // One row of memory_events, just written (ids grow as rows are written: events_ stays in id
  // order, which relabel() relies on).
  struct Event {
    int64_t id;
    int32_t rank;
    int64_t t_ns;
    std::optional<int64_t> step;
    unsigned category;
    bool alloc;
    int64_t bytes;
    int64_t alloc_id;
    int64_t name_id;
  };
  void add(const Event& e);
  // The alloc event with row id `id` now has `category` and `name_id` (memory_events is updated
  // alike; its free is written with them).
  void relabel(int64_t id, unsigned category, int64_t name_id);

  static constexpr size_t kMaxEvents = size_t{1} << 20;

  // The moment of summary_memory_peak (v_memory_peak_moment): the largest live bytes of any rank
  // after one of its events, the first time, the lowest rank among equals. None without events.
  struct PeakMoment {
    int64_t live = 0;
    int64_t t_ns = 0;
    std::optional<int64_t> step;
    int32_t rank = 0;
  };
  std::optional<PeakMoment> peak_moment() const;
  // Each rank's largest live bytes after one of its events (max of summary_memory_by_rank's
  // max_total_live over the rank's rows); ranks without events have none.
  std::map<int32_t, int64_t> peak_by_rank() const;

 private:
  static constexpr const char* kPeakTable = "summary_memory_peak";
  static constexpr const char* kByRankTable = "summary_memory_by_rank";
  static constexpr const char* kMemoryTable = "summary_memory";
  static constexpr const char* kAllocationsTable = "summary_allocations";
  static constexpr int kCategories = contract::kMemoryCategoryCount;

  // One (rank, category) row of summary_memory_by_rank.
  struct ByRank {
    // Both maxima are set by the row's first event.
    int64_t max_live = 0;        // the category's largest live bytes, after one of its events
    int64_t allocated = 0;
    int64_t allocations = 0;
    int64_t live_at_end = 0;
    int64_t max_total_live = 0;  // the rank's largest live bytes, after one of the category's events
  };
  // The first event after which a rank's live bytes were largest, and each category's then.
  struct Peak {
    int64_t live = 0;
    int64_t t_ns = 0;
    std::optional<int64_t> step;
    std::array<int64_t, kCategories> category_live{};
  };
  struct Rank {
    int64_t live = 0;
    std::array<int64_t, kCategories> category_live{};
    std::optional<Peak> peak;
  };

  // One row of summary_allocations: allocations of one (name, category, size), and the first.
  struct Allocations {
    int64_t count = 0;
    int64_t first_event_id = 0, first_alloc_id = 0, first_alloc_ns = 0;
    std::optional<int64_t> first_step;
  };

  // The summaries' rows from the events, once, before the first table is written.
  void fold_events() const;
  void fold(const Event& e) const;
  const Peak* peak_of_ranks(int32_t* peak_rank) const;  // the trace's, and its rank
  void write_peak(sql::Statement& insert) const;
  void write_by_rank(sql::Statement& insert) const;
  void write_memory(sql::Statement& insert) const;
  void write_allocations(sql::Statement& insert) const;

  std::vector<Event> events_;  // in id order, as written
  // What fold_events() made of them, again after an event came or changed (a trace completed a
  // second time, when records arrived after the first).
  mutable bool folded_ = false;
  mutable std::map<int32_t, Rank> ranks_;
  mutable std::map<std::pair<int32_t, unsigned>, ByRank> by_rank_;  // (rank, category), in GROUP BY order
  mutable std::map<std::tuple<int64_t, unsigned, int64_t>, Allocations> allocations_;  // (name, category, bytes)
};

}  // namespace fpscope
