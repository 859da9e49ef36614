// Advice from observed ranges: which of the trainer's ops must stay fp32 and which are safe in the
// 16-bit format, and whether (and from what scale) loss scaling is needed. The output is HMP-style
// op list files that `mptrain --fp32-ops FILE --bf16-ops FILE` reads.
#include "report_util.h"

#include <algorithm>
#include <map>

namespace fpscope::analysis {


namespace {

bool is_forward(const std::string& kernel) {
  return kernel.size() > 8 && kernel.compare(kernel.size() - 8, 8, "_forward") == 0;
}

// Forward outputs of each op, merged over its layers and kernels.
std::map<std::string, RangeRow> forward_ranges_by_op(const Trace& trace) {
  std::map<std::string, RangeRow> ops;
  // Side outputs too: a normalisation whose saved reciprocal deviation overflows must stay wide.
  for (const auto& row : ranges(trace, RangeGrouping::LayerKernel, RoleFilter::Outputs, SideOutputs::Included)) {
    if (row.op.empty() || !is_forward(row.kernel)) continue;
    auto [it, inserted] = ops.try_emplace(row.op, row);
    if (inserted) continue;
    RangeRow& m = it->second;
    m.tensors += row.tensors;
    m.elements += row.elements;
    m.nan += row.nan;
    m.inf += row.inf;
    if (row.absmax && (!m.absmax || *row.absmax > *m.absmax)) m.absmax = row.absmax;
    if (row.min_nonzero && (!m.min_nonzero || *row.min_nonzero < *m.min_nonzero)) m.min_nonzero = row.min_nonzero;
    for (int f = 0; f < kFormatCount; ++f) {
      FormatOutcome& o = m.formats[f];
      const FormatOutcome& r = row.formats[f];
      if (!r.measured) continue;
      o.measured = true;
      o.overflow += r.overflow;
      o.underflow += r.underflow;
      o.subnormal += r.subnormal;
      o.near_max += r.near_max;
    }
  }
  for (auto& [op, m] : ops) {
    for (auto& o : m.formats) {
      if (!o.measured || m.elements == 0) continue;
      o.overflow_share = static_cast<double>(o.overflow) / m.elements;
      o.underflow_share = static_cast<double>(o.underflow) / m.elements;
    }
  }
  return ops;
}

std::map<std::string, std::pair<int64_t, std::optional<int64_t>>> origins_by_op(const Trace& trace) {
  std::map<std::string, std::pair<int64_t, std::optional<int64_t>>> origins;
  // Forward origins only: a backward kernel that overflows is a loss-scale matter (advise_loss_scale).
  for (const auto& row : nonfinite(trace, 0).by_kernel) {
    if (row.op.empty() || row.origins == 0 || !is_forward(row.kernel)) continue;
    auto& [count, step] = origins[row.op];
    count += row.origins;
    if (row.first_step && (!step || *row.first_step < *step)) step = row.first_step;
  }
  return origins;
}

OpAdvice decide(const std::string& op, const RangeRow* row, std::pair<int64_t, std::optional<int64_t>> origins,
                const AdviceOptions& options) {
  const FormatLimits& limits = format_limits(options.target);
  OpAdvice a;
  a.op = op;
  a.nonfinite_origins = origins.first;
  if (origins.first > 0) {
    a.placement = OpPlacement::Fp32;
    a.reason = fmt::format("made NaN/Inf from finite inputs {} times (first at step {})", origins.first,
                           origins.second ? std::to_string(*origins.second) : "?");
  }
  if (!row) {
    if (a.reason.empty()) {
      a.reason = "not seen in this trace; placed as autocast does";
      const bool reduction = op == "group_norm" || op == "log_softmax" || op == "nll_loss";
      a.placement = reduction ? OpPlacement::Fp32 : OpPlacement::LowPrecision;
    }
    return a;
  }
  a.observed = true;
  a.absmax = row->absmax;
  a.min_nonzero = row->min_nonzero;
  if (a.placement == OpPlacement::Fp32) return a;
  const FormatOutcome& out = row->formats[static_cast<int>(options.target)];
  const double headroom = row->absmax && *row->absmax > 0 ? std::log2(limits.max_finite / *row->absmax) : 1e9;
  const double underflow = out.measured ? out.underflow_share : 0.0;
  a.placement = OpPlacement::Fp32;
  if ((out.measured && out.overflow > 0) || headroom < 0) {
    a.reason = fmt::format("absmax {} overflows {} (max {}): {} values", human_optional(row->absmax), limits.name,
                           human_number(limits.max_finite), out.overflow);
  } else if (headroom < options.headroom_log2) {
    a.reason = fmt::format("absmax {} is within 2^{:.1f} of {}'s max {}", human_optional(row->absmax), headroom,
                           limits.name, human_number(limits.max_finite));
  } else if (underflow > options.underflow_share) {
    a.reason = fmt::format("{} of its values flush to zero in {} (smallest nonzero {})", human_percent(underflow),
                           limits.name, human_optional(row->min_nonzero));
  } else {
    a.placement = OpPlacement::LowPrecision;
    a.reason = fmt::format("safe in {}: absmax {} leaves 2^{:.1f} headroom, {} flush to zero", limits.name,
                           human_optional(row->absmax), headroom, human_percent(underflow));
  }
  return a;
}

// Gradient magnitudes with the loss scale divided out, per step, from backward outputs.
struct GradientRange {
  std::optional<double> smallest, largest;
  int64_t nonfinite = 0;           // NaN/Inf values among backward outputs
  std::optional<double> max_scale; // the largest loss scale the run used
};

// The scale of a static run, from the trainer's configuration ("static:N").
std::optional<double> static_scale(const Trace& trace) {
  const auto text = trace.meta_value("config.loss_scale");
  if (!text || text->rfind("static:", 0) != 0) return std::nullopt;
  try {
    return std::stod(text->substr(7));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

GradientRange unscaled_gradients(const Trace& trace) {
  std::map<int64_t, double> scale;
  std::optional<double> fixed = static_scale(trace);
  GradientRange g;
  g.max_scale = fixed;
  for (const auto& e : loss_scale(trace).events) {
    if (e.step) scale.try_emplace(*e.step, e.scale_before);
    g.max_scale = std::max(g.max_scale.value_or(0), e.scale_before);
  }
  sql::Statement st(detail::db(trace),
          "SELECT r.step, min(r.min_nonzero), max(r.absmax), sum(r.nan + r.inf) FROM summary_layer_steps r "
          "JOIN strings sp ON sp.id = r.phase_id WHERE sp.value = ?1 GROUP BY r.step");
  st.bind(1, std::string_view(contract::kPhaseBackward));
  while (st.step()) {
    g.nonfinite += st.i64(3);
    double s = fixed.value_or(1.0);
    if (!st.is_null(0)) {
      auto it = scale.find(st.i64(0));
      if (it != scale.end() && it->second > 0) s = it->second;
    }
    if (auto v = st.opt_f64(1); v && *v > 0) g.smallest = std::min(g.smallest.value_or(*v / s), *v / s);
    if (auto v = st.opt_f64(2); v && *v > 0) g.largest = std::max(g.largest.value_or(*v / s), *v / s);
  }
  return g;
}

LossScaleAdvice advise_loss_scale(const Trace& trace, Format target) {
  LossScaleAdvice advice;
  const FormatLimits& limits = format_limits(target);
  const GradientRange g = unscaled_gradients(trace);
  if (!g.smallest || !g.largest) {
    advice.reason = "no backward outputs in this trace: nothing to base a loss scale on";
    return advice;
  }
  // Lift the smallest gradient to the format's smallest normal value, but keep the largest at least
  // a factor 2^4 below its max so a growing scale does not overflow at once.
  const double lift = std::ceil(std::log2(limits.min_normal / *g.smallest));
  const double cap = std::floor(std::log2(limits.max_finite / *g.largest)) - 4;
  if (g.nonfinite > 0 && g.max_scale && *g.max_scale > 1) {
    // The scale was too high: gradients overflowed. Start below what the finite gradients allow.
    advice.needed = true;
    advice.dynamic = true;
    advice.initial_scale = std::ldexp(1.0, static_cast<int>(std::max(0.0, cap)));
    advice.reason = fmt::format(
        "{} NaN/Inf values in backward outputs at loss scale up to {}: the scale overflowed {}. The largest finite "
        "unscaled gradient is {}, so start dynamic scaling at {} (2^4 below overflow) and let it back off",
        g.nonfinite, human_scale(*g.max_scale), limits.name, human_number(*g.largest), human_scale(*advice.initial_scale));
    return advice;
  }
  if (lift <= 0) {
    advice.reason = fmt::format("unscaled gradients lie in [{}, {}], all above {}'s smallest normal {}: no scaling needed",
                                human_number(*g.smallest), human_number(*g.largest), limits.name,
                                human_number(limits.min_normal));
    return advice;
  }
  advice.needed = true;
  const double exponent = std::max(0.0, std::min(lift, cap));
  advice.initial_scale = std::ldexp(1.0, static_cast<int>(exponent));
  advice.dynamic = true;
  advice.reason = fmt::format(
      "unscaled gradients reach down to {} (below {}'s smallest normal {}) and up to {}: a scale of {} lifts "
      "the smallest{} and keeps the largest at least 2^{} below {}; dynamic scaling backs off if that is too high",
      human_number(*g.smallest), limits.name, human_number(limits.min_normal), human_number(*g.largest),
      human_scale(*advice.initial_scale), lift > cap ? " part of the way" : "", static_cast<int>(cap - exponent) + 4,
      human_number(limits.max_finite));
  return advice;
}

}  // namespace

Format advice_target_of(const RunSummary& s) {
  // The run's own word comes first ("amp-bf16"; "fp32; bf16 in enc" is an fp32 run).
  const std::string own = s.precision.substr(0, s.precision.find(';'));
  // mptrain's fp8 mode runs everything but its quantized operands as amp-bf16 does.
  return own.find("bf16") != std::string::npos || own == "fp8" ? Format::BF16 : Format::F16;
}

Advice advise(const Trace& trace, const AdviceOptions& options) {
  Advice advice;
  advice.target = options.target;
  const auto by_op = forward_ranges_by_op(trace);
  const auto origins = origins_by_op(trace);
  for (const auto& op : model_op_names()) {
    auto row = by_op.find(op);
    auto origin = origins.find(op);
    advice.ops.push_back(decide(op, row == by_op.end() ? nullptr : &row->second,
                                origin == origins.end() ? std::pair<int64_t, std::optional<int64_t>>{0, std::nullopt}
                                                        : origin->second,
                                options));
  }
  if (options.target == Format::F16) {
    advice.loss_scale = advise_loss_scale(trace, Format::F16);
  } else {
    advice.loss_scale.reason = fmt::format("{} has fp32's exponent range: gradients need no loss scaling",
                                           format_limits(options.target).name);
  }
  advice.mptrain_flags = {"--precision", options.target == Format::BF16 ? "amp-bf16" : "amp-fp16",
                          "--fp32-ops", "fp32_ops.txt", "--bf16-ops", "bf16_ops.txt"};
  if (advice.loss_scale.needed && advice.loss_scale.initial_scale) {
    advice.mptrain_flags.insert(advice.mptrain_flags.end(),
                                {"--loss-scale", "dynamic", "--scale-init", fmt::format("{:g}", *advice.loss_scale.initial_scale)});
  } else {
    advice.mptrain_flags.insert(advice.mptrain_flags.end(), {"--loss-scale", "none"});
  }
  return advice;
}

namespace {

std::string list_text(const Advice& advice, OpPlacement placement, const std::string& title) {
  std::string text = "# " + title + "\n# written by `fpscope advise`; one op a line, the reason above it.\n";
  for (const auto& op : advice.ops) {
    if (op.placement != placement) continue;
    text += "# " + op.reason + "\n" + op.op + "\n";
  }
  return text;
}

}  // namespace

std::string fp32_ops_file_text(const Advice& advice) {
  return list_text(advice, OpPlacement::Fp32, "ops to keep in fp32 (mptrain --fp32-ops)");
}

std::string low_precision_ops_file_text(const Advice& advice) {
  return list_text(advice, OpPlacement::LowPrecision,
                   fmt::format("ops safe in {} (mptrain --bf16-ops: the low-precision list)",
                               format_limits(advice.target).name));
}

}  // namespace fpscope::analysis
