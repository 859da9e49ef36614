// The report as typed JSON (report_json.h). Field names follow docs/schema.md and docs/cli.md.
#include "fpscope/report_json.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace fpscope::analysis {
namespace {

using json = nlohmann::ordered_json;  // fields in document order, as docs/cli.md lists them

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json run_json(const RunSummary& s) {
  json config = json::object();
  for (const auto& [k, v] : s.config) config[k] = v;
  return {
      {"command", s.command},
      {"precision", s.precision.empty() ? json(nullptr) : json(s.precision)},
      {"config", config},
      {"end", {{"state", contract::info(s.state).meta.empty() ? json(nullptr) : json(contract::info(s.state).meta)},
               {"label", std::string(contract::label(s.state))},
               {"failure", contract::is_failure(s.state)},
               {"unfinished", contract::is_unfinished(s.state)},
               {"end_reason", s.end_reason.empty() ? json(nullptr) : json(s.end_reason)},
               {"exit_code", opt(s.exit_status)},
               {"signal", s.signal_name.empty() ? json(nullptr) : json(s.signal_name)},
               {"signal_number", opt(s.signal)},
               {"trap", s.trap.empty() ? json(nullptr) : json(s.trap)}}},
      {"steps", s.steps},
      {"ranks", s.ranks},
      {"first_step", opt(s.first_step)},
      {"last_step", opt(s.last_step)},
      {"tail_step", opt(s.tail_step)},
      {"incomplete", s.incomplete.empty() ? json(nullptr) : json(s.incomplete)},
      {"duration_ns", s.start_ns && s.end_ns ? json(*s.end_ns - *s.start_ns) : json(nullptr)},
      {"kernels", s.kernels},
      {"measured_kernels", s.sampled_kernels},
      {"tracing_own_ms", opt(s.tracing_own_ms)},
      {"collector_cpu_ms", opt(s.collector_cpu_ms)},
      {"tracing_failure", s.tracing_failure.empty() ? json(nullptr) : json(s.tracing_failure)},
      {"tensors", s.tensors},
      {"nonfinite_tensors", s.nonfinite_tensors},
      {"allowed_nonfinite_tensors", s.allowed_nonfinite_tensors},
      {"memory_events", s.memory_events},
      {"final_loss", opt(s.final_loss)},
      {"final_loss_step", opt(s.final_loss_step)},
      {"nonfinite_loss_steps", s.nonfinite_loss_steps},
      {"first_nonfinite_loss_step", opt(s.first_nonfinite_loss_step)},
      {"final_train_accuracy_pct", opt(s.final_train_accuracy)},
      {"test_accuracy_pct", opt(s.test_accuracy)},
  };
}

json event_json(const NonfiniteEvent& e) {
  return {{"kernel_id", e.kernel_id},   {"kernel", e.kernel},           {"op", e.op.empty() ? json(nullptr) : json(e.op)},
          {"layer", opt(e.layer)},      {"phase", opt(e.phase)},        {"step", opt(e.step)},
          {"tensor_id", e.tensor_id},   {"tensor", e.tensor},           {"dtype", e.dtype},
          {"shape", json::parse(e.shape.empty() ? "null" : e.shape, nullptr, false)},
          {"kind", e.kind},             {"first_index", e.first_index}, {"first_bits", e.first_bits},
          {"origin", e.origin},         {"nan", e.nan},                 {"pos_inf", e.pos_inf},
          {"neg_inf", e.neg_inf},       {"rank", e.rank},               {"inputs_finite", opt(e.inputs_finite)}};
}

json cause_json(const Cause& c) {
  return {{"kind", cause_kind_name(c.kind)}, {"summary", c.summary}, {"advice", c.advice},
          {"kernel_id", opt(c.kernel_id)},   {"tensor_id", opt(c.tensor_id)}, {"step", opt(c.step)}};
}

json why_json(const WhyReport& r) {
  json chain = json::array(), causes = json::array(), skipped = json::array();
  for (const CauseLink& l : r.chain) {
    chain.push_back({{"depth", l.depth},
                     {"reader_kernel_id", l.reader_kernel_id},
                     {"tensor", l.tensor},
                     {"tensor_uid", opt(l.tensor_uid)},
                     {"writer_kernel_id", opt(l.writer_kernel_id)},
                     {"writer_tensor_id", opt(l.writer_tensor_id)},
                     {"writer_kernel", l.writer_kernel.empty() ? json(nullptr) : json(l.writer_kernel)},
                     {"writer_layer", opt(l.writer_layer)},
                     {"writer_phase", opt(l.writer_phase)},
                     {"writer_step", opt(l.writer_step)},
                     {"absmax_before", opt(l.absmax_before)},
                     {"absmax_after", opt(l.absmax_after)},
                     {"min_nonzero_before", opt(l.min_nonzero_before)},
                     {"min_nonzero_after", opt(l.min_nonzero_after)},
                     {"zero_before", l.zero_before},
                     {"zero_after", l.zero_after},
                     {"count", l.count},
                     {"jump_log2", opt(l.jump_log2)},
                     {"note", l.note}});
  }
  for (const Cause& c : r.causes) causes.push_back(cause_json(c));
  for (const Cause& c : r.skipped_steps) skipped.push_back(cause_json(c));
  json forecasts = json::array();
  for (const RangeForecast& f : r.forecasts) {
    forecasts.push_back({{"view", range_view_info(f.view).key}, {"row", f.row}, {"upward", f.upward},
                         {"model", growth_model_name(f.model)},
                         {"log2_per_100_steps", f.log2_per_100_steps}, {"per_step", f.per_step}, {"points", f.points},
                         {"first_step", f.first_step}, {"last_step", f.last_step}, {"log2_now", f.log2_now},
                         {"crossing_step", f.crossing_step}, {"summary", f.summary}});
  }
  return {{"origin", r.origin ? event_json(*r.origin) : json(nullptr)},
          {"forecasts", forecasts},
          {"chain", chain},
          {"ordinary_links", r.ordinary_links},
          {"causes", causes},
          {"skipped_steps", skipped}};
}


json nonfinite_json(const NonfiniteReport& r) {
  json by_kernel = json::array();
  for (const auto& k : r.by_kernel) {
    by_kernel.push_back({{"kernel", k.kernel}, {"layer", opt(k.layer)}, {"tensors", k.tensors}, {"origins", k.origins},
                         {"nan", k.nan}, {"pos_inf", k.pos_inf}, {"neg_inf", k.neg_inf}, {"first_step", opt(k.first_step)}});
  }
  return {{"nan", r.nan},
          {"pos_inf", r.pos_inf},
          {"neg_inf", r.neg_inf},
          {"tensors", r.tensors},
          {"origins", r.origins},
          {"first_step", opt(r.first_step)},
          {"first_origin", r.first_origin ? event_json(*r.first_origin) : json(nullptr)},
          {"by_kernel", by_kernel},
          {"intended", intended_json(r.intended)}};
}

json loss_scale_json(const LossScaleReport& r) {
  return {{"used", r.used},
          {"updates", r.updates},
          {"skipped_steps", r.skipped_steps},
          {"skipped_step_numbers", r.skipped_step_numbers},
          {"growths", r.growths},
          {"backoffs", r.backoffs},
          {"initial_scale", opt(r.initial_scale)},
          {"final_scale", opt(r.final_scale)},
          {"min_scale", opt(r.min_scale)},
          {"max_scale", opt(r.max_scale)}};
}

json memory_json(const MemoryReport& m) {
  json categories = json::array();
  for (const auto& c : m.by_category) {
    categories.push_back({{"category", c.category}, {"at_peak_bytes", c.at_peak}, {"max_live_bytes", c.max_live},
                          {"allocated_bytes", c.allocated}, {"allocations", c.allocations}});
  }
  return {{"peak_bytes", m.peak_bytes},
          {"peak_ns", opt(m.peak_ns)},
          {"peak_step", opt(m.peak_step)},
          {"live_at_end_bytes", m.live_at_end},
          {"events", m.events},
          {"by_category", categories}};
}

json ranges_json(RangeView view, const std::vector<ViewRangeRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    out.push_back({{"row", r.row}, {"steps", r.steps}, {"absmax", opt(r.absmax)}, {"min_nonzero", opt(r.min_nonzero)},
                   {"headroom_f16_log2", opt(r.headroom_f16_log2)}, {"footroom_f16_log2", opt(r.footroom_f16_log2)},
                   {"nonfinite", r.nonfinite}});
  }
  const RangeViewInfo& info = range_view_info(view);
  return {{"view", info.key}, {"rows_are", info.rows}, {"rows", out}};
}

