// The whole-run summaries rolled up as rows are written (run_rollup.h says when they are used).
// Each value below is the one trace_finalize.sql's summary_steps, summary_ranks and summary_counts
// compute, with SQL's NULL rules: a minimum or a maximum over no value is NULL, a count 0.
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

// map[key] = the larger of it and v (v when the key is new).
template <typename Key>
void keep_max(std::map<Key, int64_t>& map, const Key& key, int64_t v) {
  const auto [it, added] = map.try_emplace(key, v);
  if (!added) it->second = std::max(it->second, v);
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

// [SECTION] summary_ranks and summary_counts ------------------------------------------------------------

std::string RunRollup::why_not() const {
  return usable() ? std::string() : reads_one_not_kept(*this, "the memory summaries", *memory_);
}

void RunRollup::add_kernel(int32_t rank, int64_t start_ns, int64_t end_ns, std::optional<int64_t> step,
                           bool sampled) {
  if (!SummaryRollup::usable()) return;
  int64_t duration = 0;  // SQLite's subtraction would give a REAL beyond 64 bits
  if (__builtin_sub_overflow(end_ns, start_ns, &duration)) return give_up("a kernel's duration beyond 64 bits");
  ++kernels_;
  sampled_ += sampled ? 1 : 0;
  take_max(longest_, duration);
  take_min(first_kernel_ns_, start_ns);
  take_max(last_kernel_ns_, end_ns);
  Work& w = work_[rank];
  take_min(w.start_ns, start_ns);
  take_max(w.end_ns, end_ns);
  ++w.kernels;
  if (step) w.steps.insert(w.steps.end(), *step);  // steps mostly rise: the hint makes that constant time
}

void RunRollup::add_range(const RangeRow& r) {
  if (!SummaryRollup::usable()) return;
  take_min(first_range_ns_, r.start_ns);
  if (r.end_ns) take_max(last_range_ns_, *r.end_ns);
  if (r.step_kind && r.step) step_ranges_.emplace_back(r.rank, *r.step, r.start_ns);
  if (r.phase_kind) keep_max(phase_starts_, {r.rank, r.name_id}, r.start_ns);
}

void RunRollup::add_memory_event(int64_t t_ns) {
  if (!SummaryRollup::usable()) return;
  ++memory_events_;
  take_min(first_memory_ns_, t_ns);
  take_max(last_memory_ns_, t_ns);
}

void RunRollup::add_tensor() {
  if (SummaryRollup::usable()) ++tensors_;
}

// The statements count `allowed = 0` and `allowed = 1` apart; a row of any other value is neither.
void RunRollup::add_nonfinite(int32_t rank, int64_t allowed) {
  if (!SummaryRollup::usable()) return;
  if (allowed == 1) ++allowed_nonfinite_;
  if (allowed == 0) ++nonfinite_[rank];
}

// v_step_ranges: a step range is its rank's tail when it starts after the last training phase
// (forward, backward, optimizer) of its rank began; a rank without one has no tail.
std::vector<RunRollup::StepRange> RunRollup::step_ranges() const {
  std::set<int64_t> training_names;
  sql::Statement names(*db_, "SELECT id FROM strings WHERE value IN ('forward', 'backward', 'optimizer')");
  while (names.step()) training_names.insert(names.i64(0));
  std::map<int32_t, int64_t> last_training;  // rank -> latest start of a training phase
  for (const auto& [key, start] : phase_starts_)
    if (training_names.count(key.second)) keep_max(last_training, key.first, start);
  std::vector<StepRange> ranges;
  ranges.reserve(step_ranges_.size());
  for (const auto& [rank, step, start] : step_ranges_) {
    const auto last = last_training.find(rank);
    ranges.push_back({rank, step, last != last_training.end() && start > last->second});
  }
  return ranges;
}

// summary_ranks' rows: the ranks of the processes and of the kernels.
std::set<int32_t> RunRollup::ranks() const {
  std::set<int32_t> all;
  for (const auto& [rank, w] : work_) all.insert(rank);
  sql::Statement processes(*db_, "SELECT DISTINCT rank FROM processes");
  while (processes.step()) all.insert(static_cast<int32_t>(processes.i64(0)));
  return all;
}

void RunRollup::write_rows(const std::string& table, sql::Statement& insert) const {
  if (table == kRanksTable) write_ranks(insert);
  if (table == kCountsTable) write_counts(insert);
}

void RunRollup::write_ranks(sql::Statement& insert) const {
  // procs: from `processes` itself, as the statement groups it.
  struct Processes {
    int64_t count = 0;
    std::optional<int64_t> pid;
    std::optional<std::string> host, ended;
  };
  std::map<int32_t, Processes> procs;
  {
    sql::Statement st(*db_,
                      "SELECT rank, count(*), min(pid), min(host),"
                      " CASE WHEN sum(ended IS 'vanished') > 0 THEN 'vanished'"
                      "      WHEN sum(ended IS 'exited') = count(*) THEN 'exited' END"
                      " FROM processes GROUP BY rank");
    while (st.step()) procs[static_cast<int32_t>(st.i64(0))] = {st.i64(1), st.opt_i64(2), st.opt_text(3), st.opt_text(4)};
  }
  // origins: each rank's first non-finite output made from finite values, by its launch's start.
  struct Origin {
    int64_t kernel_id;
    std::optional<int64_t> step;
    int64_t start_ns;
  };
  std::map<int32_t, Origin> origins;
  {
    sql::Statement st(*db_,
                      "SELECT k.rank, k.id, k.step, k.start_ns FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id"
                      " WHERE n.origin = 1 AND n.allowed = 0 ORDER BY k.rank, k.start_ns, k.id");
    while (st.step()) origins.try_emplace(static_cast<int32_t>(st.i64(0)), Origin{st.i64(1), st.opt_i64(2), st.i64(3)});
  }
  std::map<int32_t, std::pair<int64_t, int64_t>> scaling;  // events, skipped
  {
    sql::Statement st(*db_, "SELECT rank, count(*), sum(skipped) FROM loss_scale GROUP BY rank");
    while (st.step()) scaling[static_cast<int32_t>(st.i64(0))] = {st.i64(1), st.i64(2)};
  }
  // A rank's steps leave out its tail ranges whose step has kernels of the rank.
  std::map<int32_t, int64_t> tails_with_kernels;
  for (const StepRange& r : step_ranges()) {
    if (!r.tail) continue;
    const auto w = work_.find(r.rank);
    if (w != work_.end() && w->second.steps.count(r.step)) ++tails_with_kernels[r.rank];
  }
  const std::map<int32_t, int64_t> peaks = memory_->peak_by_rank();

  for (const int32_t rank : ranks()) {
    const auto p = procs.find(rank);
    const auto w = work_.find(rank);
    const auto o = origins.find(rank);
    const auto nf = nonfinite_.find(rank);
    const auto m = peaks.find(rank);
    const auto sc = scaling.find(rank);
    const auto tails = tails_with_kernels.find(rank);
    const bool has_p = p != procs.end(), has_w = w != work_.end(), has_o = o != origins.end();
    insert.bind(1, rank);
    insert.bind(2, has_p ? p->second.count : int64_t{0});
    insert.bind(3, has_p ? p->second.pid : std::nullopt);
    insert.bind(4, has_p ? p->second.host : std::nullopt);
    insert.bind(5, has_p ? p->second.ended : std::nullopt);
    insert.bind(6, has_w ? w->second.kernels : int64_t{0});
    insert.bind(7, (has_w ? static_cast<int64_t>(w->second.steps.size()) : int64_t{0}) -
                       (tails != tails_with_kernels.end() ? tails->second : int64_t{0}));
    insert.bind(8, has_w ? w->second.start_ns : std::nullopt);
    insert.bind(9, has_w ? w->second.end_ns : std::nullopt);
    insert.bind(10, nf != nonfinite_.end() ? nf->second : int64_t{0});
    insert.bind(11, has_o ? std::optional(o->second.kernel_id) : std::nullopt);
    insert.bind(12, has_o ? o->second.step : std::nullopt);
    insert.bind(13, has_o ? std::optional(o->second.start_ns) : std::nullopt);
    insert.bind(14, m != peaks.end() ? std::optional(m->second) : std::nullopt);
    insert.bind(15, sc != scaling.end() ? sc->second.first : int64_t{0});
    insert.bind(16, sc != scaling.end() ? sc->second.second : int64_t{0});
    insert.run();
  }
}

void RunRollup::write_counts(sql::Statement& insert) const {
  std::set<int64_t> steps, tail_steps;
  for (const StepRange& r : step_ranges()) (r.tail ? tail_steps : steps).insert(r.step);
  std::optional<int64_t> tail_step;  // the largest tail step that no rank trained in
  for (auto it = tail_steps.rbegin(); it != tail_steps.rend() && !tail_step; ++it)
    if (!steps.count(*it)) tail_step = *it;

  int64_t nonfinite = 0;
  for (const auto& [rank, n] : nonfinite_) nonfinite += n;

  const std::optional<MemoryRollup::PeakMoment> peak = memory_->peak_moment();
  const std::pair<std::string_view, std::optional<int64_t>> rows[] = {
      {"kernels", kernels_},
      {"longest_kernel_ns", longest_},
      {"sampled_kernels", sampled_},
      {"tensors", tensors_},
      {"nonfinite_tensors", nonfinite},
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
      {"ranks", static_cast<int64_t>(ranks().size())},
  };
  for (const auto& [key, value] : rows) insert.run_with(key, value);
}

}  // namespace fpscope
