// Builds the report and compare sections (see sections.h): which numbers appear, in what order,
// and how they read. The numbers come from libfpscope_analysis only.
#include "sections.h"

#include "fpscope/contract/collectives.h"
#include "fpscope/report_json.h"
#include "fpscope/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace fpscope::cli {

using namespace fpscope::analysis;

namespace {

// Accuracy scalars are percentages as the program logs them (mptrain: 0..100).
Cell accuracy_cell(const std::optional<double>& percent) {
  if (!percent) return {"-", nullptr};
  return {fmt::format("{:.2f}%", *percent), *percent};
}

std::string step_text(const std::optional<int64_t>& step) { return step ? std::to_string(*step) : "-"; }

std::string where(const std::string& kernel, const std::optional<std::string>& layer) {
  return layer ? kernel + " (" + *layer + ")" : kernel;
}

}  // namespace

Section summary_section(const Trace& trace) {
  const RunSummary s = summary(trace);
  Section sec{"summary", "Summary", {}, {}, {}};
  Table t{"summary", {"item", "value"}, {}};
  auto add = [&](const std::string& item, Cell value) {
    value.numeric = false;  // a list of facts reads best left-aligned
    t.rows.push_back({Cell(item), std::move(value)});
  };
  add("trace", Cell(s.path));
  add("command", Cell(s.command.empty() ? "-" : s.command));
  for (const auto& [k, v] : s.config) {
    // Long values (the op lists) are cut in the text; the machine value keeps them whole.
    Cell cell(v);
    if (cell.text.size() > 100) cell.text = cell.text.substr(0, 97) + "...";
    add("config " + k, cell);
  }
  add("ended", Cell((contract::is_failure(s.state) ? "FAILED: " : "") + ending_text(s)));
  if (!s.incomplete.empty()) add("trace", Cell("INCOMPLETE: " + s.incomplete));
  add("steps", Cell(steps_text(s), s.steps));
  if (s.start_ns && s.end_ns) add("duration", Cell(human_duration(*s.end_ns - *s.start_ns), *s.end_ns - *s.start_ns));
  if (s.ranks > 1) add("ranks", Cell(fmt::format("{} (see the Ranks section)", s.ranks), s.ranks));
  add("kernel launches", Cell(fmt::format("{} ({} measured)", s.kernels, s.sampled_kernels), s.kernels));
  for (const TracingCost& line : tracing_cost(s)) add(line.label, Cell(line.text, line.ms));
  if (!s.tracing_failure.empty()) add("tracing stopped early", Cell(s.tracing_failure));
  add("tensor records", int_cell(s.tensors));
  add("non-finite outputs", int_cell(s.nonfinite_tensors));
  if (s.allowed_nonfinite_tensors > 0)
    add("intended NaN/Inf (--allow)", Cell(intended_text(intended_nonfinite(trace)), s.allowed_nonfinite_tensors));
  add("final loss", s.final_loss ? Cell(final_loss_text(s), *s.final_loss) : Cell(final_loss_text(s), nullptr));
  add("final train accuracy", accuracy_cell(s.final_train_accuracy));
  add("test accuracy", accuracy_cell(s.test_accuracy));
  sec.tables.push_back(std::move(t));
  if (s.state == RunEnd::Running) {
    sec.notes.push_back("NOTE: this trace is still being written: the numbers cover what it holds so far.");
  } else if (!s.incomplete.empty()) {
    sec.notes.push_back("NOTE: this trace is incomplete: " + s.incomplete + ". The numbers cover what it holds.");
  } else if (s.state == RunEnd::CollectorLost) {
    sec.notes.push_back("NOTE: the fpscope run that wrote this trace died before the program ended: the numbers cover what it wrote until then.");
  }
  for (const auto& [key, value] : s.config) {
    if (key == "unmeasured")
      sec.notes.push_back("NOTE: not measured: " + value + ". Their values are in no range, count or origin.");
    if (key == "torch_compile" && value == "compiled")
      sec.notes.push_back(
          "NOTE: the program ran parts of its model compiled by torch.compile: each compiled forward graph is "
          "one launch named after the code it compiles (such as \"compiled Net.forward\"), measured at its boundary, "
          "its inputs and outputs; what ran "
          "inside it, and the operators Inductor fused in the compiled backward, are in no range, count or "
          "origin (the backward's matmuls and convolutions are measured). To measure every operator, run it "
          "with `fpscope run --eager` (TorchDynamo off); its numerics can differ from the compiled run's.");
  }
  if (!s.tracing_failure.empty()) {
    sec.notes.push_back("NOTE: tracing stopped early after a failure of the tracer itself (" + s.tracing_failure +
                        "); the program went on untraced, and the trace holds what came before.");
  }
  sec.extra["in_progress"] = s.state == RunEnd::Running;
  sec.extra["summaries_precomputed"] = trace.summaries_precomputed();
  return sec;
}