json ranks_json(const RanksReport& r) {
  json rows = json::array();
  for (const auto& k : r.ranks) {
    rows.push_back({{"rank", k.rank}, {"processes", k.processes}, {"pid", opt(k.pid)}, {"host", k.host},
                    {"ended", opt(k.ended)}, {"kernels", k.kernels}, {"steps", k.steps},
                    {"nonfinite_tensors", k.nonfinite_tensors}, {"first_origin_kernel_id", opt(k.first_origin_kernel_id)},
                    {"first_origin_step", opt(k.first_origin_step)}, {"first_origin_ns", opt(k.first_origin_ns)},
                    {"memory_peak_bytes", opt(k.memory_peak_bytes)}, {"loss_scale_events", k.loss_scale_events},
                    {"skipped_steps", k.skipped_steps}, {"slowest_steps", k.slowest_steps},
                    {"held_back_ns", k.held_back_ns}});
  }
  return {{"ranks", rows},
          {"first_origin_rank", opt(r.first_origin_rank)},
          {"first_origin_lead_ns", opt(r.first_origin_lead_ns)},
          {"same_host", r.same_host},
          {"loss_scale_steps_compared", r.loss_scale_steps_compared},
          {"loss_scale_disagreements", r.loss_scale_disagreements},
          {"first_disagreement_step", opt(r.first_disagreement_step)}};
}

