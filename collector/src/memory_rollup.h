// The two memory summaries of trace_finalize.sql, summary_memory_peak and summary_memory_by_rank,
// kept up to date while the memory events are written, so that the end of the run need not walk
// the timeline with SQLite's window functions (about a microsecond per event and window: 30 to
// 150 ms of every run's end here, while the user waits).
//
// The SQL statements stay the definition: a rollup writes the rows, in the order, that its
// statement writes, and only while that is certain. Both statements walk each rank's events in
// (t_ns, id) order; ids grow as rows are written, so the order in which events arrive is that
// order as long as no event of a rank is older than the one before it. The rollup gives up (and
// the statements run) when that fails, when an allocation is relabelled (the category of an event
// already counted changes), or when a category is one the views do not know.
// RealRun.SummariesEqualOneConnectionRunningTheScript holds the tables against the statements.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/contract/memory_categories.h"
#include "fpscope/sqlite.h"

namespace fpscope {

class MemoryRollup {
 public:
  static constexpr const char* kPeakTable = "summary_memory_peak";
  static constexpr const char* kByRankTable = "summary_memory_by_rank";

  // One row of memory_events, just written (its id is the row's).
  void add(int32_t rank, int64_t id, int64_t t_ns, std::optional<int64_t> step, unsigned category, bool alloc,
           int64_t bytes);
  // An event already counted changed: the statements must run.
  void give_up(const char* why) {
    if (usable_) why_not_ = why;
    usable_ = false;
  }
  bool usable() const { return usable_; }
  // Why the rollup gave up ("" while it is usable).
  const std::string& why_not() const { return why_not_; }

  // Whether `table` is one of the two summaries made here.
  static bool makes(const std::string& table) { return table == kPeakTable || table == kByRankTable; }
  // Creates the tables as their statements would and writes the rolled-up rows into them. The
  // columns are declared as SQLite declares them for the statement: it is run on an empty trace in
  // memory first (run on the trace, it would walk the timeline even with LIMIT 0).
  void write(sql::Database& db, const std::vector<sql::CreateTableAs>& tables) const;

 private:
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

  void write_peak(sql::Statement& insert) const;
  void write_by_rank(sql::Statement& insert) const;

  bool usable_ = true;
  std::string why_not_;
  std::map<int32_t, Rank> ranks_;
  std::map<std::pair<int32_t, unsigned>, ByRank> by_rank_;  // (rank, category), in GROUP BY order
};

}  // namespace fpscope