Section nonfinite_section(const Trace& trace) {
  const NonfiniteReport r = nonfinite(trace);
  Section sec{"nonfinite", "Non-finite values (NaN/Inf)", {}, {}, {}};
  sec.extra["nan"] = r.nan;
  sec.extra["pos_inf"] = r.pos_inf;
  sec.extra["neg_inf"] = r.neg_inf;
  sec.extra["tensors"] = r.tensors;
  sec.extra["intended"] = intended_json(r.intended);
  const std::string intended = intended_text(r.intended);
  if (!r.first_origin) {
    sec.notes.push_back(no_nonfinite_text(summary(trace)));
    if (!intended.empty()) sec.notes.push_back("Intended: " + intended + ".");
    return sec;
  }
  const auto& o = *r.first_origin;
  sec.notes.push_back(fmt::format("{} NaN, {} +Inf, {} -Inf in {} output tensors, from step {}.", r.nan, r.pos_inf,
                                  r.neg_inf, r.tensors, step_text(r.first_step)));
  if (!intended.empty()) sec.notes.push_back("Intended, apart: " + intended + ".");
  const bool ranked = summary(trace).ranks > 1;
  const std::string on_rank = ranked ? fmt::format(" on rank {}", o.rank) : "";
  switch (how_it_came(o)) {
    case FirstNonfinite::Made:
      sec.notes.push_back(fmt::format("First origin: {} made {} from finite inputs{}", where(o.kernel, o.layer), o.kind, on_rank));
      break;
    case FirstNonfinite::ReceivedFromAnotherRank:
      sec.notes.push_back(fmt::format("First non-finite output: {} received {} from another rank{}", where(o.kernel, o.layer),
                                      o.kind, on_rank));
      break;
    case FirstNonfinite::ReceivedOrOwnInput:
      sec.notes.push_back(fmt::format("First non-finite output: {} returned {}{}, from another rank or from its own inputs "
                                      "(they were not measured)", where(o.kernel, o.layer), o.kind, on_rank));
      break;
    case FirstNonfinite::Returned:
      sec.notes.push_back(fmt::format("First non-finite output (no origin measured): {} returned {}{}", where(o.kernel, o.layer),
                                      o.kind, on_rank));
      break;
  }
  sec.notes.push_back(fmt::format("  phase {}, step {}, launch {}, tensor {} {} {}, index {} (bits {:#x})",
                                  o.phase.value_or("-"), step_text(o.step), human_launch(o.kernel_id), o.tensor, o.dtype, o.shape,
                                  o.first_index, o.first_bits));
  if (!r.propagation.empty()) {
    // Consecutive launches of the same kernel and layer read as one link: "amp_unscale_check x12".
    std::string chain = where(o.kernel, o.layer);
    for (size_t i = 0; i < r.propagation.size();) {
      const std::string link = where(r.propagation[i].kernel, r.propagation[i].layer);
      size_t j = i;
      while (j < r.propagation.size() && where(r.propagation[j].kernel, r.propagation[j].layer) == link) ++j;
      chain += " -> " + link + (j - i > 1 ? fmt::format(" x{}", j - i) : "");
      i = j;
    }
    sec.notes.push_back("Passed on by: " + chain + (r.propagation_truncated ? " -> ..." : ""));
  }
  sec.extra["first_origin"] = {{"kernel", o.kernel}, {"op", o.op}, {"layer", o.layer ? nlohmann::json(*o.layer) : nlohmann::json()},
                               {"phase", o.phase ? nlohmann::json(*o.phase) : nlohmann::json()},
                               {"step", o.step ? nlohmann::json(*o.step) : nlohmann::json()}, {"tensor", o.tensor},
                               {"index", o.first_index}, {"kind", o.kind}, {"launch", o.kernel_id}, {"origin", o.origin}};
  Table chain{"propagation", {"launch", "kernel", "layer", "phase", "step", "tensor", "kind"}, {}};
  for (const auto& e : r.propagation) {
    chain.rows.push_back({int_cell(e.kernel_id), Cell(e.kernel), opt_text_cell(e.layer), opt_text_cell(e.phase),
                          opt_int_cell(e.step), Cell(e.tensor), Cell(e.kind)});
  }
  Table by{"by_kernel", {"kernel", "layer", "tensors", "origins", "NaN", "+Inf", "-Inf", "first step"}, {}};
  for (const auto& k : r.by_kernel) {
    by.rows.push_back({Cell(k.kernel), opt_text_cell(k.layer), int_cell(k.tensors), int_cell(k.origins), int_cell(k.nan),
                       int_cell(k.pos_inf), int_cell(k.neg_inf), opt_int_cell(k.first_step)});
  }
  sec.tables.push_back(std::move(by));
  sec.tables.push_back(std::move(chain));
  return sec;
}