std::string text(const json& doc) { return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

}  // namespace

json fp8_json(const Fp8Readiness& r) {
  // +Inf SQNR (nothing lost) as the string "inf", as the trace's numbers are elsewhere.
  const auto db = [](const std::optional<double>& v) -> json {
    if (!v) return nullptr;
    if (std::isinf(*v)) return "inf";
    return *v;
  };
  const auto recipe_name = [](Recipe x) { return contract::recipe_info(x).name; };
  json operands = json::array();
  for (const OperandReadiness& o : r.operands) {
    json recipes = json::array();
    for (int i = 0; i < kRecipeCount; ++i) {
      const RecipeFigures& f = o.recipes[std::size_t(i)];
      if (f.tensors == 0) continue;
      recipes.push_back({{"recipe", contract::kRecipes[std::size_t(i)].name}, {"tensors", f.tensors},
                         {"quantized", f.quantized}, {"underflow", f.underflow}, {"subnormal", f.subnormal},
                         {"saturated", f.saturated}, {"blocks", f.blocks}, {"blocks_lost", f.blocks_lost},
                         {"blocks_nonfinite", f.blocks_nonfinite}, {"underflow_share", opt(f.underflow_share())},
                         {"saturated_share", opt(f.saturated_share())}, {"sse", f.sse}, {"signal", f.signal},
                         {"sqnr_db", db(f.sqnr_db())}, {"worst_sqnr_db", db(f.worst_sqnr_db)},
                         {"worst_step", opt(f.worst_step)}, {"fits", o.misfit[std::size_t(i)] == Misfit::None},
                         {"misfit", o.misfit[std::size_t(i)] == Misfit::None ? json(nullptr)
                                                                              : json(misfit_name(o.misfit[std::size_t(i)]))}});
    }
    operands.push_back({{"layer", o.layer}, {"operand", contract::operand_name(o.operand)}, {"tensors", o.tensors},
                        {"recipes", recipes}});
  }
  json layers = json::array();
  for (const LayerReadiness& l : r.layers) {
    json fitting = json::array();
    for (Recipe x : l.fitting) fitting.push_back(recipe_name(x));
    layers.push_back({{"layer", l.layer}, {"keep_high_precision", l.keep_high_precision},
                      {"best_8bit", l.best_8bit ? json(recipe_name(*l.best_8bit)) : json(nullptr)},
                      {"fitting", fitting},
                      {"closest", l.keep_high_precision && l.closest ? json(recipe_name(*l.closest)) : json(nullptr)},
                      {"failing_operand", l.failing_operand ? json(contract::operand_name(*l.failing_operand)) : json(nullptr)},
                      {"failure", l.failure == Misfit::None ? json(nullptr) : json(misfit_name(l.failure))},
                      {"severity", l.severity}});
  }
  json overflows = json::array();
  for (const DelayedOverflow& d : r.overflows)
    overflows.push_back({{"step", opt(d.step)}, {"layer", d.layer}, {"operand", contract::operand_name(d.operand)},
                         {"recipe", recipe_name(d.recipe)}, {"kernel_id", d.kernel_id}, {"tensor", d.tensor},
                         {"saturated", d.saturated}, {"quantized", d.quantized}, {"amax", opt(d.amax)},
                         {"scale", opt(d.scale)}});
  const FitThresholds& t = r.thresholds;
  return {{"forecast", r.forecast},
          {"asked_without_operands", r.asked_without_operands},
          {"thresholds", {{"max_underflow_share", t.max_underflow_share}, {"max_saturated_share", t.max_saturated_share},
                          {"min_sqnr_db_e4m3", t.min_sqnr_db_e4m3}, {"min_sqnr_db_e5m2", t.min_sqnr_db_e5m2},
                          {"min_sqnr_db_e2m1", t.min_sqnr_db_e2m1}}},
          {"layers", layers},
          {"operands", operands},
          {"delayed_overflows", overflows},
          {"delayed_overflow_count", r.overflow_count}};
}

