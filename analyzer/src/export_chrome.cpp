// Chrome trace event export (Perfetto, chrome://tracing): NVTX ranges and kernels as complete 'X'
// events on one track per traced thread, counters 'C' for the loss scale and live memory.
// Timestamps are microseconds with three decimals, so nanoseconds survive exactly and ranges nest.
#include "fpscope/export.h"
#include "report_util.h"

#include <nlohmann/json.hpp>

#include <set>

namespace fpscope::analysis {


namespace {

std::string micros(int64_t ns) {
  const int64_t whole = ns / 1000, frac = ns % 1000;
  if (ns < 0 && frac != 0) return fmt::format("-{}.{:03d}", -(ns / 1000), static_cast<int>(-frac));
  return fmt::format("{}.{:03d}", whole, static_cast<int>(frac));
}

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) { out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"; }
  ~EventWriter() { out_ << "\n]}\n"; }

  void complete(const std::string& name, const char* cat, int64_t tid, int64_t start, int64_t end,
                const nlohmann::json& args) {
    next();
    out_ << "{\"ph\":\"X\",\"pid\":1,\"tid\":" << tid << ",\"name\":" << quoted(name) << ",\"cat\":\"" << cat
         << "\",\"ts\":" << micros(start) << ",\"dur\":" << micros(std::max<int64_t>(0, end - start))
         << ",\"args\":" << args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '}';
  }
  void counter(const char* name, int64_t t, const nlohmann::json& args) {
    next();
    out_ << "{\"ph\":\"C\",\"pid\":1,\"name\":\"" << name << "\",\"ts\":" << micros(t) << ",\"args\":" << args.dump()
         << '}';
  }
  void thread_name(int64_t tid, const std::string& name) {
    next();
    out_ << "{\"ph\":\"M\",\"pid\":1,\"tid\":" << tid << ",\"name\":\"thread_name\",\"args\":{\"name\":" << quoted(name)
         << "}}";
  }
  void process_name(const std::string& name) {
    next();
    out_ << "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":" << quoted(name) << "}}";
  }

 private:
  void next() {
    if (!first_) out_ << ",\n";
    first_ = false;
  }
  std::ostream& out_;
  bool first_ = true;
};

}  // namespace

void export_chrome_trace(const Trace& trace, std::ostream& out) {
  const auto& db = detail::db(trace);
  const auto bounds = time_bounds(trace);
  const int64_t trace_end = bounds ? bounds->second : 0;
  EventWriter w(out);
  w.process_name(trace.meta_value("command").value_or(trace.path()));
  std::set<int64_t> threads;
  sql::Statement ranges_st(db,
                 "SELECT r.start_ns, r.end_ns, r.thread, r.kind, s.value, r.step FROM nvtx_ranges r "
                 "JOIN strings s ON s.id = r.name_id ORDER BY r.start_ns, r.depth");
  while (ranges_st.step()) {
    nlohmann::json args = nlohmann::json::object();
    if (auto step = ranges_st.opt_i64(5)) args["step"] = *step;
    if (ranges_st.is_null(1)) args["unclosed"] = true;
    const int64_t tid = ranges_st.i64(2);
    threads.insert(tid);
    const std::string kind = ranges_st.text(3);
    std::string name = ranges_st.text(4);
    if (kind == "step" && args.contains("step")) name += " " + std::to_string(args["step"].get<int64_t>());
    w.complete(name, kind == "step" ? "step" : kind == "phase" ? "phase" : kind == "layer" ? "layer" : "range", tid,
               ranges_st.i64(0), ranges_st.opt_i64(1).value_or(std::max(trace_end, ranges_st.i64(0))), args);
  }
  sql::Statement kernels_st(db,
                  "SELECT k.id, k.start_ns, k.end_ns, k.thread, s.value, sl.value, sp.value, k.step, k.status "
                  "FROM kernels k JOIN strings s ON s.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id "
                  "LEFT JOIN strings sp ON sp.id = k.phase_id ORDER BY k.start_ns, k.id");
  while (kernels_st.step()) {
    nlohmann::json args = {{"launch", kernels_st.i64(0)}, {"status", kernels_st.i64(8)}};
    if (auto layer = kernels_st.opt_text(5)) args["layer"] = *layer;
    if (auto phase = kernels_st.opt_text(6)) args["phase"] = *phase;
    if (auto step = kernels_st.opt_i64(7)) args["step"] = *step;
    const int64_t tid = kernels_st.i64(3);
    threads.insert(tid);
    w.complete(kernels_st.text(4), "kernel", tid, kernels_st.i64(1), kernels_st.i64(2), args);
  }
  for (int64_t tid : threads) w.thread_name(tid, "thread " + std::to_string(tid));
  for (const auto& e : loss_scale(trace).events) w.counter("loss scale", e.t_ns, {{"scale", e.scale_after}});
  for (const auto& p : memory_timeline(trace, 20000)) {
    nlohmann::json args = nlohmann::json::object();
    for (int c = 0; c < kCategoryCount; ++c) args[kCategoryNames[c]] = p.by_category[c];
    w.counter("live memory (bytes)", p.t_ns, args);
  }
}

}  // namespace fpscope::analysis