Section why_section(const Trace& trace) {
  const WhyReport r = why(trace);
  Section sec{"why", "Why: the causes behind the first NaN/Inf and the skipped steps", {}, {}, {}};
  auto add_forecasts = [&] {
    if (r.forecasts.empty()) return;
    sec.notes.push_back(fmt::format("Heading for fp16's edge (the last {} measured steps fitted by exponential growth "
                                    "or a straight line, whichever fits them better):",
                                    kForecastWindow));
    for (const RangeForecast& f : r.forecasts) sec.notes.push_back("  " + f.summary);
  };
  if (!r.origin && r.skipped_steps.empty()) {
    sec.notes.push_back("Nothing to explain: no NaN/Inf and no skipped step.");
    add_forecasts();
    return sec;
  }
  if (r.origin) {
    const std::string rank = summary(trace).ranks > 1 ? fmt::format(", rank {}", r.origin->rank) : "";
    sec.notes.push_back(fmt::format("First NaN/Inf: {} at {} ({}, launch {}{}).", where(r.origin->kernel, r.origin->layer),
                                    "step " + step_text(r.origin->step), r.origin->phase.value_or("no phase"),
                                    human_launch(r.origin->kernel_id), rank));
    for (size_t i = 0; i < r.causes.size(); ++i) {
      sec.notes.push_back(fmt::format("{}. {}", i + 1, r.causes[i].summary));
      sec.notes.push_back(fmt::format("   what to change: {}", r.causes[i].advice));
    }
  }
  Table chain{"chain", {"depth", "read by", "tensor", "written by", "layer", "phase", "step", "absmax before",
                        "absmax after", "jump", "zeros before", "zeros after", "note"}, {}};
  for (const CauseLink& l : r.chain) {
    chain.rows.push_back({int_cell(l.depth), int_cell(l.reader_kernel_id), Cell(l.tensor),
                          l.writer_kernel_id ? Cell(fmt::format("{} (launch {})", l.writer_kernel, human_launch(*l.writer_kernel_id)))
                                             : Cell("-", nullptr),
                          opt_text_cell(l.writer_layer), opt_text_cell(l.writer_phase), opt_int_cell(l.writer_step),
                          number_cell(l.absmax_before), number_cell(l.absmax_after),
                          l.jump_log2 ? Cell(fmt::format("2^{:.1f}", *l.jump_log2), *l.jump_log2) : Cell("-", nullptr),
                          int_cell(l.zero_before), int_cell(l.zero_after), Cell(l.note)});
  }
  if (r.origin) {
    sec.notes.push_back(fmt::format("The chain walked back from it: {} unusual link{}, {} input{} with ordinary ranges.",
                                    r.chain.size(), r.chain.size() == 1 ? "" : "s", r.ordinary_links,
                                    r.ordinary_links == 1 ? "" : "s"));
  }
  if (!chain.rows.empty()) sec.tables.push_back(std::move(chain));
  if (!r.skipped_steps.empty()) {
    Table skipped{"skipped_steps", {"step", "why"}, {}};
    for (const Cause& c : r.skipped_steps) skipped.rows.push_back({opt_int_cell(c.step), Cell(c.summary)});
    sec.notes.push_back(fmt::format("{} skipped step{}; what to change: {}", r.skipped_steps.size(),
                                    r.skipped_steps.size() == 1 ? "" : "s", r.skipped_steps.front().advice));
    sec.tables.push_back(std::move(skipped));
  }
  add_forecasts();
  return sec;
}

Section ranges_section(const Trace& trace, RangeView view, SideOutputs side_outputs) {
  Section sec{"ranges", "Value ranges", {}, {}, {}};
  const RangeViewInfo& info = range_view_info(view);
  sec.extra["view"] = info.key;
  Table by_view{"view_ranges", {info.rows, "steps", "absmax", "min nonzero", "fp16 headroom", "fp16 footroom", "NaN/Inf"}, {}};
  for (const ViewRangeRow& r : view_ranges(trace, view)) {
    by_view.rows.push_back({Cell(r.row), int_cell(r.steps), number_cell(r.absmax), number_cell(r.min_nonzero),
                            log2_cell(r.headroom_f16_log2), log2_cell(r.footroom_f16_log2), int_cell(r.nonfinite)});
  }
  sec.notes.push_back(fmt::format("First by {}, over every step: {} (--view {}; the others: activations, gradients, "
                                  "gradients-unscaled, weights, optimizer-state).", info.rows, info.title, info.key));
  if (by_view.rows.empty()) sec.notes.push_back("  (none in this trace)");
  sec.tables.push_back(std::move(by_view));
  sec.notes.push_back(std::string("Then per layer and kernel, outputs of every phase") +
                      (side_outputs == SideOutputs::Apart
                           ? " (of a forward kernel's side outputs, such as a normalisation's saved statistics, only "
                             "their NaN/Inf: --side-outputs counts them whole)"
                           : ", a forward kernel's side outputs counted as its result (--side-outputs)") +
                      ". headroom: powers of two between absmax and the format's largest value; shares of the values "
                      "a cast would overflow, flush to zero or make subnormal.");
  Table t{"ranges",
          {"layer", "kernel", "elements", "absmax", "min nonzero", "fp16 headroom", "bf16 headroom", "fp16 overflow",
           "fp16 underflow", "fp16 subnormal", "bf16 overflow", "bf16 underflow", "bf16 subnormal", "NaN/Inf"},
          {}};
  const std::vector<RangeRow> rows = ranges(trace, RangeGrouping::LayerKernel, RoleFilter::Outputs, side_outputs);
  // Intended NaN/Inf (an allow rule covers them) get a column of their own where a trace has any.
  const bool any_intended = std::any_of(rows.begin(), rows.end(), [](const RangeRow& r) { return r.intended > 0; });
  if (any_intended) t.columns.push_back("intended NaN/Inf");
  for (const auto& r : rows) {
    const auto& f = r.formats[0];
    const auto& b = r.formats[1];
    auto share = [](const FormatOutcome& o, double v) { return o.measured ? std::optional<double>(v) : std::nullopt; };
    t.rows.push_back({opt_text_cell(r.layer), Cell(r.kernel), int_cell(r.elements), number_cell(r.absmax),
                      number_cell(r.min_nonzero), log2_cell(r.headroom_f16_log2), log2_cell(r.headroom_bf16_log2),
                      percent_cell(share(f, f.overflow_share)), percent_cell(share(f, f.underflow_share)),
                      percent_cell(share(f, f.subnormal_share)), percent_cell(share(b, b.overflow_share)),
                      percent_cell(share(b, b.underflow_share)), percent_cell(share(b, b.subnormal_share)),
                      int_cell(r.nan + r.inf)});
    if (any_intended) t.rows.back().push_back(int_cell(r.intended));
  }
  sec.tables.push_back(std::move(t));
  return sec;
}

