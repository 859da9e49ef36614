// Helpers shared by the report sources of libfpscope_analysis.
#pragma once

#include "fpscope/analysis.h"
#include "sqlite_db.h"
#include "trace_impl.h"
#include "fpscope/units.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

namespace fpscope::analysis {

// The last non-NULL value of a scalar (by step, then insertion) and its step. Scalars of a
// multi-rank trace are read off its lowest rank that reported them (rank 0 prints, as a program's
// own output would).
std::optional<std::pair<double, std::optional<int64_t>>> last_scalar(const Trace& trace, std::string_view name);

// The rows (rank, step, value, id) scalar ?1 is read from: a step's loss from v_step_loss (the mean
// of its micro-batches'), any other scalar as logged. Every reader of a scalar starts from these.
std::string scalar_source(std::string_view name);

// One scalar ("loss", "train_accuracy", ...) at each step (lowest rank, as above): the last value
// logged in the step; for "loss" the step's loss of v_step_loss (the mean of its micro-batches').
std::map<int64_t, double> scalar_by_step(const Trace& trace, std::string_view name);
// The same with the steps whose last value is NaN (stored NULL) kept, as a quiet NaN.
std::map<int64_t, double> scalar_by_step_with_nan(const Trace& trace, std::string_view name);

// Which of `fpscope run`'s selections the run measured under (meta `options`, JSON): --ops, a step
// filter (--every above 1, --steps). A trace without that meta (another writer's) has none.
struct MeasuredSelection {
  bool ops = false, steps = false;
  bool any() const { return ops || steps; }
};
MeasuredSelection measured_selection(const Trace& trace);

// SQL: `value` is a finite number. A NaN is stored as NULL, an infinity as itself; SQLite reads
// 9e999 as +Inf, and a comparison with NULL is not true.
inline constexpr const char* kFiniteValueSql = "abs(value) < 9e999";

inline std::optional<int> exponent_of(const std::optional<double>& magnitude) {
  if (!magnitude || !(*magnitude > 0) || !std::isfinite(*magnitude)) return std::nullopt;
  return static_cast<int>(std::floor(std::log2(*magnitude)));
}

// Fills an outcome from summed counts (any may be NULL) over `measured_elements` elements.
inline FormatOutcome make_outcome(const sql::Statement& st, int first_col, std::optional<int64_t> measured_elements) {
  FormatOutcome out;
  if (st.is_null(first_col) || !measured_elements || *measured_elements <= 0) return out;
  out.measured = true;
  out.overflow = st.i64(first_col);
  out.underflow = st.i64(first_col + 1);
  out.subnormal = st.i64(first_col + 2);
  out.near_max = st.i64(first_col + 3);
  const double n = static_cast<double>(*measured_elements);
  out.overflow_share = out.overflow / n;
  out.underflow_share = out.underflow / n;
  out.subnormal_share = out.subnormal / n;
  out.near_max_share = out.near_max / n;
  return out;
}

}  // namespace fpscope::analysis