json learning_json(const LearningReport& r) {
  json params = json::array();
  for (const ParamLearning& p : r.params)
    params.push_back({{"param", p.param}, {"layer", p.layer}, {"dtype", p.dtype}, {"master", p.master},
                      {"nonzero_from", p.nonzero_from_gradient ? "gradient" : "update"},
                      {"steps", p.steps}, {"elements", p.elements}, {"changed", p.changed}, {"nonzero", opt(p.nonzero)},
                      {"lost", opt(p.lost)}, {"lost_update_share", opt(p.lost_update_share)},
                      {"lost_update_magnitude_share", opt(p.lost_magnitude_share)},
                      {"update_ratio", opt(p.update_ratio)}, {"computed_ratio", opt(p.computed_ratio)},
                      {"first_lost_step", opt(p.first_lost_step)}, {"flagged", p.flagged},
                      {"advice", p.flagged ? json(p.advice) : json(nullptr)}});
  json layers = json::array();
  for (const LayerLearning& l : r.layers)
    layers.push_back({{"layer", l.layer}, {"params", l.params}, {"nonzero", opt(l.nonzero)}, {"lost", opt(l.lost)},
                      {"lost_update_share", opt(l.lost_update_share)},
                      {"lost_update_magnitude_share", opt(l.lost_magnitude_share)},
                      {"update_ratio", opt(l.update_ratio)}, {"computed_ratio", opt(l.computed_ratio)},
                      {"flagged", l.flagged}});
  json stores = json::array();
  for (const StoreLoss& s : r.stores)
    stores.push_back({{"tensor", s.tensor}, {"layer", s.layer}, {"phase", s.phase}, {"kernel", s.kernel},
                      {"dtype", s.dtype}, {"stores", s.stores}, {"results", s.results}, {"flushed", s.flushed},
                      {"subnormal", s.subnormal}, {"overflowed", s.overflowed},
                      {"flushed_share", opt(s.flushed_share())}, {"first_flush_step", opt(s.first_flush_step)},
                      {"worst_step", opt(s.worst_step)},
                      {"worst_flushed_share", s.worst_step ? json(s.worst_flushed_share) : json(nullptr)},
                      {"worst_loss_scale", opt(s.worst_loss_scale)}, {"flagged", s.flagged},
                      {"advice", s.flagged ? json(s.advice) : json(nullptr)}});
  json points = json::array();
  for (const UpdatePoint& p : r.points)
    points.push_back({{"param", p.param}, {"step", p.step}, {"update_ratio", opt(p.update_ratio)},
                      {"computed_ratio", opt(p.computed_ratio)}, {"lost_update_share", opt(p.lost_update_share)}});
  json forecasts = json::array();
  for (const UpdateForecast& f : r.forecasts)
    forecasts.push_back({{"param", f.param}, {"layer", f.layer}, {"dtype", f.dtype},
                         {"ratio", f.computed ? "computed" : "applied"}, {"spacing_log2", f.spacing_log2},
                         {"model", growth_model_name(f.model)},
                         {"log2_per_100_steps", f.log2_per_100_steps}, {"per_step", f.per_step},
                         {"points", f.points}, {"first_step", f.first_step}, {"last_step", f.last_step},
                         {"log2_ratio_now", f.log2_now}, {"crossing_step", f.crossing_step},
                         {"summary", f.summary},
                         {"advice", f.advice}});
  const LearningThresholds& t = r.thresholds;
  return {{"measured_updates", r.measured_updates},
          {"measured_stores", r.measured_stores},
          {"thresholds", {{"lost_update_share", t.lost_update_share}, {"flushed_share", t.flushed_share},
                          {"small_step_ratio", t.small_step_ratio}}},
          {"loss", {{"steps", r.loss.steps}, {"first", opt(r.loss.first)}, {"last", opt(r.loss.last)},
                    {"early_mean", opt(r.loss.early_mean)}, {"late_mean", opt(r.loss.late_mean)},
                    {"relative_change", opt(r.loss.relative_change())}}},
          {"lr", {{"first_step", opt(r.lr.first_step)}, {"first", opt(r.lr.first)}, {"last_step", opt(r.lr.last_step)},
                  {"last", opt(r.lr.last)}}},
          {"layers", layers},
          {"params", params},
          {"stores", stores},
          {"update_ratios", points},
          {"forecasts", forecasts}};
}