Section loss_scale_section(const Trace& trace) {
  const LossScaleReport r = loss_scale(trace);
  Section sec{"loss_scale", "Loss scale", {}, {}, {}};
  sec.extra["used"] = r.used;
  if (!r.used) {
    sec.notes.push_back("Not used: the run launched no amp_update_scale.");
    return sec;
  }
  sec.notes.push_back(fmt::format("{} updates: {} skipped steps, {} growths, {} backoffs.", r.updates, r.skipped_steps,
                                  r.growths, r.backoffs));
  sec.notes.push_back(fmt::format("Scale: {} at the start, {} at the end (range {} .. {}).", human_scale(*r.initial_scale),
                                  human_scale(*r.final_scale), human_scale(*r.min_scale), human_scale(*r.max_scale)));
  if (!r.skipped_step_numbers.empty()) {
    std::string steps;
    for (size_t i = 0; i < r.skipped_step_numbers.size() && i < 30; ++i) steps += (i ? ", " : "") + std::to_string(r.skipped_step_numbers[i]);
    if (r.skipped_step_numbers.size() > 30) steps += ", ...";
    sec.notes.push_back("Skipped steps: " + steps);
  }
  sec.extra["updates"] = r.updates;
  sec.extra["skipped_steps"] = r.skipped_steps;
  sec.extra["growths"] = r.growths;
  sec.extra["backoffs"] = r.backoffs;
  sec.extra["initial_scale"] = *r.initial_scale;
  sec.extra["final_scale"] = *r.final_scale;
  // Timeline: every change of the scale (not every unchanged step).
  Table t{"changes", {"step", "event", "scale before", "scale after", "found inf"}, {}};
  for (const auto& e : r.events) {
    if (e.event == "unchanged" && !e.skipped) continue;
    t.rows.push_back({opt_int_cell(e.step), Cell(e.event), Cell(human_scale(e.scale_before), e.scale_before),
                      Cell(human_scale(e.scale_after), e.scale_after), Cell(e.found_inf ? "yes" : "no", e.found_inf, false)});
  }
  if (!t.rows.empty()) sec.tables.push_back(std::move(t));
  return sec;
}

Section memory_section(const Trace& trace) {
  const MemoryReport m = memory(trace);
  Section sec{"memory", "Memory", {}, {}, {}};
  // The trace's clock is the program's monotonic clock: say when the peak came after the first event.
  const std::optional<int64_t> run_start = summary(trace).start_ns;
  std::string moment;
  if (m.peak_ns && run_start) moment = fmt::format(" ({} after the run's first event)", human_duration(*m.peak_ns - *run_start));
  sec.notes.push_back(fmt::format("Peak {} live {}{}.", human_bytes(m.peak_bytes), human_step_place(m.peak_step), moment));
  sec.extra["peak_bytes"] = m.peak_bytes;
  sec.extra["peak_step"] = m.peak_step ? nlohmann::json(*m.peak_step) : nlohmann::json();
  sec.extra["peak_ns"] = m.peak_ns ? nlohmann::json(*m.peak_ns) : nlohmann::json();
  Table t{"by_category", {"category", "at peak", "share of peak", "own maximum", "allocated in all", "allocations"}, {}};
  for (const auto& c : m.by_category) {
    t.rows.push_back({Cell(c.category), bytes_cell(c.at_peak),
                      percent_cell(m.peak_bytes ? std::optional<double>(static_cast<double>(c.at_peak) / m.peak_bytes) : std::nullopt),
                      bytes_cell(c.max_live), bytes_cell(c.allocated), int_cell(c.allocations)});
  }
  Table big{"largest", {"allocation", "category", "bytes", "times", "first step"}, {}};
  for (const auto& a : m.largest) {
    big.rows.push_back({Cell(a.name), Cell(a.category), bytes_cell(a.bytes), int_cell(a.count), opt_int_cell(a.first_step)});
  }
  sec.tables.push_back(std::move(t));
  sec.tables.push_back(std::move(big));
  return sec;
}

Section ranks_section(const Trace& trace) {
  const RanksReport r = ranks(trace);
  Section sec{"ranks", "Ranks", {}, {}, {}};
  sec.notes.push_back(fmt::format("{} rank{} traced{}.", r.ranks.size(), r.ranks.size() == 1 ? "" : "s",
                                  r.same_host ? "" : ", on several hosts: times of different hosts are not comparable"));
  if (r.first_origin_rank) {
    const auto it = std::find_if(r.ranks.begin(), r.ranks.end(), [&](const RankRow& k) { return k.rank == *r.first_origin_rank; });
    std::string lead = r.first_origin_lead_ns
                           ? fmt::format(", {} before the next rank's first", human_duration(*r.first_origin_lead_ns))
                           : ", the only rank that made one";
    sec.notes.push_back(fmt::format("First NaN/Inf made from finite inputs: rank {}, step {}, launch {}{}.",
                                    *r.first_origin_rank, step_text(it->first_origin_step),
                                    human_launch(it->first_origin_kernel_id.value_or(0)), lead));
  } else {
    sec.notes.push_back("No rank made a NaN/Inf from finite inputs.");
  }
  if (r.loss_scale_steps_compared > 0) {
    sec.notes.push_back(r.loss_scale_disagreements == 0
                            ? fmt::format("Loss scale: the ranks agreed in all {} steps they share.", r.loss_scale_steps_compared)
                            : fmt::format("Loss scale: the ranks disagreed in {} of {} steps, first at step {}.",
                                          r.loss_scale_disagreements, r.loss_scale_steps_compared,
                                          step_text(r.first_disagreement_step)));
  }
  sec.extra["first_origin_rank"] = r.first_origin_rank ? nlohmann::json(*r.first_origin_rank) : nlohmann::json();
  Table t{"ranks", {"rank", "pid", "host", "ended", "kernels", "steps", "NaN/Inf outputs", "first origin step",
                    "memory peak", "skipped steps", "slowest in", "held others back"}, {}};
  for (const auto& k : r.ranks) {
    t.rows.push_back({int_cell(k.rank), opt_int_cell(k.pid), Cell(k.host), Cell(k.ended.value_or("-")), int_cell(k.kernels),
                      int_cell(k.steps), int_cell(k.nonfinite_tensors), opt_int_cell(k.first_origin_step),
                      k.memory_peak_bytes ? bytes_cell(*k.memory_peak_bytes) : Cell("-"), int_cell(k.skipped_steps),
                      Cell(fmt::format("{} steps", k.slowest_steps), k.slowest_steps),
                      Cell(human_duration(k.held_back_ns), k.held_back_ns)});
  }
  sec.tables.push_back(std::move(t));
  return sec;
}

