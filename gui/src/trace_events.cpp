// The event table's rows (see collect_events in trace_data.h). Non-finite and overflow/underflow
// rows are the trace's own rows, read verbatim with Trace::query (the library has no per-event
// listing); loss-scale rows come from analysis::loss_scale().
#include <algorithm>
#include <cstdio>
#include <string>

#include "trace_data.h"

namespace fpscope::gui {
namespace {

int64_t as_int(const analysis::Value& v, int64_t missing = 0) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  return missing;
}
std::optional<int64_t> as_opt_int(const analysis::Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return as_int(v);
}
std::string as_text(const analysis::Value& v) { return analysis::value_text(v); }

constexpr const char* kNonfiniteSql =
    "SELECT n.kernel_id, n.tensor_id, n.kind, n.first_index, n.origin, k.start_ns, k.step, sk.value, sl.value,"
    " st.value, t.nan, t.pos_inf + t.neg_inf, t.count"
    " FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id JOIN tensors t ON t.id = n.tensor_id"
    " JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id"
    " JOIN strings st ON st.id = t.name_id ORDER BY n.id";

constexpr const char* kCastSql =
    "SELECT t.id, t.kernel_id, k.start_ns, k.step, sk.value, sl.value, st.value, t.count,"
    " t.f16_overflow, t.f16_underflow, t.bf16_overflow, t.bf16_underflow"
    " FROM tensors t JOIN kernels k ON k.id = t.kernel_id"
    " JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id"
    " JOIN strings st ON st.id = t.name_id"
    " WHERE t.role = 'out' AND (t.f16_overflow > 0 OR t.f16_underflow > 0 OR t.bf16_overflow > 0"
    " OR t.bf16_underflow > 0) ORDER BY t.id";

void add_nonfinite(TraceData& data) {
  const analysis::QueryResult r = data.trace->query(kNonfiniteSql, kEventLimit);
  data.events_truncated |= r.truncated;
  for (const auto& row : r.rows) {
    EventRow e;
    const std::string kind = as_text(row[2]);
    e.kind = kind == "nan" ? EventRow::Kind::kNaN : EventRow::Kind::kInf;
    e.kernel_id = as_int(row[0]);
    e.tensor_id = as_int(row[1]);
    e.t_ns = as_int(row[5]);
    e.step = as_opt_int(row[6]);
    e.kernel = as_text(row[7]);
    e.layer = as_text(row[8]);
    e.tensor = as_text(row[9]);
    const int64_t nan = as_int(row[10]), inf = as_int(row[11]), count = as_int(row[12]);
    e.amount = static_cast<double>(nan + inf);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%sfirst %s at [%lld]; %lld NaN, %lld Inf of %lld",
                  as_int(row[4]) ? "ORIGIN (inputs finite): " : "", kind.c_str(), static_cast<long long>(as_int(row[3])),
                  static_cast<long long>(nan), static_cast<long long>(inf), static_cast<long long>(count));
    e.detail = buf;
    data.events.push_back(std::move(e));
  }
}

void add_cast_outcome(TraceData& data, const std::vector<analysis::Value>& row, EventRow::Kind kind, int f16_col,
                      int bf16_col, const char* verb) {
  const int64_t f16 = as_int(row[static_cast<size_t>(f16_col)]);
  const int64_t bf16 = as_int(row[static_cast<size_t>(bf16_col)]);
  if (f16 <= 0 && bf16 <= 0) return;
  EventRow e;
  e.kind = kind;
  e.tensor_id = as_int(row[0]);
  e.kernel_id = as_int(row[1]);
  e.t_ns = as_int(row[2]);
  e.step = as_opt_int(row[3]);
  e.kernel = as_text(row[4]);
  e.layer = as_text(row[5]);
  e.tensor = as_text(row[6]);
  e.amount = static_cast<double>(std::max(f16, bf16));
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: fp16 %lld, bf16 %lld of %lld values", verb, static_cast<long long>(f16),
                static_cast<long long>(bf16), static_cast<long long>(as_int(row[7])));
  e.detail = buf;
  data.events.push_back(std::move(e));
}

void add_cast_events(TraceData& data) {
  const analysis::QueryResult r = data.trace->query(kCastSql, kEventLimit);
  data.events_truncated |= r.truncated;
  for (const auto& row : r.rows) {
    add_cast_outcome(data, row, EventRow::Kind::kOverflow, 8, 10, "would overflow");
    add_cast_outcome(data, row, EventRow::Kind::kUnderflow, 9, 11, "would flush to zero");
  }
}

void add_loss_scale(TraceData& data) {
  for (const auto& ls : data.loss_scale.events) {
    auto push = [&](EventRow::Kind kind, const char* what) {
      EventRow e;
      e.kind = kind;
      e.t_ns = ls.t_ns;
      e.step = ls.step;
      e.kernel_id = ls.kernel_id;
      e.kernel = "amp_update_scale";
      e.amount = ls.scale_after;
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s: scale %g -> %g%s", what, ls.scale_before, ls.scale_after,
                    ls.found_inf ? " (inf/NaN found in gradients)" : "");
      e.detail = buf;
      data.events.push_back(std::move(e));
    };
    if (ls.skipped) push(EventRow::Kind::kSkipped, "optimizer step skipped");
    if (ls.event == "backoff") push(EventRow::Kind::kBackoff, "loss scale backoff");
    if (ls.event == "growth") push(EventRow::Kind::kGrowth, "loss scale growth");
  }
}

}  // namespace

const char* event_kind_name(EventRow::Kind kind) {
  switch (kind) {
    case EventRow::Kind::kNaN: return "NaN";
    case EventRow::Kind::kInf: return "Inf";
    case EventRow::Kind::kOverflow: return "overflow";
    case EventRow::Kind::kUnderflow: return "underflow";
    case EventRow::Kind::kBackoff: return "scale backoff";
    case EventRow::Kind::kGrowth: return "scale growth";
    case EventRow::Kind::kSkipped: return "skipped step";
  }
  return "?";
}

void collect_events(TraceData& data) {
  add_nonfinite(data);
  add_cast_events(data);
  add_loss_scale(data);
  std::stable_sort(data.events.begin(), data.events.end(),
                   [](const EventRow& a, const EventRow& b) { return a.t_ns < b.t_ns; });
}

}  // namespace fpscope::gui
