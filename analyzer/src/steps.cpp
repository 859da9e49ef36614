// Per-step values (loss, accuracy, loss scale, skipped steps, non-finite counts) and the loss-scale
// history read off the amp_update_scale launches.
#include "report_util.h"

#include <algorithm>
#include <limits>
#include <map>

namespace fpscope::analysis {


// One scalar per step (scalar_source: the loss of v_step_loss, another scalar's last value).
namespace {

std::map<int64_t, double> scalar_rows(const Trace& trace, std::string_view name, bool keep_nan) {
  sql::Statement st(detail::db(trace),
          "WITH named AS (" + scalar_source(name) + ") "
          "SELECT step, value FROM named WHERE rank = (SELECT min(rank) FROM named) "
          "AND step IS NOT NULL AND (?2 OR value IS NOT NULL) ORDER BY step, id");
  st.bind(1, name);
  st.bind(2, int64_t{keep_nan});
  std::map<int64_t, double> values;
  while (st.step()) values[st.i64(0)] = st.is_null(1) ? std::numeric_limits<double>::quiet_NaN() : st.f64(1);
  return values;
}

}  // namespace

std::map<int64_t, double> scalar_by_step(const Trace& trace, std::string_view name) {
  return scalar_rows(trace, name, false);
}

std::map<int64_t, double> scalar_by_step_with_nan(const Trace& trace, std::string_view name) {
  return scalar_rows(trace, name, true);
}

namespace {

template <typename T>
std::optional<T> find(const std::map<int64_t, T>& map, int64_t key) {
  auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

}  // namespace

LossScaleReport loss_scale(const Trace& trace) {
  LossScaleReport report;
  sql::Statement st(detail::db(trace),
          "SELECT kernel_id, t_ns, step, scale_before, scale_after, found_inf, skipped, event, growth_tracker "
          "FROM loss_scale WHERE rank = (SELECT min(rank) FROM loss_scale) ORDER BY t_ns, id");
  while (st.step()) {
    LossScaleEvent e;
    e.kernel_id = st.i64(0);
    e.t_ns = st.i64(1);
    e.step = st.opt_i64(2);
    e.scale_before = st.f64(3);
    e.scale_after = st.f64(4);
    e.found_inf = st.i64(5) != 0;
    e.skipped = st.i64(6) != 0;
    e.event = st.text(7);
    e.growth_tracker = st.i64(8);
    ++report.updates;
    if (e.skipped) {
      ++report.skipped_steps;
      if (e.step) report.skipped_step_numbers.push_back(*e.step);
    }
    if (e.event == "growth") ++report.growths;
    if (e.event == "backoff") ++report.backoffs;
    if (!report.initial_scale) report.initial_scale = e.scale_before;
    report.final_scale = e.scale_after;
    for (double v : {e.scale_before, e.scale_after}) {
      report.min_scale = report.min_scale ? std::min(*report.min_scale, v) : v;
      report.max_scale = report.max_scale ? std::max(*report.max_scale, v) : v;
    }
    report.events.push_back(std::move(e));
  }
  report.used = report.updates > 0;
  return report;
}

std::vector<StepRow> steps(const Trace& trace) {
  const auto loss = scalar_by_step(trace, "loss");
  const auto accuracy = scalar_by_step(trace, "train_accuracy");
  const auto lr = scalar_by_step(trace, "lr");
  std::map<int64_t, std::pair<double, bool>> scale;  // first update of each step
  for (const auto& e : loss_scale(trace).events) {
    if (!e.step) continue;
    auto [it, inserted] = scale.try_emplace(*e.step, e.scale_before, e.skipped);
    if (!inserted) it->second.second = it->second.second || e.skipped;
  }
  std::vector<StepRow> rows;
  sql::Statement st(detail::db(trace), "SELECT step, start_ns, end_ns, nan, inf, intended FROM summary_steps ORDER BY step");
  while (st.step()) {
    StepRow r;
    r.step = st.i64(0);
    r.start_ns = st.opt_i64(1);
    r.end_ns = st.opt_i64(2);
    r.nan_values = st.i64(3);
    r.inf_values = st.i64(4);
    r.intended_values = st.i64(5);
    r.loss = find(loss, r.step);
    r.train_accuracy = find(accuracy, r.step);
    r.lr = find(lr, r.step);
    if (auto s = find(scale, r.step)) {
      r.loss_scale = s->first;
      r.skipped = s->second;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace fpscope::analysis
