// Comparing two runs, A (source) against B (target), as PopVision compares two reports: memory by
// category with the reduction, accuracy and loss, where the loss curves part, which layers' ranges
// moved, and the events (non-finite origins, skipped steps, backoffs) one run has and the other not.
#include "report_util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace fpscope::analysis {


namespace {

MemoryDelta delta(std::string category, int64_t a, int64_t b) {
  MemoryDelta d{std::move(category), a, b, std::nullopt};
  if (a >= kMinPercentBaseBytes && a >= b / 100) d.reduction_pct = 100.0 * static_cast<double>(a - b) / static_cast<double>(a);
  return d;
}

}  // namespace

std::string change_text(const MemoryDelta& d) {
  if (d.reduction_pct) return human_percent_change(100.0, 100.0 - *d.reduction_pct);
  return human_bytes_delta(d.b - d.a);
}

namespace {

void compare_memory(const Trace& a, const Trace& b, Comparison& c) {
  const MemoryReport ma = memory(a, 0), mb = memory(b, 0);
  c.memory.push_back(delta("peak", ma.peak_bytes, mb.peak_bytes));
  for (int i = 0; i < kCategoryCount; ++i) {
    c.memory.push_back(delta(kCategoryNames[i], ma.by_category[i].at_peak, mb.by_category[i].at_peak));
    c.memory_max_live.push_back(delta(kCategoryNames[i], ma.by_category[i].max_live, mb.by_category[i].max_live));
  }
}

// Steps present in both runs, a NaN loss (stored NULL) included: a run whose loss went NaN or
// infinite parts from one that stayed finite at that step, whatever the tolerance.
void compare_loss(const Trace& a, const Trace& b, double tolerance, Comparison& c) {
  const auto la = scalar_by_step_with_nan(a, "loss"), lb = scalar_by_step_with_nan(b, "loss");
  c.loss_tolerance = tolerance;
  for (const auto& [step, va] : la) {
    auto it = lb.find(step);
    if (it == lb.end()) continue;
    const double vb = it->second;
    LossPoint p{step, va, vb, std::nullopt, false};
    bool parted = false;
    if (std::isfinite(va) && std::isfinite(vb)) {
      const double scale = std::max(std::fabs(va), std::fabs(vb));
      p.relative_difference = scale > 0 ? std::fabs(va - vb) / scale : 0.0;
      parted = *p.relative_difference > tolerance;
    } else {
      // Both NaN, or the same infinity, agree; anything else is a finite value against a
      // non-finite one, or opposite infinities.
      const bool same = (std::isnan(va) && std::isnan(vb)) || va == vb;
      p.nonfinite_mismatch = parted = !same;
    }
    if (!c.first_divergent_step && parted) {
      c.first_divergent_step = step;
      c.diverged_to_nonfinite = p.nonfinite_mismatch;
    }
    c.loss_curve.push_back(p);
  }
}

void compare_layers(const Trace& a, const Trace& b, double move_ratio, Comparison& c) {
  std::map<std::string, LayerShift> layers;
  std::vector<std::string> order;
  // Forward outputs only (the activations view): gradients carry the loss scale, which would hide
  // what the formats did. The phase decides, not the kernel's name, so traces of any producer align.
  auto add = [&](const Trace& t, bool is_a) {
    for (const auto& row : view_ranges(t, RangeView::Activations)) {
      auto [it, inserted] = layers.try_emplace(row.row);
      if (inserted) order.push_back(row.row);
      it->second.layer = row.row;
      auto& absmax = is_a ? it->second.a_absmax : it->second.b_absmax;
      if (row.absmax && (!absmax || *row.absmax > *absmax)) absmax = row.absmax;
      (is_a ? it->second.a_exponent : it->second.b_exponent) = exponent_of(absmax);
    }
  };
  add(a, true);
  add(b, false);
  for (const auto& name : order) {
    LayerShift s = layers[name];
    if (s.a_exponent && s.b_exponent) {
      s.shift = *s.b_exponent - *s.a_exponent;
      s.ratio = *s.b_absmax / *s.a_absmax;
      s.moved = std::max(*s.ratio, 1.0 / *s.ratio) >= move_ratio;
    } else {
      s.moved = s.a_exponent.has_value() != s.b_exponent.has_value();
    }
    c.layers.push_back(std::move(s));
  }
}

std::vector<RunEvent> events_of(const Trace& trace) {
  std::vector<RunEvent> events;
  sql::Statement st(detail::db(trace),
          "SELECT k.step, sk.value, sl.value, n.kind FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id "
          "JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id "
          "WHERE n.origin = 1 AND n.allowed = 0 ORDER BY n.kernel_id");
  std::set<std::optional<int64_t>> seen_steps;
  while (st.step()) {
    auto step = st.opt_i64(0);
    if (!seen_steps.insert(step).second) continue;  // the first origin of each step
    std::string where = st.text(1) + (st.is_null(2) ? "" : " (" + st.text(2) + ")");
    events.push_back({"nonfinite", step, st.text(3) + " first made by " + where});
  }
  // A skipped step says why: which gradient overflowed first, in which layer, at which scale.
  const WhyReport reasons = why(trace);
  std::map<int64_t, std::string> why_skipped;
  for (const Cause& c : reasons.skipped_steps)
    if (c.step) why_skipped[*c.step] = c.summary;
  for (const auto& e : loss_scale(trace).events) {
    if (e.skipped) {
      auto it = e.step ? why_skipped.find(*e.step) : why_skipped.end();
      events.push_back({"skipped_step", e.step,
                        it != why_skipped.end() ? it->second : "found inf/nan at scale " + human_scale(e.scale_before)});
    }
    if (e.event == "backoff") {
      events.push_back({"backoff", e.step, human_scale(e.scale_before) + " -> " + human_scale(e.scale_after)});
    }
  }
  return events;
}

void compare_events(const Trace& a, const Trace& b, Comparison& c) {
  const auto ea = events_of(a), eb = events_of(b);
  auto keys = [](const std::vector<RunEvent>& events) {
    std::set<std::pair<std::string, std::optional<int64_t>>> k;
    for (const auto& e : events) k.insert({e.kind, e.step});
    return k;
  };
  const auto ka = keys(ea), kb = keys(eb);
  for (const auto& e : ea) {
    if (!kb.count({e.kind, e.step})) c.only_in_a.push_back(e);
  }
  for (const auto& e : eb) {
    if (!ka.count({e.kind, e.step})) c.only_in_b.push_back(e);
  }
}

}  // namespace