ReportData report_data(const Trace& trace, RangeView view) {
  ReportData d;
  d.summary = summary(trace);
  d.nonfinite = nonfinite(trace);
  d.why = why(trace);
  d.loss_scale = loss_scale(trace);
  d.memory = memory(trace);
  d.ranks = ranks(trace);
  d.ranges = std::make_pair(view, view_ranges(trace, view));
  d.fp8 = fp8_readiness(trace);
  d.learning = learning(trace);
  return d;
}

std::string report_json(const ReportData& d) {
  json doc = {{"fpscope_report", kReportJsonVersion},
              {"trace", d.summary.path},
              {"schema_version", d.summary.schema_version},
              {"run", run_json(d.summary)}};
  if (d.nonfinite) doc["nonfinite"] = nonfinite_json(*d.nonfinite);
  if (d.why) doc["why"] = why_json(*d.why);
  if (d.loss_scale) doc["loss_scale"] = loss_scale_json(*d.loss_scale);
  if (d.memory) doc["memory"] = memory_json(*d.memory);
  if (d.ranks) doc["ranks"] = ranks_json(*d.ranks);
  if (d.ranges) doc["ranges"] = ranges_json(d.ranges->first, d.ranges->second);
  if (d.fp8) doc["fp8"] = fp8_json(*d.fp8);
  if (d.learning) doc["learning"] = learning_json(*d.learning);
  return text(doc);
}

namespace {

json fp8_outcome_json(const Fp8Outcome& f) {
  json rows = json::array();
  for (const Fp8OutcomeRow& r : f.rows) {
    rows.push_back({{"layer", r.layer}, {"operand", contract::operand_name(r.operand)},
                    {"recipe", contract::recipe_info(r.recipe).name},
                    {"source", {{"quantized", r.a_quantized}, {"underflow", r.a_underflow}, {"subnormal", r.a_subnormal},
                                {"saturated", r.a_saturated}, {"rank", r.a_rank ? json(r.a_rank) : json(nullptr)},
                                {"step0_underflow", opt(r.a_step0_underflow)}, {"step0_subnormal", opt(r.a_step0_subnormal)},
                                {"step0_saturated", opt(r.a_step0_saturated)}}},
                    {"target", {{"quantized", r.b_quantized}, {"underflow", r.b_underflow}, {"subnormal", r.b_subnormal},
                                {"saturated", opt(r.b_saturated)}, {"rank", r.b_rank ? json(r.b_rank) : json(nullptr)},
                                {"step0_underflow", opt(r.b_step0_underflow)}, {"step0_subnormal", opt(r.b_step0_subnormal)},
                                {"step0_saturated", opt(r.b_step0_saturated)}}},
                    {"step0_same_operand", r.step0_same_operand}, {"step0_equal", r.step0_equal()}});
  }
  return {{"trainer", f.trainer}, {"fp8_recipe", f.mode.recipe}, {"fp8_format", f.mode.format},
          {"step0_compared", f.step0_compared},
          {"step0_equal", f.step0_equal}, {"operands", rows}};
}

}  // namespace

