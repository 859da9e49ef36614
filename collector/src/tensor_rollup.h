// The two tensor summaries of trace_finalize.sql, summary_ranges and summary_layer_steps, kept up
// to date as the kernels and tensors rows are written (summary_rollup.h), so that the end of the
// run need not group every tensor row again (about 2 us a row here: 50 ms for a 6000-image run of
// mptrain's CNN with full statistics, 300 ms for 30000 images).
//
// Every quantity is a count, a sum, a minimum or a maximum of the row's columns, grouped by its
// kernel's name, layer, phase and step, so the rows can be taken as they are written, provided
// their kernel is known. Format counts that reach a row after it was written (the collector wrote
// the tensor before its producer had sent them) are added then. The rollup gives up when a
// tensor's kernel, or a late format count's row, is not among the recent ones it holds, or when a
// row would get format counts twice. A tensor's NaN/Inf count as intended (apart from the others)
// once its Nonfinite record says an allow rule covers them; that record may reach a row after it
// was written too, and moves the row's counts from one column to the other.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fpscope/contract/wire.h"
#include "summary_rollup.h"

namespace fpscope {

class TensorRollup : public SummaryRollup {
 public:
  std::vector<std::string> tables() const override { return {kRangesTable, kLayerStepsTable}; }
  int columns(const std::string& table) const override { return table == kRangesTable ? 20 + kFormatColumns : 13; }
  void write_rows(const std::string& table, sql::Statement& insert) const override;

  // A kernels row, just written (NULL columns as nullopt).
  void add_kernel(int64_t id, int64_t name_id, std::optional<int64_t> layer_id, std::optional<int64_t> phase_id,
                  std::optional<int64_t> step);
  // A tensors row of kernel `kernel_id`, just written from `stats` and, when they were measured,
  // `formats` (wire::kFormatCount of them; nullptr: its format columns are NULL). `intended`: its
  // Nonfinite record, already at hand, says an allow rule covers its NaN/Inf.
  void add_tensor(int64_t row_id, int64_t kernel_id, const wire::TensorStatsRecord& stats,
                  const wire::FormatCounts* formats, bool intended = false);
  // Row `row_id`, written before its Nonfinite record, holds intended NaN/Inf only.
  void add_late_intended(int64_t row_id);
  // Format counts written into row `row_id` after the row itself (its format columns were NULL).
  void add_late_formats(int64_t row_id, const wire::FormatCounts* formats);

  // summary_layer_steps' non-finite columns added up over its rows of each step (those with one).
  struct StepTotals {
    int64_t nan = 0, inf = 0, intended = 0;
  };
  std::map<int64_t, StepTotals> step_totals() const;

 private:
  static constexpr const char* kRangesTable = "summary_ranges";
  static constexpr const char* kLayerStepsTable = "summary_layer_steps";
  static constexpr int kFormatColumns = wire::kFormatCount * 4;  // overflow, underflow, subnormal, near_max

  // sum() of a column that may be NULL: NULL when every value was.
  struct Sum {
    int64_t value = 0;
    bool any = false;
    void add(int64_t v) {
      value += v;
      any = true;
    }
  };
  using Extreme = std::optional<double>;  // max() or min() of a REAL column: NULL when every value was

  struct Kernel {
    int64_t id = -1;  // -1: the slot is empty
    int64_t name_id = 0;
    std::optional<int64_t> layer_id, phase_id, step;
  };
  // summary_ranges: GROUP BY kernel name, layer, phase, role ('in' before 'out'), dtype, side.
  using RangeKey = std::tuple<int64_t, std::optional<int64_t>, std::optional<int64_t>, int, int64_t, bool>;
  // Non-finite values of one kind or another: those no rule covers, or the intended ones.
  struct Nonfinite {
    int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  };
  struct Range {
    int64_t tensors = 0, elements = 0, first_kernel_id = INT64_MAX;
    Nonfinite unintended, intended;
    int64_t zero = 0, subnormal = 0;
    Extreme absmax, min_nonzero;
    Sum formats_measured_elements;
    std::array<Sum, kFormatColumns> formats;
  };
  // summary_layer_steps: outputs only, GROUP BY step, layer, phase, side.
  using LayerStepKey = std::tuple<std::optional<int64_t>, std::optional<int64_t>, std::optional<int64_t>, bool>;
  struct LayerStep {
    int64_t tensors = 0, elements = 0, nan = 0, inf = 0, intended = 0;
    Extreme absmax, min_nonzero;
    Sum f16_overflow, f16_underflow;
  };

  // Recent launches by id, direct-mapped: a tensor's launch comes just before it.
  static constexpr size_t kKernelSlots = 1 << 14;
  static size_t slot_of(int64_t kernel_id);
  // Recent tensor rows by id, direct-mapped, for their late format counts and intended values:
  // with the groups the row went to (a map's elements stay where they are), so that neither its
  // own later columns nor late ones look a group up again.
  struct Row {
    int64_t id = -1;  // -1: the slot is empty
    bool out = false;
    bool has_formats = false;
    bool intended = false;
    int64_t count = 0;
    Nonfinite values;
    Range* range = nullptr;
    LayerStep* layer_step = nullptr;  // outputs only
  };
  static constexpr size_t kRowSlots = 1 << 12;

  const Kernel* kernel(int64_t kernel_id) const;
  static void add_formats(Row& row, const wire::FormatCounts* formats);
  // Adds the row's NaN/Inf, each value once (`sign` -1 takes them back), to its groups' columns of
  // intended or of other values.
  static void add_nonfinite(const Row& row, bool intended, int sign);

  void write_ranges(sql::Statement& insert) const;
  void write_layer_steps(sql::Statement& insert) const;

  // Sized at the first launch and the first tensor: a run that launches nothing (a program that
  // only sleeps) does not pay for touching them.
  std::vector<Kernel> kernels_;
  std::vector<Row> rows_;
  Row* row_of(int64_t row_id);  // its slot, if it still holds that row
  std::map<RangeKey, Range> ranges_;
  std::map<LayerStepKey, LayerStep> layer_steps_;
};

}  // namespace fpscope
