// Why a run went wrong: the causes behind the first NaN/Inf, read off the chain of launches the
// lineage walk (why_walk.h) finds, and for each step the loss scaler skipped, which gradient
// overflowed at which scale. Each cause is one rule (a function returning the cause it finds);
// why() tries them in a stated order.
#include "report_util.h"
#include "why_walk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace fpscope::analysis {

namespace {

using namespace lineage;

// The loss scale in force during each step (scale_before of its update), and the static scale.
std::optional<double> scale_at(const Trace& trace, const LossScaleReport& ls, std::optional<int64_t> step) {
  for (const auto& e : ls.events)
    if (e.step && step && *e.step == *step) return e.scale_before;
  if (const auto text = trace.meta_value("config.loss_scale"); text && text->rfind("static:", 0) == 0) {
    try {
      return std::stod(text->substr(7));
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

// How advice names a setting: mptrain's flag, or what a PyTorch program sets.
std::string setting(const Trace& trace, std::string_view mptrain, std::string_view torch) {
  return std::string(trace.from_pytorch() ? torch : mptrain);
}

// The loss-scale line of `fpscope advise`, worded as advice.
std::string advice_for_scale(const Trace& trace) {
  const LossScaleAdvice a = advise(trace).loss_scale;
  const bool torch = trace.from_pytorch();
  if (!a.initial_scale)
    return torch ? "use a dynamic loss scale (torch.amp.GradScaler) so the scale backs off"
                 : "use dynamic loss scaling (--loss-scale dynamic) so the scale backs off";
  if (torch)
    return fmt::format("start the loss scale at {} or below: torch.amp.GradScaler(init_scale={:g}) (fpscope advise)",
                       human_scale(*a.initial_scale), *a.initial_scale);
  return fmt::format("start the loss scale at {} or below: --loss-scale dynamic --scale-init {:g} (fpscope advise)",
                     human_scale(*a.initial_scale), *a.initial_scale);
}

// A cause of the first NaN/Inf `o`: its launch and step, and the tensor that shows it (the
// non-finite output unless another is named).
Cause cause_at(CauseKind kind, const NonfiniteEvent& o, std::optional<int64_t> tensor_id = std::nullopt) {
  Cause c;
  c.kind = kind;
  c.kernel_id = o.kernel_id;
  c.tensor_id = tensor_id ? tensor_id : std::optional<int64_t>(o.tensor_id);
  c.step = o.step;
  return c;
}

// A gradient that overflowed in backward at scale S: the unscaled magnitude is read off a later
// finite output of the same kernel and layer, and the largest power of two that keeps it finite.
std::optional<Cause> loss_scale_cause(Walker& w, const NonfiniteEvent& o, const LossScaleReport& ls,
                                      const std::string& scale_advice) {
  if (o.phase != std::optional<std::string>(contract::kPhaseBackward) || o.kind == "nan") return std::nullopt;
  const auto scale = scale_at(w.trace(), ls, o.step);
  const auto format = format_of_dtype(o.dtype);
  if (!scale || *scale <= 1 || !format) return std::nullopt;
  const FormatLimits& limits = format_limits(*format);
  Cause c = cause_at(CauseKind::LossScale, o);
  sql::Statement st(w.db(),
                    "SELECT t.absmax, k.step, k.id FROM tensors t JOIN v_kernels k ON k.id = t.kernel_id "
                    "WHERE k.kernel = ?1 AND k.layer IS ?2 AND t.role = 'out' AND t.slot = "
                    "  (SELECT slot FROM tensors WHERE id = ?3) AND k.id > ?4 "
                    "  AND t.nan + t.pos_inf + t.neg_inf = 0 AND t.absmax > 0 ORDER BY k.id LIMIT 1");
  st.bind(1, std::string_view(o.kernel));
  o.layer ? st.bind(2, std::string_view(*o.layer)) : st.bind_null(2);
  st.bind(3, o.tensor_id).bind(4, o.kernel_id);
  std::string fitted;
  if (st.step()) {
    const auto later_scale = scale_at(w.trace(), ls, st.opt_i64(1)).value_or(1.0);
    const double unscaled = st.f64(0) / later_scale;
    const double fits = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(limits.max_finite / unscaled))));
    fitted = fmt::format("; unscaled, this gradient reaches {} (launch {}, {}), so a scale of {} or less would have "
                         "kept it finite",
                         human_number(unscaled), human_launch(st.i64(2)), step_word(st.opt_i64(1)), human_scale(fits));
  }
  c.advice = scale_advice;
  c.summary = fmt::format("the loss scale {} pushed the gradient {} of {} beyond {}'s largest value {} at {}{}",
                          human_scale(*scale), o.tensor, where_text(o.kernel, o.layer), limits.name,
                          human_number(limits.max_finite), step_word(o.step), fitted);
  return c;
}

bool name_has(const std::string& name, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (name.find(p) != std::string::npos) return true;
  return false;
}

std::optional<double> optimizer_epsilon(const Trace& trace);

// A parameter an optimizer step blew up, and what the trace shows made the step large.
std::optional<Cause> optimizer_cause(Walker& w, const CauseLink& link) {
  using contract::MemoryCategory;
  if (link.writer_phase != std::optional<std::string>(contract::kPhaseOptimizer) || !link.jump_log2 || *link.jump_log2 < kJumpLog2 ||
      !link.tensor_uid)
    return std::nullopt;
  const auto category = w.category(*link.tensor_uid);
  if (category != static_cast<int64_t>(MemoryCategory::Weight) &&
      category != static_cast<int64_t>(MemoryCategory::MasterWeight))
    return std::nullopt;
  Cause c;
  c.kind = CauseKind::OptimizerStep;
  c.kernel_id = link.writer_kernel_id;
  c.tensor_id = link.writer_tensor_id;
  c.step = link.writer_step;
  c.subject = fmt::format("{} ({} at {})", link.tensor, binades(*link.jump_log2), step_word(link.writer_step));
  c.summary = fmt::format("{} at {} took {} from absmax {} to {} ({} in one step)", link.writer_kernel,
                          step_word(link.writer_step), link.tensor, human_number(*link.absmax_before),
                          human_number(*link.absmax_after), binades(*link.jump_log2));
  // The gradient it read, and the optimizer state it wrote.
  std::optional<Row> gradient;
  for (const Row& in : w.rows(*link.writer_kernel_id, contract::Role::Input))
    if (in.uid && w.category(*in.uid) == static_cast<int64_t>(MemoryCategory::Gradient)) gradient = in;
  for (const Row& out : w.rows(*link.writer_kernel_id, contract::Role::Output)) {
    if (!out.uid || w.category(*out.uid) != static_cast<int64_t>(MemoryCategory::OptimizerState)) continue;
    const int64_t gradient_zeros = gradient ? gradient->zero : 0;
    if (out.zero <= gradient_zeros) continue;
    const bool second_moment = name_has(out.name, {"exp_avg_sq", "sq", "second"});
    c.summary += fmt::format(
        ": its {} {} came out with {} of {} values zero in {} while the gradient {} had {}{}", 
        second_moment ? "second moment" : "optimizer state", out.name, out.zero, out.count, out.dtype,
        gradient ? gradient->name : std::string("(not measured)"), gradient_zeros,
        second_moment ? " (squares of small gradients flushed to zero), so the update divided by almost nothing" : "");
    const std::string fp32_state =
        setting(w.trace(), "mptrain --optimizer-state fp32", "fp32 parameters, with autocast for the forward pass");
    c.advice = fmt::format("keep the optimizer state in fp32 ({}), or raise the optimizer's epsilon", fp32_state);
    const auto eps = optimizer_epsilon(w.trace());
    const auto format = format_of_dtype(out.dtype);
    if (second_moment && eps && format && *eps < format_limits(*format).min_subnormal) {
      const FormatLimits& limits = format_limits(*format);
      c.summary += fmt::format("; the epsilon {} is below {}'s smallest subnormal {}, so it cannot keep the "
                               "denominator away from zero",
                               human_number(*eps), limits.name, human_number(limits.min_subnormal));
      c.advice = fmt::format("keep the optimizer state in fp32 ({}), or raise the epsilon above {} ({})", fp32_state,
                             human_number(limits.min_subnormal), setting(w.trace(), "mptrain --eps", "the optimizer's eps"));
    }
    return c;
  }
  const auto lr_text = w.trace().meta_value("config.lr");
  if (gradient && gradient->absmax && lr_text && link.absmax_before) {
    try {
      const double lr = std::stod(*lr_text);
      const double update = lr * *gradient->absmax;
      if (update > *link.absmax_before) {
        c.summary += fmt::format(": learning rate {} x gradient absmax {} = {}, beyond the weight's absmax {} before the step",
                                 human_number(lr), human_number(*gradient->absmax), human_number(update),
                                 human_number(*link.absmax_before));
        c.advice = fmt::format("lower the learning rate ({}): below {} keeps this update within the weight's range",
                               setting(w.trace(), "--lr", "the optimizer's lr"),
                               human_number(*link.absmax_before / *gradient->absmax));
        return c;
      }
    } catch (const std::exception&) {
    }
  }
  c.advice = fmt::format("lower the learning rate ({}), or keep this parameter and its optimizer state in fp32",
                         setting(w.trace(), "--lr", "the optimizer's lr"));
  return c;
}

// The optimizer's epsilon from the run's configuration: mptrain's "adamw(...,eps=1e-08,...)" or a
// front end's optimizer.eps.
std::optional<double> optimizer_epsilon(const Trace& trace) {
  std::string text = trace.meta_value("config.optimizer.eps").value_or("");
  if (text.empty()) {
    const std::string optimizer = trace.meta_value("config.optimizer").value_or("");
    const size_t at = optimizer.find("eps=");
    if (at == std::string::npos) return std::nullopt;
    text = optimizer.substr(at + 4, optimizer.find_first_of(",)", at) - at - 4);
  }
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// An op defined on part of the real line, given an input holding values outside that part: the
// first input of sqrt, log, acos, ... (PyTorch's names, in place or not), where a NaN is the
// mathematics, not the precision. The values outside are read off the input's measured range.
struct DomainBreach {
  std::string what;  // "values below 0 (down to -1000)"
  std::string rule;  // "the square root of a negative number is NaN"
};

std::optional<DomainBreach> outside_domain(std::string kernel, const Row& in) {
  if (!kernel.empty() && kernel.back() == '_') kernel.pop_back();
  if (in.slot != 0 || !in.min || !in.max) return std::nullopt;
  const double lo = *in.min, hi = *in.max;
  auto below = [&](double bound, const char* rule) -> std::optional<DomainBreach> {
    if (!(lo < bound)) return std::nullopt;
    return DomainBreach{fmt::format("values below {} (down to {})", human_number(bound), human_number(lo)), rule};
  };
  auto beyond_one = [&](const char* rule) -> std::optional<DomainBreach> {
    if (!(lo < -1 || hi > 1)) return std::nullopt;
    return DomainBreach{fmt::format("values outside [-1, 1] (from {} to {})", human_number(lo), human_number(hi)), rule};
  };
  if (kernel == "sqrt" || kernel == "rsqrt") return below(0, "the square root of a negative number is NaN");
  if (kernel == "log" || kernel == "log2" || kernel == "log10") return below(0, "the logarithm of a negative number is NaN");
  if (kernel == "log1p") return below(-1, "log1p of a number below -1 is NaN");
  if (kernel == "acosh") return below(1, "acosh of a number below 1 is NaN");
  if (kernel == "acos" || kernel == "asin") return beyond_one("acos and asin of a number outside [-1, 1] are NaN");
  if (kernel == "atanh") return beyond_one("atanh of a number outside [-1, 1] is NaN");
  if (kernel == "pow" || kernel == "float_power")
    return below(0, "a negative number to a power that is not an integer is NaN");
  return std::nullopt;
}

// The command that traces steps `from` to `to` in full, the program's own command after it:
// "fpscope run --steps 34-35 -o steps.sqlite -- python3 train.py".
std::string rerun_steps(const Trace& trace, int64_t from, int64_t to) {
  const std::string command = summary(trace).command;
  return fmt::format("fpscope run --steps {}-{} -o steps-{}-{}.sqlite -- {}", std::max<int64_t>(0, from), to,
                     std::max<int64_t>(0, from), to, command.empty() ? "..." : command);
}

// A normalisation that divides by a row's (or group's, or channel's) deviation.
bool normalises(const std::string& kernel) {
  return name_has(kernel, {"layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm"});
}

// The advice that keeps a wider format: for a launch whose tensors are 16-bit; a run already in
// fp32 (or fp64) is told so instead.
std::string wider_format_advice(const std::string& dtype, const std::string& otherwise) {
  if (dtype == "f32" || dtype == "f64") return otherwise + " (the op already runs in " + (dtype == "f32" ? "fp32" : "fp64") +
                                                ": a wider format would not help)";
  return "keep this op (and what feeds it) in fp32, or " + otherwise;
}

// The divisor of a division, when the kernel is one and its inputs were measured: the second.
bool is_division(const std::string& kernel) { return name_has(kernel, {"div"}); }

// Ops that turn a zero into an Inf or NaN: division, logarithm, (reciprocal) square root, and
// normalisations (they divide by a standard deviation). log_softmax is not one: it subtracts.
bool divides_or_logs(const std::string& kernel) {
  if (name_has(kernel, {"softmax"})) return false;
  return name_has(kernel, {"div", "log", "sqrt", "reciprocal", "norm", "pow"});
}

// A normalisation that made NaN/Inf because rows of its input have no variance and its epsilon
// does not count: its reciprocal deviation (a side output, contract::kMainOutputSlot) is +Inf in as
// many places as rows without variance, and their normalised values are 0 * Inf = NaN.
std::optional<Cause> zero_variance_cause(Walker& w, const NonfiniteEvent& o) {
  const std::vector<Row> outs = w.rows(o.kernel_id, contract::Role::Output);
  const Row* deviation = nullptr;
  for (const Row& out : outs)
    if (out.slot > static_cast<int64_t>(contract::kMainOutputSlot) && out.nonfinite > 0 && is_float(out.dtype)) deviation = &out;
  const std::vector<Row> ins = w.rows(o.kernel_id, contract::Role::Input);
  if (!deviation || ins.empty() || !is_float(ins.front().dtype) || ins.front().nonfinite > 0) return std::nullopt;
  const Row& x = ins.front();
  Cause c = cause_at(CauseKind::ZeroVarianceNorm, o, deviation->id);
  c.subject = x.name;
  c.summary = fmt::format("{} made {}: {} of the rows it normalises have no variance (its reciprocal deviation {} is "
                          "Inf there), so its epsilon is 0, or too small to count in {}; {} of {} values of its input "
                          "{} are zero",
                          where_text(o.kernel, o.layer), o.kind, deviation->nonfinite, deviation->name, x.dtype, x.zero,
                          x.count, x.name);
  c.advice = x.dtype == "f16" || x.dtype == "bf16"
                 ? fmt::format("give the normalisation an epsilon {} can hold (PyTorch's default is 1e-5; a smaller one "
                               "may round to zero in {}), or find why its input rows are constant",
                               x.dtype, x.dtype)
                 : "give the normalisation a positive epsilon (PyTorch's default is 1e-5; eps=0 removes it), or find why "
                   "its input rows are constant";
  return c;
}

}  // namespace

namespace {

// Every kind of cause, its name in JSON and its label for people, in one table, in the enum's order.
struct CauseKindInfo {
  CauseKind kind;
  const char* name;
  const char* label;
};
constexpr CauseKindInfo kCauseKinds[] = {
    {CauseKind::LossScale, "loss_scale", "loss scale too high"},
    {CauseKind::OptimizerStep, "optimizer_step", "optimizer step blew a parameter up"},
    {CauseKind::UnderflowIntoDivision, "underflow_into_division", "underflow into a division"},
    {CauseKind::NonfiniteData, "nonfinite_data", "non-finite input"},
    {CauseKind::OpFromOrdinaryInputs, "op_from_ordinary_inputs", "op on ordinary inputs"},
    {CauseKind::SkippedStep, "skipped_step", "skipped step"},
    {CauseKind::NotMeasured, "not_measured", "not measured"},
    {CauseKind::RangeJump, "range_jump", "range jump"},
    {CauseKind::OutsideDomain, "outside_domain", "input outside the op's domain"},
    {CauseKind::ZeroVarianceNorm, "zero_variance_norm", "normalisation of constant rows without an epsilon"},
};
constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kCauseKinds); ++i)
    if (static_cast<size_t>(kCauseKinds[i].kind) != i) return false;
  return std::size(kCauseKinds) == static_cast<size_t>(CauseKind::ZeroVarianceNorm) + 1;
}
static_assert(in_enum_order(), "kCauseKinds lists every CauseKind once, in the enum's order");