namespace {

// "0.12%"; "-" when nothing was quantized.
Cell share_cell(const std::optional<double>& share) { return percent_cell(share); }

Cell sqnr_cell(const std::optional<double>& db) {
  if (!db) return {"-", nullptr};
  if (std::isinf(*db)) return {"lossless", "inf"};
  return {fmt::format("{:.1f} dB", *db), *db};
}

std::string recipe_list(const std::vector<Recipe>& recipes) {
  std::string s;
  for (Recipe r : recipes) s += (s.empty() ? "" : ", ") + std::string(contract::recipe_info(r).name);
  return s.empty() ? "-" : s;
}

std::string layer_text(const std::string& layer) { return layer.empty() ? "(no layer)" : layer; }

}  // namespace

Section fp8_section(const Trace& trace) {
  const Fp8Readiness r = fp8_readiness(trace);
  Section sec{"fp8", "fp8 readiness (scaling recipes forecast)", {}, {}, {}};
  if (!r.forecast) {
    sec.notes.push_back(no_forecast_text(r));
    sec.extra["forecast"] = false;
    return sec;
  }
  sec.extra["forecast"] = true;
  const FitThresholds& t = r.thresholds;
  sec.notes.push_back(fmt::format(
      "A recipe fits an operand when it flushes at most {} of its values to zero, saturates at most {}, makes no "
      "block non-finite and keeps its SQNR at {:.0f} dB or more with e4m3 elements ({:.0f} dB e5m2, {:.0f} dB "
      "e2m1); a layer fits a recipe when all its operands do. Shares are of the values quantized, over every step "
      "traced.",
      human_percent(t.max_underflow_share), human_percent(t.max_saturated_share), t.min_sqnr_db_e4m3,
      t.min_sqnr_db_e5m2, t.min_sqnr_db_e2m1));
  int keep = 0;
  for (const LayerReadiness& l : r.layers) keep += l.keep_high_precision ? 1 : 0;
  if (keep == 0) {
    sec.notes.push_back("Every layer fits an 8-bit recipe.");
  } else {
    std::string list;
    for (const LayerReadiness& l : r.layers)
      if (l.keep_high_precision) list += (list.empty() ? "" : ", ") + layer_text(l.layer);
    sec.notes.push_back(fmt::format("Keep in bf16 ({} layer{}, most severe first): {}.", keep, keep == 1 ? "" : "s", list));
  }
  if (r.overflow_count > 0)
    sec.notes.push_back(fmt::format(
        "Delayed scaling saturated values in {} tensor{}: the amax outgrew the history's (first at step {}, {} {}).",
        r.overflow_count, r.overflow_count == 1 ? "" : "s", step_text(r.overflows.front().step),
        layer_text(r.overflows.front().layer), contract::operand_name(r.overflows.front().operand)));

  Table layers{"layers", {"layer", "verdict", "best 8-bit recipe", "recipes that fit", "evidence"}, {}};
  for (const LayerReadiness& l : r.layers) {
    std::string evidence = "-";
    if (l.keep_high_precision && l.closest && l.failing_operand) {
      for (const OperandReadiness& o : r.operands) {
        if (o.layer != l.layer || o.operand != *l.failing_operand) continue;
        const RecipeFigures& f = o.recipes[std::size_t(*l.closest)];
        evidence = fmt::format("closest {}: {} {}: underflow {}, saturated {}, SQNR {}",
                               contract::recipe_info(*l.closest).name, contract::operand_name(o.operand),
                               misfit_name(l.failure), human_percent(f.underflow_share().value_or(0)),
                               human_percent(f.saturated_share().value_or(0)), sqnr_cell(f.sqnr_db()).text);
      }
    }
    layers.rows.push_back({Cell(layer_text(l.layer)), Cell(l.keep_high_precision ? "keep in bf16" : "fp8"),
                           l.best_8bit ? Cell(contract::recipe_info(*l.best_8bit).name) : Cell("-", nullptr, false),
                           Cell(recipe_list(l.fitting)), Cell(evidence)});
  }
  sec.tables.push_back(std::move(layers));

  Table ops{"operands", {"layer", "operand", "recipe", "underflow", "subnormal", "saturated", "blocks lost", "SQNR",
                         "worst SQNR", "at step", "fits"}, {}};
  for (const OperandReadiness& o : r.operands) {
    for (int i = 0; i < kRecipeCount; ++i) {
      const RecipeFigures& f = o.recipes[std::size_t(i)];
      if (f.tensors == 0) continue;
      const auto sub = f.quantized ? std::optional<double>(double(f.subnormal) / double(f.quantized)) : std::nullopt;
      ops.rows.push_back({Cell(layer_text(o.layer)), Cell(contract::operand_name(o.operand)),
                          Cell(contract::kRecipes[std::size_t(i)].name), share_cell(f.underflow_share()),
                          share_cell(sub), share_cell(f.saturated_share()),
                          Cell(fmt::format("{} of {}", f.blocks_lost, f.blocks), int64_t(f.blocks_lost)),
                          sqnr_cell(f.sqnr_db()), sqnr_cell(f.worst_sqnr_db), opt_int_cell(f.worst_step),
                          Cell(misfit_name(o.misfit[std::size_t(i)]))});
    }
  }
  sec.tables.push_back(std::move(ops));

  if (!r.overflows.empty()) {
    Table ov{"delayed_overflows", {"step", "layer", "operand", "recipe", "tensor", "saturated", "amax", "scale"}, {}};
    for (const DelayedOverflow& d : r.overflows)
      ov.rows.push_back({opt_int_cell(d.step), Cell(layer_text(d.layer)), Cell(contract::operand_name(d.operand)),
                         Cell(contract::recipe_info(d.recipe).name), Cell(d.tensor),
                         Cell(fmt::format("{} of {}", d.saturated, d.quantized), int64_t(d.saturated)),
                         number_cell(d.amax), number_cell(d.scale)});
    if (r.overflow_count > int64_t(r.overflows.size()))
      sec.notes.push_back(fmt::format("The delayed-scaling table lists the first {} of {}.", r.overflows.size(), r.overflow_count));
    sec.tables.push_back(std::move(ov));
  }
  return sec;
}