std::string compare_json(const Comparison& c) {
  auto deltas = [](const std::vector<MemoryDelta>& v) {
    json out = json::array();
    for (const auto& m : v) {
      out.push_back({{"category", m.category}, {"source_bytes", m.a}, {"target_bytes", m.b},
                     {"difference_bytes", m.b - m.a}, {"reduction_pct", opt(m.reduction_pct)}});
    }
    return out;
  };
  json layers = json::array();
  for (const auto& l : c.layers) {
    layers.push_back({{"layer", l.layer}, {"source_absmax", opt(l.a_absmax)}, {"target_absmax", opt(l.b_absmax)},
                      {"source_exponent", opt(l.a_exponent)}, {"target_exponent", opt(l.b_exponent)},
                      {"shift", opt(l.shift)}, {"ratio", opt(l.ratio)}, {"moved", l.moved}});
  }
  auto events = [](const std::vector<RunEvent>& v) {
    json out = json::array();
    for (const auto& e : v) out.push_back({{"kind", e.kind}, {"step", opt(e.step)}, {"detail", e.detail}});
    return out;
  };
  // A NaN loss is null, as in the trace; an infinite one "+Inf" or "-Inf".
  auto loss_value = [](const std::optional<double>& v) -> json {
    if (!v || std::isnan(*v)) return nullptr;
    if (std::isinf(*v)) return *v > 0 ? "+Inf" : "-Inf";
    return *v;
  };
  json loss = json::array();
  for (const auto& p : c.loss_curve) {
    loss.push_back({{"step", p.step}, {"source", loss_value(p.a)}, {"target", loss_value(p.b)},
                    {"relative_difference", opt(p.relative_difference)}, {"nonfinite_mismatch", p.nonfinite_mismatch}});
  }
  json updates = json::array();
  for (const UpdateShift& u : c.updates)
    updates.push_back({{"param", u.param}, {"source_type", opt(u.a_type)}, {"target_type", opt(u.b_type)},
                       {"source_lost_update_share", opt(u.a_lost_share)},
                       {"target_lost_update_share", opt(u.b_lost_share)}, {"source_update_ratio", opt(u.a_ratio)},
                       {"target_update_ratio", opt(u.b_ratio)}, {"source_flagged", u.a_flagged},
                       {"target_flagged", u.b_flagged}});
  json doc = {{"fpscope_compare", kReportJsonVersion},
              {"source", {{"trace", c.a.path}, {"run", run_json(c.a)}}},
              {"target", {{"trace", c.b.path}, {"run", run_json(c.b)}}},
              {"memory_at_peak", deltas(c.memory)},
              {"memory_max_live", deltas(c.memory_max_live)},
              {"accuracy_delta_points", opt(c.accuracy_delta)},
              {"final_loss_delta", opt(c.final_loss_delta)},
              {"loss_tolerance", c.loss_tolerance},
              {"source_steps", c.a_steps},
              {"target_steps", c.b_steps},
              {"first_divergent_step", opt(c.first_divergent_step)},
              {"loss", loss},
              {"layers", layers},
              {"only_in_source", events(c.only_in_a)},
              {"only_in_target", events(c.only_in_b)},
              {"fp8_outcome", c.fp8 ? fp8_outcome_json(*c.fp8) : json(nullptr)},
              {"updates", updates}};
  return text(doc);
}

json intended_json(const IntendedNonfinite& r) {
  return {{"tensors", r.tensors}, {"nan", r.nan}, {"pos_inf", r.pos_inf}, {"neg_inf", r.neg_inf}, {"made_by", r.made_by}};
}

}  // namespace fpscope::analysis