const CauseKindInfo& kind_info(CauseKind kind) { return kCauseKinds[static_cast<size_t>(kind)]; }

}  // namespace

const char* cause_label(CauseKind kind) { return kind_info(kind).label; }
const char* cause_kind_name(CauseKind kind) { return kind_info(kind).name; }

namespace {

// What every cause rule reads: the trace, the walk (and the chain it found), the first non-finite
// output, the loss scaler's events and the advice on its scale.
struct CauseContext {
  const Trace& trace;
  Walker& walker;
  const NonfiniteEvent& origin;
  const std::vector<CauseLink>& chain;
  const LossScaleReport& loss_scale;
  const std::string& scale_advice;
};

// No launch made the first NaN/Inf from finite inputs: it came in with the data, from another
// rank, or through launches the run did not measure (then: the exact steps to trace).
Cause nonfinite_data_cause(const Trace& trace, const NonfiniteEvent& o) {
  Cause c = cause_at(CauseKind::NonfiniteData, o);
  if (how_it_came(o) == FirstNonfinite::ReceivedFromAnotherRank) {
    c.summary = fmt::format("no launch of this rank made the first NaN/Inf from finite inputs: {} received it from "
                            "another rank at {}",
                            where_text(o.kernel, o.layer), step_word(o.step));
    c.advice = "read the other ranks' reports (fpscope report --section ranks, --rank R): the origin is there";
    return c;
  }
  c.summary = fmt::format("no launch made the first NaN/Inf from finite inputs: {} already received it at {}, from "
                          "input data or a launch that was not measured",
                          where_text(o.kernel, o.layer), step_word(o.step));
  c.advice = "check the input data for NaN/Inf, or trace every step (no --every/--steps/--ops)";
  // A run that measured a selection most likely missed where it began: the loss says when.
  const RunSummary s = summary(trace);
  if (s.measured_a_selection) {
    const std::optional<int64_t> bad = s.first_nonfinite_loss_step ? s.first_nonfinite_loss_step : o.step;
    if (bad) {
      c.summary += fmt::format(" (this run measured a selection of its launches{})",
                               s.first_nonfinite_loss_step
                                   ? fmt::format(", and its loss was first NaN/Inf at step {}", *bad)
                                   : std::string());
      c.advice = "trace the steps where it began in full: " + rerun_steps(trace, *bad - 1, *bad);
    }
  }
  return c;
}

// A gradient that overflowed in backward at the loss scale of its step (loss_scale_cause()).
std::optional<Cause> loss_scale_rule(const CauseContext& x) {
  return loss_scale_cause(x.walker, x.origin, x.loss_scale, x.scale_advice);
}

// Parameters optimizer steps blew up, the earliest step first: the first one is where it began,
// told in full, the others by name and jump.
std::optional<Cause> optimizer_rule(const CauseContext& x) {
  std::vector<Cause> blown;
  for (const CauseLink& link : x.chain)
    if (auto c = optimizer_cause(x.walker, link)) blown.push_back(std::move(*c));
  if (blown.empty()) return std::nullopt;
  std::stable_sort(blown.begin(), blown.end(), [](const Cause& a, const Cause& b) { return a.kernel_id < b.kernel_id; });
  Cause first = blown.front();
  std::string others;
  for (size_t i = 1; i < blown.size(); ++i) others += (others.empty() ? "" : ", ") + blown[i].subject;
  if (!others.empty())
    first.summary += fmt::format(". Optimizer steps also blew up {} more parameter{}: {}", blown.size() - 1,
                                 blown.size() == 2 ? "" : "s", others);
  return first;
}

// A normalisation over rows without variance whose epsilon does not count (zero_variance_cause()).
std::optional<Cause> zero_variance_rule(const CauseContext& x) {
  if (!normalises(x.origin.kernel)) return std::nullopt;
  return zero_variance_cause(x.walker, x.origin);
}

// A NaN made by a function given values outside its domain (a log of a negative number): a model
// bug, with the launch that wrote the input.
std::optional<Cause> outside_domain_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  if (o.kind != "nan") return std::nullopt;
  for (const Row& in : x.walker.rows(o.kernel_id, contract::Role::Input)) {
    if (!is_float(in.dtype)) continue;
    const auto breach = outside_domain(o.kernel, in);
    if (!breach) continue;
    Cause c = cause_at(CauseKind::OutsideDomain, o, in.id);
    c.subject = in.name;
    c.summary = fmt::format("{} read {} holding {}: {}", where_text(o.kernel, o.layer), in.name, breach->what,
                            breach->rule);
    // Its writer, as the walk found it: the latest measured write, unless launches the run did
    // not measure came between (then the walk's stop in the chain says which).
    if (const auto written = in.uid ? x.walker.writer(*in.uid, o.kernel_id) : std::nullopt) {
      const Launch writer = x.walker.launch(written->kernel_id);
      if (x.walker.unmeasured_between(written->kernel_id, o.kernel_id).launches == 0) {
        c.summary += fmt::format("; {} wrote it at {} (launch {})", where_text(writer.kernel, writer.layer),
                                 step_word(writer.step), human_launch(writer.id));
      } else {
        c.summary += fmt::format("; the launch that wrote it was not measured (the last measured write: {} at {})",
                                 where_text(writer.kernel, writer.layer), step_word(writer.step));
      }
    }
    c.advice = "a model bug, not a precision problem: find why the input left the domain (the chain below), "
               "or keep it inside (clamp, abs, or an epsilon that keeps it positive)";
    return c;
  }
  return std::nullopt;
}

