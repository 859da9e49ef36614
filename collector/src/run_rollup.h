// The whole-run summaries of trace_finalize.sql, summary_steps, summary_ranks and summary_counts,
// kept up to date as the kernels, ranges, memory events, tensors and non-finite rows are written
// (summary_rollup.h), so that the end of the run need not read those tables again (the three took
// 16 ms of a 6000-image run's end here, and about a millisecond of a run that launches nothing).
//
// They read summaries other rollups keep: summary_steps adds up summary_layer_steps (the tensor
// rollup); summary_ranks and summary_counts take the memory peaks from summary_memory_by_rank and
// summary_memory_peak (the memory rollup). Each is usable only while the one it reads is. Both give
// up when ranges are taken out of the trace again (the ranges of a process left out as idle): a
// minimum or a maximum cannot be taken back.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fpscope/common/sqlite.h"
#include "memory_rollup.h"
#include "summary_rollup.h"
#include "tensor_rollup.h"

namespace fpscope {

// An nvtx_ranges row as the two rollups need it.
struct RangeRow {
  int32_t rank = 0;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;  // NULL: never closed
  bool step_kind = false;         // kind 'step'
  bool phase_kind = false;        // kind 'phase'
  int64_t name_id = 0;
  std::optional<int64_t> step;
};

// summary_steps: per step, the step ranges' span and its outputs' non-finite values (those of
// summary_layer_steps), in step order.
class StepsRollup : public SummaryRollup {
 public:
  explicit StepsRollup(const TensorRollup& tensors) : tensors_(&tensors) {}
  std::vector<std::string> tables() const override { return {"summary_steps"}; }
  int columns(const std::string&) const override { return 6; }
  void write_rows(const std::string& table, sql::Statement& insert) const override;
  bool usable() const override { return SummaryRollup::usable() && tensors_->usable(); }
  std::string why_not() const override;

  void add_range(const RangeRow& r);

 private:
  const TensorRollup* tensors_;
  struct Span {
    std::optional<int64_t> start_ns, end_ns;
  };
  std::map<int64_t, Span> steps_;  // step ranges with a step number, by step
};

// summary_ranks (a row per rank: its processes, kernels, steps, first NaN/Inf made from finite
// values, memory peak and loss-scale events) and summary_counts (whole-trace counts, the time span,
// the training steps and the memory peak, one row per key in the statement's order). What only the
// small tables hold is read from them at the end: which strings name the training phases, the
// processes, the loss-scale events, and the non-finite outputs made from finite inputs (with their
// launches: the writer marks some of them again at the end, the collectives that only passed a
// NaN on).
class RunRollup : public SummaryRollup {
 public:
  RunRollup(const sql::Database& db, const MemoryRollup& memory) : db_(&db), memory_(&memory) {}
  std::vector<std::string> tables() const override { return {kRanksTable, kCountsTable}; }
  int columns(const std::string& table) const override { return table == kRanksTable ? 16 : 2; }
  void write_rows(const std::string& table, sql::Statement& insert) const override;
  bool usable() const override { return SummaryRollup::usable() && memory_->usable(); }
  std::string why_not() const override;

  void add_kernel(int32_t rank, int64_t start_ns, int64_t end_ns, std::optional<int64_t> step, bool sampled);
  void add_range(const RangeRow& r);
  void add_memory_event(int64_t t_ns);
  void add_tensor();
  void add_nonfinite(int32_t rank, int64_t allowed);  // as nonfinite.allowed holds it

 private:
  static constexpr const char* kRanksTable = "summary_ranks";
  static constexpr const char* kCountsTable = "summary_counts";

  // v_step_ranges: each step range with a step number, and whether it is its rank's tail.
  struct StepRange {
    int32_t rank;
    int64_t step;
    bool tail;
  };
  std::vector<StepRange> step_ranges() const;
  std::set<int32_t> ranks() const;
  void write_ranks(sql::Statement& insert) const;
  void write_counts(sql::Statement& insert) const;

  const sql::Database* db_;
  const MemoryRollup* memory_;

  // A rank's kernels: summary_ranks' `work`.
  struct Work {
    int64_t kernels = 0;
    std::set<int64_t> steps;  // those with a step
    std::optional<int64_t> start_ns, end_ns;
  };
  std::map<int32_t, Work> work_;
  int64_t kernels_ = 0, sampled_ = 0;
  std::optional<int64_t> longest_, first_kernel_ns_, last_kernel_ns_;
  int64_t tensors_ = 0, allowed_nonfinite_ = 0;
  std::map<int32_t, int64_t> nonfinite_;  // per rank, those no rule allows
  int64_t memory_events_ = 0;
  std::optional<int64_t> first_memory_ns_, last_memory_ns_;
  std::optional<int64_t> first_range_ns_, last_range_ns_;  // every range; the last of their ends
  // The step ranges with a step number, and the latest start of each rank's ranges of each phase
  // name (the training phases among them are known by their text at the end).
  std::vector<std::tuple<int32_t, int64_t, int64_t>> step_ranges_;  // rank, step, start_ns
  std::map<std::pair<int32_t, int64_t>, int64_t> phase_starts_;     // (rank, name) -> latest start
};

}  // namespace fpscope
