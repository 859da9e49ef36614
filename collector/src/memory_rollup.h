// The memory summaries of trace_finalize.sql, summary_memory_peak, summary_memory_by_rank and
// summary_allocations, kept up to date as the memory events are written (summary_rollup.h), so
// that the end of the run need not walk the timeline with SQLite's window functions (about a
// microsecond per event and window: 30 to 150 ms of every run's end here) nor group every event.
//
// The first two walk each rank's events in (t_ns, id) order; ids grow as rows are written, so the
// order in which events arrive is that order as long as no event of a rank is older than the one
// before it. The rollup gives up when that fails, when an allocation is relabelled (the category
// and name of an event already counted change), or when a category is one the views do not know.
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
  std::vector<std::string> tables() const override { return {kPeakTable, kByRankTable, kAllocationsTable}; }
  int columns(const std::string& table) const override {
    return table == kPeakTable ? 6 : table == kByRankTable ? 7 : 8;
  }
  void write_rows(const std::string& table, sql::Statement& insert) const override;

  // One row of memory_events, just written (ids grow as rows are written: arrival order breaks
  // ties in t_ns as the views' order by id does).
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

 private:
  static constexpr const char* kPeakTable = "summary_memory_peak";
  static constexpr const char* kByRankTable = "summary_memory_by_rank";
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
    int64_t last_t_ns = INT64_MIN;
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

  void write_peak(sql::Statement& insert) const;
  void write_by_rank(sql::Statement& insert) const;
  void write_allocations(sql::Statement& insert) const;

  std::map<int32_t, Rank> ranks_;
  std::map<std::pair<int32_t, unsigned>, ByRank> by_rank_;  // (rank, category), in GROUP BY order
  std::map<std::tuple<int64_t, unsigned, int64_t>, Allocations> allocations_;  // (name, category, bytes)
};

}  // namespace fpscope