// Zeros into a division, log, square root or normalisation: the input with zeros that matters is a
// division's divisor (its second input) when it holds any, else the input with the largest share
// of zeros; the chain says which launch flushed them to zero.
std::optional<Cause> underflow_into_division_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  if (!divides_or_logs(o.kernel)) return std::nullopt;
  const std::vector<Row> ins = x.walker.rows(o.kernel_id, contract::Role::Input);
  const Row* zeros = nullptr;
  for (const Row& in : ins) {
    if (!is_float(in.dtype) || in.zero == 0) continue;
    if (is_division(o.kernel) && in.slot == 1) {
      zeros = &in;
      break;
    }
    if (!zeros || in.zero * zeros->count > zeros->zero * in.count) zeros = &in;
  }
  if (!zeros) return std::nullopt;
  const Row& in = *zeros;
  const bool divisor = is_division(o.kernel) && in.slot == 1;
  Cause c = cause_at(CauseKind::UnderflowIntoDivision, o, in.id);
  c.subject = in.name;
  const std::string smallest = in.min_nonzero ? human_number(*in.min_nonzero) : std::string("-");
  c.summary = divisor ? fmt::format("{} of {} values of its divisor {} are zero (smallest nonzero {}), and {} made {} "
                                    "of them (x/0 is Inf, 0/0 is NaN)",
                                    in.zero, in.count, in.name, smallest, where_text(o.kernel, o.layer), o.kind)
                      : fmt::format("{} of {} values of its input {} are zero (smallest nonzero {}), and {} made {} "
                                    "of them",
                                    in.zero, in.count, in.name, smallest, where_text(o.kernel, o.layer), o.kind);
  for (const CauseLink& link : x.chain)
    if (link.tensor_uid == in.uid && link.zero_after > link.zero_before)
      c.summary += fmt::format(": {} flushed {} of them to zero at {}", link.writer_kernel,
                               link.zero_after - link.zero_before, step_word(link.writer_step));
  c.advice = wider_format_advice(in.dtype, divisor ? "keep the divisor away from zero (an epsilon, or a clamp)"
                                                   : "add an epsilon before the division, log or square root");
  return c;
}