namespace {

// Why a step's losses part whatever the tolerance: "finite against NaN", "NaN against finite",
// "opposite infinities".
std::string nonfinite_mismatch_text(const LossPoint& p) {
  const double a = p.a.value_or(0), b = p.b.value_or(0);
  if (std::isinf(a) && std::isinf(b)) return "opposite infinities";
  return std::isfinite(a) ? "finite against " + human_number(b) : human_number(a) + " against finite";
}

}  // namespace

namespace {

// A's forecast next to what fp8 run B's quantize kernels measured.
Section fp8_outcome_section(const Fp8Outcome& f) {
  const std::string b_mode =
      f.trainer == "torchao"
          ? fmt::format("torchao float8, tensorwise scaling: {} forward, {} gradients",
                        contract::recipe_info(f.mode.forward).name,
                        f.mode.gradient ? contract::recipe_info(*f.mode.gradient).name : "unscaled")
          : mptrain_fp8_flags(f.mode);
  Section sec{"fp8", fmt::format("fp8: A's forecast against B's {} (B: {})",
                                 f.trainer == "torchao" ? "casts to fp8" : "quantize kernels", b_mode),
              {}, {}, {}};
  const bool b_counted_saturation =
      std::any_of(f.rows.begin(), f.rows.end(), [](const Fp8OutcomeRow& r) { return r.b_saturated.has_value(); });
  sec.notes.push_back(fmt::format(
      "flushed or subnormal, saturated: the shares of the values quantized that became zero or subnormal, and that "
      "saturated at the format's largest value, over the training steps each run traced; rank 1 is the operand that "
      "loses most below the range in that run.{}",
      b_counted_saturation ? ""
                           : " B's quantize kernels did not count what they did (CUDA kernels report nothing, nor did the "
                             "CPU kernels of an older trainer): its flushed values are its 8-bit outputs' zeros less its "
                             "inputs', a 4-bit block holding a NaN or Inf counts as flushed, and saturation is unknown."));
  if (f.trainer == "torchao")
    sec.notes.push_back(
        "B's counts come from its traced statistics: flushed, the fp8 tensor's zeros less the zeros of the tensor cast; "
        "subnormal, the fp8 tensor's; saturated, the values of the scaled tensor a cast to the format overflows.");
  sec.notes.push_back(fmt::format(
      "Step 0: {} operand{} held the same values in both runs (the same statistics); the counts agree exactly for {} of "
      "them.{}",
      f.step0_compared, f.step0_compared == 1 ? "" : "s", f.step0_equal,
      f.step0_equal < f.step0_compared ? " A difference where the operands are the same means the forecast and the "
                                         "kernels disagree on a rule."
                                       : ""));
  sec.extra["step0_compared"] = f.step0_compared;
  sec.extra["step0_equal"] = f.step0_equal;
  Table t{"operands", {"layer", "operand", "recipe", "flushed or subnormal A", "flushed or subnormal B", "saturated A",
                       "saturated B", "rank A", "rank B", "step 0 A", "step 0 B", "step 0"}, {}};
  auto counts = [](const std::optional<uint64_t>& u, const std::optional<uint64_t>& s, const std::optional<uint64_t>& sat) {
    if (!u || !s) return Cell("-", nullptr, false);
    std::string text = fmt::format("{} / {} / {}", *u, *s, sat ? fmt::format("{}", *sat) : "-");
    return Cell(text, text);
  };
  auto rank = [](int r) { return r ? int_cell(r) : Cell("-", nullptr, false); };
  for (const Fp8OutcomeRow& r : f.rows) {
    const char* verdict = r.b_quantized == 0                            ? "not quantized in B"
                          : r.a_quantized == 0                          ? "not forecast in A"
                          : !r.a_step0_underflow || !r.b_step0_underflow ? "no step 0"
                          : !r.step0_same_operand                       ? "operands differ"
                          : r.step0_equal()                             ? "equal"
                                                                        : "DIFFERENT";
    t.rows.push_back({Cell(r.layer.empty() ? "-" : r.layer), Cell(contract::operand_name(r.operand)),
                      Cell(contract::recipe_info(r.recipe).name), percent_cell(r.a_share()), percent_cell(r.b_share()),
                      percent_cell(r.a_saturated_share()), percent_cell(r.b_saturated_share()), rank(r.a_rank),
                      rank(r.b_rank), counts(r.a_step0_underflow, r.a_step0_subnormal, r.a_step0_saturated),
                      counts(r.b_step0_underflow, r.b_step0_subnormal, r.b_step0_saturated), Cell(verdict)});
  }
  sec.notes.push_back(
      "step 0 A, step 0 B: values flushed to zero / made subnormal / saturated in the operand's first launch of step 0.");
  sec.tables.push_back(std::move(t));
  return sec;
}

}  // namespace

