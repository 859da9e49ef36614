// The run summary: what ran, how it was configured, how it ended, and its final loss and accuracy.
#include "report_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace fpscope::analysis {


namespace {

std::optional<int64_t> parse_int(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  try {
    size_t used = 0;
    int64_t value = std::stoll(*text, &used);
    if (used == text->size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<double> parse_double(const std::string& text) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value) && value >= 0) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// The collector stores the command as a JSON array of arguments; show it as a shell line.
std::string command_text(const std::string& stored) {
  auto json = nlohmann::json::parse(stored, nullptr, false);
  if (json.is_discarded() || !json.is_array()) return stored;
  std::string line;
  for (const auto& arg : json) {
    std::string a = arg.is_string() ? arg.get<std::string>() : arg.dump();
    if (a.empty() || a.find_first_of(" \t'\"$") != std::string::npos) a = "'" + a + "'";
    line += (line.empty() ? "" : " ") + a;
  }
  return line;
}

}  // namespace

std::string scalar_source(std::string_view name) {
  return name == "loss" ? "SELECT rank, step, loss AS value, 0 AS id FROM v_step_loss WHERE ?1 = 'loss'"
                        : "SELECT rank, step, value, id FROM scalars WHERE name_id IN (SELECT id FROM strings WHERE value = ?1)";
}

std::optional<std::pair<double, std::optional<int64_t>>> last_scalar(const Trace& trace, std::string_view name) {
  sql::Statement st(detail::db(trace),
          fmt::format("WITH named AS ({}) "
                      "SELECT value, step FROM named WHERE rank = (SELECT min(rank) FROM named) AND {} "
                      "ORDER BY step DESC, id DESC LIMIT 1", scalar_source(name), kFiniteValueSql));
  st.bind(1, name);
  if (!st.step()) return std::nullopt;
  return std::make_pair(st.f64(0), st.opt_i64(1));
}

// The losses logged NaN (stored NULL) or +-Inf after the last finite one, on the same rank as
// last_scalar().
static void count_nonfinite_losses(const Trace& trace, RunSummary* s) {
  sql::Statement st(detail::db(trace),
          fmt::format("WITH named AS ({}) "
                      "SELECT count(*), min(step) FROM named WHERE rank = (SELECT min(rank) FROM named) "
                      "AND coalesce({}, 0) = 0 AND step IS NOT NULL AND (?2 IS NULL OR step > ?2)", scalar_source("loss"),
                      kFiniteValueSql));
  st.bind(1, std::string_view("loss"));
  if (s->final_loss_step) st.bind(2, *s->final_loss_step);
  else st.bind_null(2);
  if (!st.step()) return;
  s->nonfinite_loss_steps = st.i64(0);
  s->first_nonfinite_loss_step = st.opt_i64(1);
}

MeasuredSelection measured_selection(const Trace& trace) {
  MeasuredSelection m;
  const auto text = trace.meta_value("options");
  if (!text) return m;
  try {
    const auto j = nlohmann::json::parse(*text);
    m.ops = !j.value("ops", std::string()).empty();
    m.steps = j.value("every", 1) > 1 || !j.value("steps", std::string()).empty();
  } catch (const std::exception&) {
  }
  return m;
}

std::string no_nonfinite_text(const RunSummary& s) {
  const std::string loss = s.nonfinite_loss_steps > 0 && s.first_nonfinite_loss_step
                               ? fmt::format("the loss went NaN/Inf from step {} on", *s.first_nonfinite_loss_step)
                               : std::string();
  const std::string and_loss = loss.empty() ? std::string(".") : ", and " + loss + ".";
  if (s.kernels == 0) return "Unknown: the trace holds no kernel launch" + and_loss;
  if (s.tensors == 0) {
    return (s.measured_a_selection ? "Unknown: no tensor was measured (the selection of --every, --steps or --ops "
                                     "measured none)"
                                   : std::string("Unknown: no tensor was measured")) +
           and_loss;
  }
  if (!loss.empty()) {
    return "None among the measured outputs, but " + loss +
           (s.measured_a_selection ? ": a launch that was not measured made it (trace every step: no --every, --steps "
                                     "or --ops)."
                                   : ": it came from what fpscope does not measure (a type other than f32, f16 and "
                                     "bf16, or work outside the traced kernels and operators).");
  }
  return "None: every measured output was finite.";
}

std::string steps_text(const RunSummary& s) {
  std::string text = std::to_string(s.steps);
  if (s.steps > 0)
    text += " (" + (s.first_step ? std::to_string(*s.first_step) : "-") + " .. " +
            (s.last_step ? std::to_string(*s.last_step) : "-") + ")";
  if (s.tail_step) text += ", then the tail (step " + std::to_string(*s.tail_step) + ": after the last optimizer step)";
  return text;
}

std::string final_loss_text(const RunSummary& s) {
  std::string text = s.final_loss ? human_number(*s.final_loss) +
                                        (s.final_loss_step ? " (step " + std::to_string(*s.final_loss_step) + ")" : "")
                                  : "-";
  if (s.nonfinite_loss_steps > 0 && s.first_nonfinite_loss_step)
    text += fmt::format("{}NaN/Inf from step {} on ({} step{})", s.final_loss ? ", then " : " ",
                        *s.first_nonfinite_loss_step, s.nonfinite_loss_steps, s.nonfinite_loss_steps == 1 ? "" : "s");
  return text;
}

std::vector<TracingCost> tracing_cost(const RunSummary& s) {
  // " (12.3% of the duration)", or nothing where the duration is unknown or shorter than `ms`
  // (a trace of one launch spans none).
  auto share = [&s](double ms) -> std::string {
    if (!s.start_ns || !s.end_ns || static_cast<double>(*s.end_ns - *s.start_ns) <= ms * 1e6) return "";
    return fmt::format(" ({:.1f}% of the duration)", 100.0 * ms * 1e6 / static_cast<double>(*s.end_ns - *s.start_ns));
  };
  std::vector<TracingCost> lines;
  if (s.tracing_own_ms) {
    const double ms = *s.tracing_own_ms;
    lines.push_back({s.ranks > 1 ? "tracing's own time (busiest process)" : "tracing's own time",
                     fmt::format("{:.1f} ms on the program's threads around launches", ms) + share(ms), ms});
  }
  // CPU time of another process, from before the program's start to after its end, idle
  // polling included: no share of the program's duration.
  if (s.collector_cpu_ms) {
    const double ms = *s.collector_cpu_ms;
    lines.push_back({"collector's CPU time",
                     fmt::format("{:.1f} ms in fpscope run's own process (draining, storing, summarising)", ms), ms});
  }
  return lines;
}

RunSummary summary(const Trace& trace) {
  auto& impl = detail::impl(trace);
  RunSummary s;
  s.path = trace.path();
  s.schema_version = trace.schema_version();
  s.command = command_text(trace.meta_value("command").value_or(""));
  for (const auto& [key, value] : trace.meta()) {
    if (key.rfind("config.", 0) == 0) s.config.emplace_back(key.substr(7), value);
    // One per traced process: injector.own_time_ms, then injector.own_time_ms.process<N>.
    if (key == "injector.own_time_ms" || key.rfind("injector.own_time_ms.process", 0) == 0) {
      if (auto ms = parse_double(value)) s.tracing_own_ms = std::max(s.tracing_own_ms.value_or(0.0), *ms);
    }
    if (s.tracing_failure.empty() && (key == "injector.failure" || key.rfind("injector.failure.process", 0) == 0))
      s.tracing_failure = value;
  }
  s.precision = trace.meta_value("config.precision").value_or("");
  s.state = trace.state();
  s.end_reason = trace.meta_value("end_reason").value_or("");
  s.exit_status = parse_int(trace.meta_value("exit_status"));
  if (!s.exit_status) s.exit_status = parse_int(trace.meta_value("exit_code"));
  s.signal = parse_int(trace.meta_value("signal_number"));
  s.signal_name = trace.meta_value("signal").value_or("");
  s.trap = trace.meta_value("trap.message").value_or("");
  if (const auto why = trace.meta_value("trace_incomplete")) {
    s.incomplete = *why == "disk_full"    ? "the disk filled"
                   : *why == "size_limit" ? "the trace reached its size limit (--max-size)"
                                          : "storing failed (" + *why + ")";
    if (const auto step = parse_int(trace.meta_value("incomplete_at_step"))) s.incomplete += " at step " + std::to_string(*step);
    const auto lost = parse_int(trace.meta_value("records_not_stored"));
    const auto rolled_back = parse_int(trace.meta_value("rows_rolled_back"));
    std::string what;
    if (lost && *lost > 0) what = human_count(*lost) + " records received after it were not stored";
    if (rolled_back && *rolled_back > 0)
      what += (what.empty() ? "" : ", and ") + human_count(*rolled_back) + " rows being written when it filled were lost";
    if (!what.empty()) s.incomplete += " (" + what + ")";
  }
  s.measured_a_selection = measured_selection(trace).any();
  s.collector_pid = parse_int(trace.meta_value("collector_pid"));
  s.collector_cpu_ms = parse_double(trace.meta_value("collector_cpu_ms").value_or(""));
  s.steps = impl.count("steps").value_or(0);
  s.ranks = std::max<int64_t>(1, impl.count("ranks").value_or(1));
  s.first_step = impl.count("first_step");
  s.last_step = impl.count("last_step");
  s.tail_step = impl.count("tail_step");
  s.start_ns = impl.count("start_ns");
  s.end_ns = impl.count("end_ns");
  s.kernels = impl.count("kernels").value_or(0);
  s.sampled_kernels = impl.count("sampled_kernels").value_or(0);
  s.tensors = impl.count("tensors").value_or(0);
  s.nonfinite_tensors = impl.count("nonfinite_tensors").value_or(0);
  s.allowed_nonfinite_tensors = impl.count("allowed_nonfinite_tensors").value_or(0);
  s.memory_events = impl.count("memory_events").value_or(0);
  if (auto loss = last_scalar(trace, "loss")) {
    s.final_loss = loss->first;
    s.final_loss_step = loss->second;
  }
  count_nonfinite_losses(trace, &s);
  if (auto acc = last_scalar(trace, "train_accuracy")) s.final_train_accuracy = acc->first;
  if (auto acc = last_scalar(trace, "test_accuracy")) s.test_accuracy = acc->first;
  return s;
}

std::string ending_text(const RunSummary& s) {
  std::string text(contract::label(s.state));
  if (s.state == RunEnd::Unknown && !s.end_reason.empty()) text += " ('" + s.end_reason + "')";
  if (s.exit_status && s.state != RunEnd::ExitedOk) text += " (exit code " + std::to_string(*s.exit_status) + ")";
  if (s.signal || !s.signal_name.empty()) {
    text += " (signal " + (s.signal_name.empty() ? std::string("?") : s.signal_name) +
            (s.signal ? ", " + std::to_string(*s.signal) : "") + ")";
  }
  if (!s.trap.empty()) {
    // The injector's message without its prefix: the ending says it was the trap.
    std::string_view what = s.trap;
    if (what.substr(0, contract::kTrapMessagePrefix.size()) == contract::kTrapMessagePrefix)
      what.remove_prefix(contract::kTrapMessagePrefix.size());
    if (s.state == RunEnd::Trapped) {
      text += fmt::format(": {}", what);
    } else if (contract::is_failure(s.state)) {
      text += fmt::format(", stopped by --trap: {}", what);
    } else {  // the program caught the trap's exception and went on
      text += fmt::format("; --trap fired and the program went on: {}", what);
    }
  }
  if (s.state == RunEnd::CollectorLost && s.collector_pid) {
    text += ": pid " + std::to_string(*s.collector_pid) + " no longer runs; the trace holds what it wrote until then";
  }
  return text;
}

}  // namespace fpscope::analysis