// Inputs whose writers the run did not measure: the trace cannot tell why; the steps to trace.
std::optional<Cause> unmeasured_writers_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  std::string names;
  size_t unknown = 0;
  for (const CauseLink& link : x.chain)
    if (!link.writer_kernel_id) names += (unknown++ ? ", " : "") + link.tensor;
  if (unknown == 0) return std::nullopt;
  Cause c = cause_at(CauseKind::NotMeasured, o);
  c.summary = fmt::format("{} made {}, but the trace cannot tell why: the launches that wrote its input{} {} "
                          "were not measured",
                          where_text(o.kernel, o.layer), o.kind, unknown == 1 ? "" : "s", names);
  c.advice = o.step ? "trace the steps before it in full: " + rerun_steps(x.trace, *o.step - 1, *o.step)
                    : std::string("trace without --every, --steps or --ops");
  return c;
}

// A write up the chain that grew its tensor's range 2^kJumpLog2-fold or more at once.
std::optional<Cause> range_jump_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  for (const CauseLink& link : x.chain) {
    if (!link.writer_kernel_id || !link.jump_log2 || *link.jump_log2 < kJumpLog2) continue;
    Cause c;
    c.kind = CauseKind::RangeJump;
    c.kernel_id = link.writer_kernel_id;
    c.tensor_id = link.writer_tensor_id;
    c.step = link.writer_step;
    c.summary = fmt::format("{} at {} wrote {} with absmax {}, {} above its previous {}; {} then made {} of it",
                            where_text(link.writer_kernel, link.writer_layer), step_word(link.writer_step),
                            link.tensor, human_number(*link.absmax_after), binades(*link.jump_log2),
                            human_number(*link.absmax_before), where_text(o.kernel, o.layer), o.kind);
    c.advice = fmt::format("look at what {} computes at {}: its inputs or arguments changed there", link.writer_kernel,
                           step_word(link.writer_step));
    return c;
  }
  return std::nullopt;
}

