// The whole-run summaries rolled up as rows are written (run_rollup.h says when they are used).
// Each value below is the one trace_finalize.sql's summary_steps and summary_counts compute, with
// SQL's NULL rules: a minimum or a maximum over no value is NULL, a count 0.
#include "run_rollup.h"

#include <algorithm>
#include <string_view>

namespace fpscope {
namespace {

void take_min(std::optional<int64_t>& m, int64_t v) {
  if (!m || v < *m) m = v;
}
void take_max(std::optional<int64_t>& m, int64_t v) {
  if (!m || v > *m) m = v;
}
// min() or max() over the values of several columns, NULLs left out.
std::optional<int64_t> least(std::initializer_list<std::optional<int64_t>> values) {
  std::optional<int64_t> m;
  for (const auto& v : values)
    if (v) take_min(m, *v);
  return m;
}
std::optional<int64_t> greatest(std::initializer_list<std::optional<int64_t>> values) {
  std::optional<int64_t> m;
  for (const auto& v : values)
    if (v) take_max(m, *v);
  return m;
}

// Why a rollup whose own rows are sound cannot be used: the summary it reads is not rolled up.
std::string reads_one_not_kept(const SummaryRollup& own, const char* table, const SummaryRollup& read) {
  if (!own.SummaryRollup::usable()) return own.SummaryRollup::why_not();
  return std::string("it reads ") + table + ", not rolled up: " + read.why_not();
}

}  // namespace

// [SECTION] summary_steps ----------------------------------------------------------------------------

std::string StepsRollup::why_not() const {
  return usable() ? std::string() : reads_one_not_kept(*this, "summary_layer_steps", *tensors_);
}

void StepsRollup::add_range(const RangeRow& r) {
  if (!SummaryRollup::usable() || !r.step_kind || !r.step) return;
  Span& s = steps_[*r.step];
  take_min(s.start_ns, r.start_ns);
  if (r.end_ns) take_max(s.end_ns, *r.end_ns);
}

// GROUP BY step over the step ranges (NULL non-finite columns: 0) and summary_layer_steps' rows with
// a step (NULL span).
void StepsRollup::write_rows(const std::string&, sql::Statement& insert) const {
  std::map<int64_t, std::pair<Span, TensorRollup::StepTotals>> rows;
  for (const auto& [step, span] : steps_) rows[step].first = span;
  for (const auto& [step, totals] : tensors_->step_totals()) rows[step].second = totals;
  for (const auto& [step, row] : rows) {
    const auto& [span, totals] = row;
    insert.run_with(step, span.start_ns, span.end_ns, totals.nan, totals.inf, totals.intended);
  }
}

// [SECTION] summary_counts ---------------------------------------------------------------------------

std::string CountsRollup::why_not() const {
  return usable() ? std::string() : reads_one_not_kept(*this, "summary_memory_peak", *memory_);
}

void CountsRollup::add_kernel(int32_t rank, int64_t start_ns, int64_t end_ns, bool sampled) {
  if (!SummaryRollup::usable()) return;
  ++kernels_;
  sampled_ += sampled ? 1 : 0;
  take_max(longest_, end_ns - start_ns);
  take_min(first_kernel_ns_, start_ns);
  take_max(last_kernel_ns_, end_ns);
  kernel_ranks_.insert(rank);
}

void CountsRollup::add_range(const RangeRow& r) {
  if (!SummaryRollup::usable()) return;
  take_min(first_range_ns_, r.start_ns);
  if (r.end_ns) take_max(last_range_ns_, *r.end_ns);
  if (r.step_kind && r.step) step_ranges_.emplace_back(r.rank, *r.step, r.start_ns);
  if (r.phase_kind) {
    const auto [it, added] = phase_starts_.try_emplace({r.rank, r.name_id}, r.start_ns);
    if (!added) it->second = std::max(it->second, r.start_ns);
  }
}

void CountsRollup::add_memory_event(int64_t t_ns) {
  if (!SummaryRollup::usable()) return;
  ++memory_events_;
  take_min(first_memory_ns_, t_ns);
  take_max(last_memory_ns_, t_ns);
}

void CountsRollup::write_rows(const std::string&, sql::Statement& insert) const {
  // v_step_ranges: a step range is its rank's tail when it starts after the last training phase
  // (forward, backward, optimizer) of its rank began; a rank without one has no tail.
  std::set<int64_t> training_names;
  {
    sql::Statement names(*db_, "SELECT id FROM strings WHERE value IN ('forward', 'backward', 'optimizer')");
    while (names.step()) training_names.insert(names.i64(0));
  }
  std::map<int32_t, int64_t> last_training;  // rank -> latest start of a training phase
  for (const auto& [key, start] : phase_starts_) {
    if (!training_names.count(key.second)) continue;
    const auto [it, added] = last_training.try_emplace(key.first, start);
    if (!added) it->second = std::max(it->second, start);
  }
  std::set<int64_t> steps, tail_steps;
  for (const auto& [rank, step, start] : step_ranges_) {
    const auto last = last_training.find(rank);
    const bool tail = last != last_training.end() && start > last->second;
    (tail ? tail_steps : steps).insert(step);
  }
  std::optional<int64_t> tail_step;  // the largest tail step that no rank trained in
  for (auto it = tail_steps.rbegin(); it != tail_steps.rend() && !tail_step; ++it)
    if (!steps.count(*it)) tail_step = *it;

  // summary_ranks' rows: the ranks of the processes and of the kernels.
  std::set<int32_t> ranks = kernel_ranks_;
  {
    sql::Statement processes(*db_, "SELECT DISTINCT rank FROM processes");
    while (processes.step()) ranks.insert(static_cast<int32_t>(processes.i64(0)));
  }

  const std::optional<MemoryRollup::PeakMoment> peak = memory_->peak_moment();
  const std::pair<std::string_view, std::optional<int64_t>> rows[] = {
      {"kernels", kernels_},
      {"longest_kernel_ns", longest_},
      {"sampled_kernels", sampled_},
      {"tensors", tensors_},
      {"nonfinite_tensors", nonfinite_},
      {"allowed_nonfinite_tensors", allowed_nonfinite_},
      {"memory_events", memory_events_},
      {"steps", static_cast<int64_t>(steps.size())},
      {"first_step", steps.empty() ? std::nullopt : std::optional(*steps.begin())},
      {"last_step", steps.empty() ? std::nullopt : std::optional(*steps.rbegin())},
      {"tail_step", tail_step},
      {"start_ns", least({first_kernel_ns_, first_range_ns_, first_memory_ns_})},
      {"end_ns", greatest({last_kernel_ns_, last_range_ns_, last_memory_ns_})},
      {"memory_peak_bytes", peak ? std::optional<int64_t>(peak->live) : std::nullopt},
      {"memory_peak_ns", peak ? std::optional<int64_t>(peak->t_ns) : std::nullopt},
      {"memory_peak_step", peak ? peak->step : std::nullopt},
      {"memory_peak_rank", peak ? std::optional<int64_t>(peak->rank) : std::nullopt},
      {"ranks", static_cast<int64_t>(ranks.size())},
  };
  for (const auto& [key, value] : rows) insert.run_with(key, value);
}

}  // namespace fpscope