std::vector<Section> comparison_sections(const Comparison& c) {
  std::vector<Section> out;
  Section runs{"runs", "Runs (A = source, B = target)", {}, {}, {}};
  Table rt{"runs", {"", "A", "B", "change"}, {}};
  auto opt = [](const std::optional<double>& v) { return number_cell(v); };
  rt.rows.push_back({Cell("trace"), Cell(c.a.path), Cell(c.b.path), Cell("")});
  rt.rows.push_back({Cell("precision"), Cell(c.a.precision.empty() ? "-" : c.a.precision),
                     Cell(c.b.precision.empty() ? "-" : c.b.precision), Cell("")});
  rt.rows.push_back({Cell("steps"), int_cell(c.a_steps), int_cell(c.b_steps), Cell("")});
  // A run whose loss went NaN/Inf says so beside its last finite loss (and there is no change to show).
  auto final_loss = [&](const RunSummary& s) {
    if (s.nonfinite_loss_steps == 0) return opt(s.final_loss);
    return Cell(final_loss_text(s), s.final_loss ? nlohmann::json(*s.final_loss) : nlohmann::json());
  };
  rt.rows.push_back({Cell("final loss"), final_loss(c.a), final_loss(c.b), opt(c.final_loss_delta)});
  auto acc = [](const RunSummary& s) { return s.test_accuracy ? s.test_accuracy : s.final_train_accuracy; };
  rt.rows.push_back({Cell(c.a.test_accuracy && c.b.test_accuracy ? "test accuracy" : "train accuracy"), accuracy_cell(acc(c.a)),
                     accuracy_cell(acc(c.b)),
                     c.accuracy_delta ? Cell(human_points(*c.accuracy_delta), *c.accuracy_delta) : Cell("-", nullptr)});
  rt.rows.push_back({Cell("non-finite outputs"), int_cell(c.a.nonfinite_tensors), int_cell(c.b.nonfinite_tensors), Cell("")});
  runs.tables.push_back(std::move(rt));
  out.push_back(std::move(runs));

  Section mem{"memory", "Memory (at each run's peak)", {}, {}, {}};
  // B against A: a percentage, or the difference in bytes against a zero or tiny base.
  mem.notes.push_back(fmt::format("change: B against A, in percent, or in bytes where A holds less than {} or under 1% of B.",
                                  human_bytes(kMinPercentBaseBytes)));
  Table mt{"memory", {"category", "A", "B", "change", "A own max", "B own max", "own max change"}, {}};
  auto change = [](const MemoryDelta& d) { return Cell(change_text(d), d.b - d.a); };
  for (size_t i = 0; i < c.memory.size(); ++i) {
    const auto& d = c.memory[i];
    std::vector<Cell> row{Cell(d.category), bytes_cell(d.a), bytes_cell(d.b), change(d)};
    if (i > 0 && i - 1 < c.memory_max_live.size()) {
      const auto& m = c.memory_max_live[i - 1];
      row.push_back(bytes_cell(m.a));
      row.push_back(bytes_cell(m.b));
      row.push_back(change(m));
    } else {
      row.insert(row.end(), {Cell(""), Cell(""), Cell("")});
    }
    mt.rows.push_back(std::move(row));
  }
  mem.tables.push_back(std::move(mt));
  out.push_back(std::move(mem));

  Section loss{"loss", "Loss curves", {}, {}, {}};
  loss.notes.push_back(fmt::format("Aligned on the {} step numbers present in both runs (A has {} steps, B has {}).",
                                   c.loss_curve.size(), c.a_steps, c.b_steps));
  const auto mismatch = std::find_if(c.loss_curve.begin(), c.loss_curve.end(),
                                     [](const LossPoint& p) { return p.nonfinite_mismatch; });
  const size_t mismatch_index = static_cast<size_t>(mismatch - c.loss_curve.begin());
  if (c.diverged_to_nonfinite && mismatch != c.loss_curve.end()) {
    loss.notes.push_back(fmt::format("The curves first part at step {}: {}.", *c.first_divergent_step,
                                     nonfinite_mismatch_text(*mismatch)));
  } else if (c.first_divergent_step) {
    loss.notes.push_back(fmt::format("The curves first part by more than {} (relative) at step {}.",
                                     human_percent(c.loss_tolerance), *c.first_divergent_step));
  } else if (!c.loss_curve.empty()) {
    loss.notes.push_back(fmt::format("The curves stay within {} (relative) at every common step.", human_percent(c.loss_tolerance)));
  }
  if (mismatch != c.loss_curve.end()) {
    std::string note = fmt::format("At step {} the loss is {} in A and {} in B.", mismatch->step,
                                   human_number(mismatch->a.value_or(0)), human_number(mismatch->b.value_or(0)));
    const bool a_finite = std::isfinite(mismatch->a.value_or(0)), b_finite = std::isfinite(mismatch->b.value_or(0));
    if (a_finite != b_finite) {
      const auto after = mismatch + 1;
      const auto nonfinite_after = std::count_if(after, c.loss_curve.end(), [&](const LossPoint& p) {
        return !std::isfinite((a_finite ? p.b : p.a).value_or(0));
      });
      if (after != c.loss_curve.end())
        note += fmt::format(" {} loss is non-finite at {} of the {} common steps after it.", a_finite ? "B's" : "A's",
                            nonfinite_after, c.loss_curve.end() - after);
    }
    loss.notes.push_back(std::move(note));
  }
  double worst = 0;
  for (const auto& p : c.loss_curve) worst = std::max(worst, p.relative_difference.value_or(0));
  loss.extra["common_steps"] = c.loss_curve.size();
  loss.extra["first_divergent_step"] = c.first_divergent_step ? nlohmann::json(*c.first_divergent_step) : nlohmann::json();
  loss.extra["tolerance"] = c.loss_tolerance;
  loss.extra["max_relative_difference"] = worst;
  // Every common step for CSV and JSON; a person reads all of up to 20, else 10 spread evenly plus
  // the steps the notes name.
  Table lt{"steps", {"step", "loss A", "loss B", "relative difference"}, {}};
  for (const auto& p : c.loss_curve) {
    Cell difference = percent_cell(p.relative_difference);
    if (p.nonfinite_mismatch) difference = Cell(nonfinite_mismatch_text(p), nonfinite_mismatch_text(p), false);
    lt.rows.push_back({int_cell(p.step), opt(p.a), opt(p.b), std::move(difference)});
  }
  const size_t n = c.loss_curve.size();
  if (n > 20) {
    std::set<size_t> shown;
    for (size_t i = 0; i < 10; ++i) shown.insert(i * (n - 1) / 9);
    for (size_t i = 0; i < n; ++i) {
      const auto& p = c.loss_curve[i];
      if ((c.first_divergent_step && p.step == *c.first_divergent_step) || i == mismatch_index) shown.insert(i);
    }
    lt.rows_for_people.emplace(shown.begin(), shown.end());
    loss.notes.push_back(fmt::format("{} of the {} common steps shown; --format csv or json lists every one.",
                                     shown.size(), n));
  }
  if (!lt.rows.empty()) loss.tables.push_back(std::move(lt));
  out.push_back(std::move(loss));

  Section layers{"ranges", "Layer ranges (largest forward output magnitude)", {}, {}, {}};
  layers.notes.push_back(fmt::format("moved: absmax B / absmax A at least {0:g} or at most 1/{0:g} (--move-ratio).",
                                     c.move_ratio));
  Table ly{"layers", {"layer", "absmax A", "absmax B", "B / A", "exponent A", "exponent B", "shift", "moved"}, {}};
  for (const auto& l : c.layers) {
    ly.rows.push_back({Cell(l.layer), number_cell(l.a_absmax), number_cell(l.b_absmax), number_cell(l.ratio),
                       l.a_exponent ? int_cell(*l.a_exponent) : Cell("-", nullptr),
                       l.b_exponent ? int_cell(*l.b_exponent) : Cell("-", nullptr),
                       l.shift ? Cell(fmt::format("{:+d}", *l.shift), *l.shift) : Cell("-", nullptr),
                       Cell(l.moved ? "yes" : "no", l.moved, false)});
  }
  layers.tables.push_back(std::move(ly));
  out.push_back(std::move(layers));

  Section events{"events", "Events in one run only", {}, {}, {}};
  Table et{"events", {"run", "event", "step", "detail"}, {}};
  auto add = [&](const char* run, const std::vector<RunEvent>& list) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (i == 50) {
        events.notes.push_back(fmt::format("{} more in {} (use --format json for all)", list.size() - 50, run));
        break;
      }
      et.rows.push_back({Cell(run), Cell(list[i].kind), opt_int_cell(list[i].step), Cell(list[i].detail)});
    }
  };
  add("A", c.only_in_a);
  add("B", c.only_in_b);
  if (et.rows.empty()) events.notes.push_back("None: both runs had the same non-finite origins, skipped steps and backoffs.");
  events.extra["only_in_a"] = c.only_in_a.size();
  events.extra["only_in_b"] = c.only_in_b.size();
  if (!et.rows.empty()) events.tables.push_back(std::move(et));
  out.push_back(std::move(events));
  if (!c.updates.empty()) out.push_back(updates_comparison_section(c));
  if (c.fp8) {
    out.push_back(fp8_outcome_section(*c.fp8));
  } else if (c.b.precision.rfind("fp8", 0) == 0 || c.a.precision.rfind("fp8", 0) == 0) {
    Section note{"fp8", "fp8", {}, {}, {}};
    note.notes.push_back(
        "No forecast to set beside the fp8 run: give the run traced with `fpscope run --recipes operands` as A and the "
        "fp8 run as B (an fp8 run in delayed scaling with another window than 1024 or 16 steps has no forecast recipe).");
    out.push_back(std::move(note));
  }
  return out;
}

}  // namespace fpscope::cli