// Inputs of a dtype fpscope does not measure leave no rows: the NaN may have come in with them, so
// nothing says that this op made it.
std::optional<Cause> unmeasured_inputs_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  if (!x.walker.rows(o.kernel_id, contract::Role::Input).empty()) return std::nullopt;
  Cause c = cause_at(CauseKind::NotMeasured, o);
  const std::string unmeasured = x.trace.meta_value("config.unmeasured").value_or("");
  c.summary = fmt::format("{} returned {}, but none of its inputs was measured: the value may have come in "
                          "with them (an input of a dtype fpscope does not measure{})",
                          where_text(o.kernel, o.layer), o.kind,
                          unmeasured.empty() ? std::string(", such as a complex tensor") : ": " + unmeasured);
  c.advice = "look at the op that made its input: a module the run keeps in a dtype fpscope does not measure is "
             "not traced; find the NaN with torch.isfinite in that module";
  return c;
}

// Nothing in the trace explains it: the op's own arguments.
std::optional<Cause> ordinary_inputs_rule(const CauseContext& x) {
  const NonfiniteEvent& o = x.origin;
  Cause c = cause_at(CauseKind::OpFromOrdinaryInputs, o);
  c.summary = fmt::format("{} made {} from inputs whose ranges look ordinary: no precursor in the trace",
                          where_text(o.kernel, o.layer), o.kind);
  c.advice = o.kind == "nan"
                 ? "look at this op's arguments in the program: a log or square root of a negative number, 0/0 or "
                   "inf-inf is a model bug, not a precision problem"
                 : "look at this op's arguments: a division by zero or an overflow of ordinary values";
  return c;
}

