// The event list (analysis.h, [SECTION] Events): non-finite outputs and fp16/bf16 cast outcomes
// read from the trace's own rows, loss-scale events from loss_scale(), the trap from meta and the
// forecasts from forecast() and update_forecast(). Each source is read in time
// order up to the end of the asked page, then the sources are merged.
#include "fpscope/analysis.h"
#include "fpscope/units.h"
#include "trace_impl.h"

#include <fmt/format.h>

#include <algorithm>

namespace fpscope::analysis {
namespace {

bool wanted(const EventQuery& q, EventKind kind) { return q.kinds[static_cast<std::size_t>(kind)]; }

// The rows each source must read: everything up to the end of the page, and one more to know
// whether there is more.
int64_t rows_needed(const EventQuery& q) { return static_cast<int64_t>(q.offset + q.limit + 1); }

void add_nonfinite(const Trace& trace, const EventQuery& q, std::vector<Event>& out) {
  if (!wanted(q, EventKind::NaN) && !wanted(q, EventKind::Inf)) return;
  sql::Statement st(detail::db(trace),
                    "SELECT n.kernel_id, n.tensor_id, n.kind, n.first_index, n.origin, k.start_ns, k.step, sk.value,"
                    " sl.value, st.value, t.nan, t.pos_inf + t.neg_inf, t.count"
                    " FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id JOIN tensors t ON t.id = n.tensor_id"
                    " JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id"
                    " JOIN strings st ON st.id = t.name_id"
                    " WHERE n.allowed = 0 AND (?1 IS NULL OR k.step = ?1) AND ((?2 AND n.kind = 'nan') OR (?3 AND n.kind <> 'nan'))"
                    " ORDER BY k.start_ns, n.id LIMIT ?4");
  st.bind(1, q.step);
  st.bind(2, int64_t{wanted(q, EventKind::NaN)});
  st.bind(3, int64_t{wanted(q, EventKind::Inf)});
  st.bind(4, rows_needed(q));
  while (st.step()) {
    Event e;
    const std::string kind = st.text(2);
    e.kind = kind == "nan" ? EventKind::NaN : EventKind::Inf;
    e.kernel_id = st.i64(0);
    e.tensor_id = st.i64(1);
    e.t_ns = st.i64(5);
    e.step = st.opt_i64(6);
    e.kernel = st.text(7);
    e.layer = st.text(8);
    e.tensor = st.text(9);
    const int64_t nan = st.i64(10), inf = st.i64(11), count = st.i64(12);
    e.amount = static_cast<double>(nan + inf);
    e.origin = st.i64(4) != 0;
    e.detail = fmt::format("{}first {} at [{}]; {} NaN, {} Inf of {}", e.origin ? "made from finite inputs: " : "",
                           kind, st.i64(3), nan, inf, count);
    out.push_back(std::move(e));
  }
}

void add_cast_events(const Trace& trace, const EventQuery& q, std::vector<Event>& out) {
  const bool overflow = wanted(q, EventKind::Overflow), underflow = wanted(q, EventKind::Underflow);
  if (!overflow && !underflow) return;
  sql::Statement st(detail::db(trace),
                    "SELECT t.id, t.kernel_id, k.start_ns, k.step, sk.value, sl.value, st.value, t.count,"
                    " t.f16_overflow, t.f16_underflow, t.bf16_overflow, t.bf16_underflow"
                    " FROM tensors t JOIN kernels k ON k.id = t.kernel_id"
                    " JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id"
                    " JOIN strings st ON st.id = t.name_id"
                    " WHERE t.role = 'out' AND (?1 IS NULL OR k.step = ?1)"
                    "  AND ((?2 AND (t.f16_overflow > 0 OR t.bf16_overflow > 0))"
                    "    OR (?3 AND (t.f16_underflow > 0 OR t.bf16_underflow > 0)))"
                    " ORDER BY k.start_ns, t.id LIMIT ?4");
  st.bind(1, q.step);
  st.bind(2, int64_t{overflow});
  st.bind(3, int64_t{underflow});
  st.bind(4, rows_needed(q));
  while (st.step()) {
    auto add = [&](EventKind kind, int f16_col, int bf16_col, const char* verb) {
      const int64_t f16 = st.opt_i64(f16_col).value_or(0), bf16 = st.opt_i64(bf16_col).value_or(0);
      if (!wanted(q, kind) || (f16 <= 0 && bf16 <= 0)) return;
      Event e;
      e.kind = kind;
      e.tensor_id = st.i64(0);
      e.kernel_id = st.i64(1);
      e.t_ns = st.i64(2);
      e.step = st.opt_i64(3);
      e.kernel = st.text(4);
      e.layer = st.text(5);
      e.tensor = st.text(6);
      e.amount = static_cast<double>(std::max(f16, bf16));
      e.detail = fmt::format("{}: fp16 {}, bf16 {} of {} values", verb, f16, bf16, st.i64(7));
      out.push_back(std::move(e));
    };
    add(EventKind::Overflow, 8, 10, "would overflow");
    add(EventKind::Underflow, 9, 11, "would flush to zero");
  }
}

void add_loss_scale(const Trace& trace, const EventQuery& q, std::vector<Event>& out) {
  if (!wanted(q, EventKind::ScaleBackoff) && !wanted(q, EventKind::ScaleGrowth) && !wanted(q, EventKind::SkippedStep))
    return;
  for (const LossScaleEvent& ls : loss_scale(trace).events) {
    if (q.step && ls.step != q.step) continue;
    auto add = [&](EventKind kind, const char* what) {
      if (!wanted(q, kind)) return;
      Event e;
      e.kind = kind;
      e.t_ns = ls.t_ns;
      e.step = ls.step;
      e.kernel_id = ls.kernel_id;
      e.kernel = "amp_update_scale";
      e.amount = ls.scale_after;
      e.detail = fmt::format("{}: scale {} -> {}{}", what, human_scale(ls.scale_before), human_scale(ls.scale_after),
                             ls.found_inf ? " (inf/NaN found in gradients)" : "");
      out.push_back(std::move(e));
    };
    if (ls.skipped) add(EventKind::SkippedStep, "optimizer step skipped");
    if (ls.event == "backoff") add(EventKind::ScaleBackoff, "loss scale backoff");
    if (ls.event == "growth") add(EventKind::ScaleGrowth, "loss scale growth");
  }
}

// The trap, from the meta the collector wrote when the injector stopped the program.
void add_trap(const Trace& trace, const EventQuery& q, std::vector<Event>& out) {
  if (!wanted(q, EventKind::Trap)) return;
  const auto kernel_id = trace.meta_value("trap.kernel_id");
  const auto t_ns = trace.meta_value("trap.t_ns");
  if (!kernel_id || !t_ns) return;
  Event e;
  e.kind = EventKind::Trap;
  try {
    e.kernel_id = std::stoll(*kernel_id);
    e.t_ns = std::stoll(*t_ns);
  } catch (const std::exception&) {
    return;  // a damaged meta value: no trap to place
  }
  sql::Statement st(detail::db(trace),
                    "SELECT k.step, sk.value, sl.value FROM kernels k JOIN strings sk ON sk.id = k.name_id"
                    " LEFT JOIN strings sl ON sl.id = k.layer_id WHERE k.id = ?1");
  st.bind(1, e.kernel_id);
  if (st.step()) {
    e.step = st.opt_i64(0);
    e.kernel = st.text(1);
    e.layer = st.opt_text(2).value_or("");
  }
  if (q.step && e.step != q.step) return;
  std::string message = trace.meta_value("trap.message").value_or("");
  if (message.rfind(contract::kTrapMessagePrefix, 0) == 0) message.erase(0, contract::kTrapMessagePrefix.size());
  e.detail = "--trap stopped the program: " + message;
  out.push_back(std::move(e));
}

// An event's time, kernel name and (where it has none) layer, from its launch e.kernel_id; false when
// the trace has no such launch.
bool place_on_kernel(const Trace& trace, Event& e) {
  sql::Statement st(detail::db(trace),
                    "SELECT k.end_ns, sk.value, sl.value FROM kernels k JOIN strings sk ON sk.id = k.name_id"
                    " LEFT JOIN strings sl ON sl.id = k.layer_id WHERE k.id = ?1");
  st.bind(1, e.kernel_id);
  if (!st.step()) return false;
  e.t_ns = st.i64(0);
  e.kernel = st.text(1);
  if (e.layer.empty()) e.layer = st.opt_text(2).value_or("");
  return true;
}

// Forecasts (forecast()): each at the end of the last step its line was fitted to, on the launch that
// wrote the row's largest tensor in that step (no measured tensor in that step: nothing to place it on).
void add_forecasts(const Trace& trace, const EventQuery& q, std::vector<Event>& out) {
  if (!wanted(q, EventKind::Forecast)) return;
  // At the last step fitted, saying where the line reaches the edge.
  const auto forecast_event = [](const ForecastLine& f, const std::string& summary) {
    Event e;
    e.kind = EventKind::Forecast;
    e.step = f.last_step;
    e.detail = summary;
    e.amount = static_cast<double>(f.crossing_step);
    return e;
  };
  for (const RangeForecast& f : forecast(trace)) {
    if (q.step && f.last_step != *q.step) continue;
    Event e = forecast_event(f, f.summary);
    if (std::string_view(range_view_info(f.view).rows) == "layer") e.layer = f.row;
    if (const auto cell = largest_tensor_of_cell(trace, f.view, f.row, f.last_step)) {
      e.kernel_id = cell->kernel_id;
      e.tensor_id = cell->tensor_id;
      e.tensor = cell->tensor;
    }
    if (place_on_kernel(trace, e)) out.push_back(std::move(e));
  }
  // Update/weight ratios falling toward their spacing: on the optimizer launch that updated the
  // parameter in the last step fitted (a front end's step has none: its step's last launch).
  const std::vector<UpdateForecast> updates = update_forecast(trace);
  for (std::size_t i = 0; i < std::min(updates.size(), kForecastsShown); ++i) {
    const UpdateForecast& f = updates[i];
    if (q.step && f.last_step != *q.step) continue;
    Event e = forecast_event(f, f.summary);
    e.layer = f.layer;
    e.tensor = f.param;
    sql::Statement st(detail::db(trace),
                      "SELECT coalesce((SELECT u.kernel_id FROM param_updates u JOIN strings s ON s.id = u.name_id "
                      "WHERE s.value IN (?1, ?1 || '.master') AND u.step = ?2 ORDER BY u.rank LIMIT 1), "
                      "(SELECT max(id) FROM kernels WHERE step = ?2))");
    st.bind(1, f.param);
    st.bind(2, f.last_step);
    if (!st.step() || st.is_null(0)) continue;
    e.kernel_id = st.i64(0);
    if (place_on_kernel(trace, e)) out.push_back(std::move(e));
  }
}

}  // namespace

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::NaN: return "NaN";
    case EventKind::Inf: return "Inf";
    case EventKind::Overflow: return "overflow";
    case EventKind::Underflow: return "underflow";
    case EventKind::ScaleBackoff: return "scale backoff";
    case EventKind::ScaleGrowth: return "scale growth";
    case EventKind::SkippedStep: return "skipped step";
    case EventKind::Trap: return "trap";
    case EventKind::Forecast: return "forecast";
  }
  return "?";
}

EventPage events(const Trace& trace, const EventQuery& query) {
  std::vector<Event> all;
  add_nonfinite(trace, query, all);
  add_cast_events(trace, query, all);
  add_loss_scale(trace, query, all);
  add_trap(trace, query, all);
  add_forecasts(trace, query, all);
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });
  EventPage page;
  const std::size_t end = query.offset + query.limit;
  page.more = all.size() > end;
  if (query.offset < all.size()) {
    all.resize(std::min(all.size(), end));
    page.events.assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(query.offset)),
                       std::make_move_iterator(all.end()));
  }
  return page;
}

}  // namespace fpscope::analysis