namespace {

void compare_updates(const Trace& a, const Trace& b, Comparison& c) {
  const LearningReport la = learning(a), lb = learning(b);
  auto shift_of = [&](const std::string& param) -> UpdateShift& {
    for (UpdateShift& u : c.updates)
      if (u.param == param) return u;
    c.updates.push_back(UpdateShift{});
    c.updates.back().param = param;
    return c.updates.back();
  };
  for (const bool in_a : {true, false}) {
    for (const ParamLearning& p : (in_a ? la : lb).params) {
      UpdateShift& u = shift_of(p.param);
      (in_a ? u.a_type : u.b_type) = p.type();
      (in_a ? u.a_lost_share : u.b_lost_share) = p.lost_update_share;
      (in_a ? u.a_ratio : u.b_ratio) = p.update_ratio;
      (in_a ? u.a_flagged : u.b_flagged) = p.flagged;
    }
  }
}

}  // namespace

Comparison compare(const Trace& a, const Trace& b, const CompareOptions& options) {
  Comparison c;
  c.a = summary(a);
  c.b = summary(b);
  c.a_steps = c.a.steps;
  c.b_steps = c.b.steps;
  compare_memory(a, b, c);
  if (c.a.test_accuracy && c.b.test_accuracy) {
    c.accuracy_delta = *c.b.test_accuracy - *c.a.test_accuracy;
  } else if (c.a.final_train_accuracy && c.b.final_train_accuracy) {
    c.accuracy_delta = *c.b.final_train_accuracy - *c.a.final_train_accuracy;
  }
  // The last finite losses are no final losses to subtract when either run's loss went NaN/Inf
  // after them.
  if (c.a.final_loss && c.b.final_loss && c.a.nonfinite_loss_steps == 0 && c.b.nonfinite_loss_steps == 0)
    c.final_loss_delta = *c.b.final_loss - *c.a.final_loss;
  compare_loss(a, b, options.loss_tolerance, c);
  c.move_ratio = options.move_ratio;
  compare_layers(a, b, options.move_ratio, c);
  compare_events(a, b, c);
  c.fp8 = fp8_outcome(a, b);
  compare_updates(a, b, c);
  return c;
}

}  // namespace fpscope::analysis