// When a rule is tried, given the causes found before it.
enum class When {
  Always,               // it adds what it finds to the others
  NoneYet,              // only while no cause was found: the first of these that finds one explains it
  NoneOrUnmeasuredYet,  // also after "not measured": a range jump further up says more
};

struct CauseRule {
  When when;
  std::optional<Cause> (*find)(const CauseContext&);
};

// The rules for a first NaN/Inf some launch made from finite inputs, in the order they are tried.
constexpr CauseRule kCauseRules[] = {
    {When::Always, loss_scale_rule},
    {When::Always, optimizer_rule},
    {When::NoneYet, zero_variance_rule},
    {When::NoneYet, outside_domain_rule},
    {When::NoneYet, underflow_into_division_rule},
    {When::NoneYet, unmeasured_writers_rule},
    {When::NoneOrUnmeasuredYet, range_jump_rule},
    {When::NoneYet, unmeasured_inputs_rule},
    {When::NoneYet, ordinary_inputs_rule},
};

bool applies(When when, const std::vector<Cause>& found) {
  switch (when) {
    case When::Always: return true;
    case When::NoneYet: return found.empty();
    case When::NoneOrUnmeasuredYet: return found.empty() || found.back().kind == CauseKind::NotMeasured;
  }
  return false;
}

// Skipped steps: the first gradient that overflowed in each, and the scale then. The ranks of a
// multi-process run skip together (their loss scalers agree): a step is told once.
std::vector<Cause> skipped_step_causes(const sql::Database& db, const LossScaleReport& ls, const std::string& scale_advice) {
  std::vector<Cause> out;
  for (const LossScaleEvent& e : ls.events) {
    if (!e.skipped || !e.step || out.size() >= 50) continue;
    if (std::any_of(out.begin(), out.end(), [&](const Cause& seen) { return seen.step == e.step; })) continue;
    sql::Statement st(db,
                      "SELECT k.id, k.kernel, k.layer, s.value, n.kind, t.id FROM nonfinite n "
                      "JOIN v_kernels k ON k.id = n.kernel_id JOIN tensors t ON t.id = n.tensor_id "
                      "JOIN strings s ON s.id = t.name_id "
                      "WHERE k.step = ?1 AND k.phase = ?2 AND n.allowed = 0 ORDER BY n.origin DESC, k.start_ns, k.id LIMIT 1");
    st.bind(1, *e.step).bind(2, std::string_view(contract::kPhaseBackward));
    Cause c;
    c.kind = CauseKind::SkippedStep;
    c.step = e.step;
    if (st.step()) {
      c.kernel_id = st.i64(0);
      c.tensor_id = st.i64(5);
      c.summary = fmt::format("step {} skipped at loss scale {}: {} of {} overflowed first ({})", *e.step,
                              human_scale(e.scale_before), st.text(3), where_text(st.text(1), st.opt_text(2)),
                              st.text(4));
    } else {
      c.summary = fmt::format("step {} skipped at loss scale {}: no measured backward output held the NaN/Inf "
                              "(its launches were not measured)",
                              *e.step, human_scale(e.scale_before));
    }
    c.advice = scale_advice;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

WhyReport why(const Trace& trace) {
  WhyReport report;
  const NonfiniteReport nf = nonfinite(trace, 0);
  const LossScaleReport ls = loss_scale(trace);
  Walker w(trace);
  report.origin = nf.first_origin;
  const bool scaled = ls.used || trace.meta_value("config.loss_scale").value_or("none").rfind("static:", 0) == 0;
  const std::string scale_advice = scaled ? advice_for_scale(trace) : std::string();

  if (report.origin && !report.origin->origin) {
    report.causes.push_back(nonfinite_data_cause(trace, *report.origin));
  } else if (report.origin) {
    w.walk(report.origin->kernel_id, 0, report);
    const CauseContext context{trace, w, *report.origin, report.chain, ls, scale_advice};
    for (const CauseRule& rule : kCauseRules) {
      if (!applies(rule.when, report.causes)) continue;
      if (auto c = rule.find(context)) report.causes.push_back(std::move(*c));
    }
  }
  report.skipped_steps = skipped_step_causes(w.db(), ls, scale_advice);
  report.forecasts = forecast(trace);
  return report;
}

}  // namespace fpscope::analysis
