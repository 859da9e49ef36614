// Why a run went wrong: the chain of launches behind the first NaN/Inf and the causes it shows,
// and for each step the loss scaler skipped, which gradient overflowed at which scale.
//
// Everything is read from what the trace already holds: tensor rows carry the allocation they live
// in (tensor_uid), so the launch that last wrote an input is the latest earlier launch with an
// output in the same allocation, and the tensor's previous version is the latest row of that
// allocation before it (the writer's own input when it updated the tensor in place).
#include "report_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace fpscope::analysis {

namespace {

constexpr int kMaxDepth = 6;
constexpr std::size_t kMaxLinks = 24;
constexpr double kJumpLog2 = 4;  // a range that grew 16-fold or more at one write is unusual

struct Row {
  int64_t id = 0, kernel_id = 0;
  std::string role, name, dtype;
  std::optional<int64_t> uid;
  std::optional<double> absmax, min_nonzero;
  int64_t zero = 0, count = 0, nonfinite = 0;
  std::optional<double> min, max;  // finite values only
  int64_t slot = 0;
};

constexpr const char* kRowColumns =
    "SELECT t.id, t.kernel_id, t.role, s.value, d.name, t.tensor_uid, t.absmax, t.min_nonzero, t.zero, t.count, "
    "       t.nan + t.pos_inf + t.neg_inf, t.min, t.max, t.slot "
    "FROM tensors t JOIN strings s ON s.id = t.name_id JOIN dtypes d ON d.id = t.dtype ";

Row read_row(const sql::Statement& st) {
  Row r;
  r.id = st.i64(0);
  r.kernel_id = st.i64(1);
  r.role = st.text(2);
  r.name = st.text(3);
  r.dtype = st.text(4);
  r.uid = st.opt_i64(5);
  r.absmax = st.opt_f64(6);
  r.min_nonzero = st.opt_f64(7);
  r.zero = st.i64(8);
  r.count = st.i64(9);
  r.nonfinite = st.i64(10);
  r.min = st.opt_f64(11);
  r.max = st.opt_f64(12);
  r.slot = st.i64(13);
  return r;
}

struct Launch {
  int64_t id = 0;
  std::string kernel;
  std::optional<std::string> layer, phase;
  std::optional<int64_t> step;
};

std::optional<Format> format_of_dtype(const std::string& dtype) {
  if (dtype == "f16") return Format::F16;
  if (dtype == "bf16") return Format::BF16;
  return std::nullopt;
}

// A floating dtype whose values fpscope measures (contract::is_measured), by its name in traces.
bool is_float(const std::string& dtype) {
  for (int d = 0; d < contract::kDtypeCount; ++d)
    if (dtype == contract::kDtypeNames[static_cast<std::size_t>(d)])
      return contract::is_measured(static_cast<contract::Dtype>(d));
  return false;
}

std::string where_text(const std::string& kernel, const std::optional<std::string>& layer) {
  return layer ? kernel + " (" + *layer + ")" : kernel;
}

std::string step_word(const std::optional<int64_t>& step) { return step ? "step " + std::to_string(*step) : "no step"; }

std::string binades(double log2) { return fmt::format("2^{:.1f}", log2); }

class Walker {
 public:
  explicit Walker(const Trace& trace) : trace_(trace), db_(detail::db(trace)) { read_filters(); }

  Launch launch(int64_t id) {
    sql::Statement st(db_, "SELECT id, kernel, layer, phase, step FROM v_kernels WHERE id = ?1");
    st.bind(1, id);
    Launch l;
    if (!st.step()) return l;
    l.id = st.i64(0);
    l.kernel = st.text(1);
    l.layer = st.opt_text(2);
    l.phase = st.opt_text(3);
    l.step = st.opt_i64(4);
    return l;
  }

  std::vector<Row> rows(int64_t kernel_id, contract::Role role) {
    sql::Statement st(db_, std::string(kRowColumns) + "WHERE t.kernel_id = ?1 AND t.role = ?2 ORDER BY t.slot");
    st.bind(1, kernel_id).bind(2, std::string_view(contract::role_name(role)));
    std::vector<Row> out;
    while (st.step()) out.push_back(read_row(st));
    return out;
  }

  // The first tensor row `tail` (joins, WHERE, ORDER BY) selects, with ?1 and ?2 bound.
  std::optional<Row> first_row(const char* tail, int64_t p1, int64_t p2) {
    sql::Statement st(db_, std::string(kRowColumns) + tail + " LIMIT 1");
    st.bind(1, p1).bind(2, p2);
    if (!st.step()) return std::nullopt;
    return read_row(st);
  }

  // The latest measured output in allocation `uid` before launch `before`.
  std::optional<Row> writer(int64_t uid, int64_t before) {
    return first_row("WHERE t.tensor_uid = ?1 AND t.role = 'out' AND t.kernel_id < ?2 ORDER BY t.kernel_id DESC",
                     uid, before);
  }

  // The allocation's contents before launch `writer` wrote it: the writer's own input row (an
  // update in place), else the latest row of an earlier launch (its output before its input).
  std::optional<Row> previous(int64_t uid, int64_t writer) {
    return first_row("WHERE t.tensor_uid = ?1 AND (t.kernel_id < ?2 OR (t.kernel_id = ?2 AND t.role = 'in')) "
                     "ORDER BY t.kernel_id DESC, t.role = 'out' DESC",
                     uid, writer);
  }

  // A fresh allocation has no earlier contents: its previous version is then what the same kernel
  // (name, layer and phase) wrote in the same output slot at its latest earlier launch.
  std::optional<Row> previous_of_kernel(const Row& written) {
    return first_row("JOIN kernels k ON k.id = t.kernel_id JOIN kernels w ON w.id = ?1 "
                     "WHERE t.role = 'out' AND t.slot = (SELECT slot FROM tensors WHERE id = ?2) "
                     "  AND k.name_id = w.name_id AND k.layer_id IS w.layer_id AND k.phase_id IS w.phase_id "
                     "  AND k.id < ?1 ORDER BY k.id DESC",
                     written.kernel_id, written.id);
  }

  std::optional<int64_t> category(int64_t uid) {
    sql::Statement st(db_, "SELECT category FROM memory_events WHERE alloc_id = ?1 AND kind = 'alloc' LIMIT 1");
    st.bind(1, uid);
    if (!st.step()) return std::nullopt;
    return st.i64(0);
  }

  // Launches left unmeasured between two launches, with their step span.
  struct Gap {
    int64_t launches = 0;
    std::optional<int64_t> first_step, last_step;
  };
  // A step filter leaves whole steps unmeasured; inside a measured step, unmeasured launches are
  // the producer's own choice (a PyTorch view writes nothing) unless an --ops filter left kernels out.
  Gap unmeasured_between(int64_t after, int64_t before) {
    sql::Statement st(db_, "SELECT step, count(*) FROM kernels WHERE id > ?1 AND id < ?2 AND sampled = 0 GROUP BY step");
    st.bind(1, after).bind(2, before);
    Gap g;
    while (st.step()) {
      const std::optional<int64_t> step = st.opt_i64(0);
      if (!ops_filtered_ && step && measured_steps_.count(*step)) continue;
      g.launches += st.i64(1);
      if (step) {
        g.first_step = std::min(g.first_step.value_or(*step), *step);
        g.last_step = std::max(g.last_step.value_or(*step), *step);
      }
    }
    return g;
  }

  // The inputs of launch `kernel_id` and, through their writers, what they came from.
  void walk(int64_t kernel_id, int depth, WhyReport& report) {
    if (depth > kMaxDepth) return;
    for (const Row& in : rows(kernel_id, contract::Role::Input)) {
      if (report.chain.size() >= kMaxLinks) return;
      if (!is_float(in.dtype)) continue;
      CauseLink link;
      link.depth = depth;
      link.reader_kernel_id = kernel_id;
      link.tensor = in.name;
      link.tensor_uid = in.uid;
      link.count = in.count;
      if (!in.uid) {
        link.note = "no allocation id: the launch that wrote it cannot be told";
        report.chain.push_back(std::move(link));
        continue;
      }
      if (!visited_.insert(*in.uid).second) continue;  // one link per tensor
      const std::optional<Row> w = writer(*in.uid, kernel_id);
      if (filtered_) {
        const Gap gap = unmeasured_between(w ? w->kernel_id : 0, kernel_id);
        if (gap.launches > 0) {
          link.note = fmt::format(
              "its last writer may be one of {} launches left unmeasured (steps {} to {}: --every, --steps or "
              "--ops left them out), so the walk stops here",
              gap.launches, gap.first_step ? std::to_string(*gap.first_step) : "-",
              gap.last_step ? std::to_string(*gap.last_step) : "-");
          report.chain.push_back(std::move(link));
          continue;
        }
      }
      if (!w) {
        ++report.ordinary_links;  // an initial value or input data: nothing wrote it in the trace
        continue;
      }
      const Launch wl = launch(w->kernel_id);
      std::optional<Row> before = previous(*in.uid, w->kernel_id);
      if (!before) before = previous_of_kernel(*w);
      link.writer_kernel_id = w->kernel_id;
      link.writer_tensor_id = w->id;
      link.writer_kernel = wl.kernel;
      link.writer_layer = wl.layer;
      link.writer_phase = wl.phase;
      link.writer_step = wl.step;
      link.absmax_after = w->absmax;
      link.min_nonzero_after = w->min_nonzero;
      link.zero_after = w->zero;
      if (before) {
        link.absmax_before = before->absmax;
        link.min_nonzero_before = before->min_nonzero;
        link.zero_before = before->zero;
      }
      if (link.absmax_before && link.absmax_after && *link.absmax_before > 0 && *link.absmax_after > 0)
        link.jump_log2 = std::log2(*link.absmax_after / *link.absmax_before);
      const bool jumped = link.jump_log2 && *link.jump_log2 >= kJumpLog2;
      // Zeros come and go (a ReLU's output): they count as flushed only in a 16-bit tensor whose
      // smallest values already sat below the format's smallest normal number.
      const int64_t new_zeros = before ? w->zero - before->zero : 0;
      const auto format = format_of_dtype(w->dtype);
      const bool near_underflow = format && before && before->min_nonzero &&
                                  *before->min_nonzero < format_limits(*format).min_normal;
      const bool flushed = near_underflow && new_zeros > 0 && new_zeros * 100 >= std::max<int64_t>(w->count, 1);
      if (!jumped && !flushed && w->nonfinite == 0) {
        ++report.ordinary_links;
        continue;
      }
      if (jumped) {
        link.note = fmt::format("absmax {} -> {} ({} in one write)", human_number(*link.absmax_before),
                                human_number(*link.absmax_after), binades(*link.jump_log2));
      } else if (flushed) {
        link.note = fmt::format("{} values became zero ({} of {} zero after)", new_zeros, w->zero, w->count);
      } else {
        link.note = fmt::format("written holding {} NaN/Inf", w->nonfinite);
      }
      report.chain.push_back(std::move(link));
      walk(w->kernel_id, depth + 1, report);
    }
  }

  const Trace& trace() const { return trace_; }
  const sql::Database& db() const { return db_; }

 private:
  // A step, kernel or layer filter leaves launches unmeasured whose outputs the trace cannot see.
  void read_filters() {
    const MeasuredSelection selection = measured_selection(trace_);
    ops_filtered_ = selection.ops;
    filtered_ = selection.any();
    if (!filtered_) return;
    sql::Statement st(db_, "SELECT DISTINCT step FROM kernels WHERE sampled = 1 AND step IS NOT NULL");
    while (st.step()) measured_steps_.insert(st.i64(0));
  }

  const Trace& trace_;
  const sql::Database& db_;
  bool filtered_ = false, ops_filtered_ = false;
  std::set<int64_t> measured_steps_;  // steps with a measured launch (with a step filter)
  std::set<int64_t> visited_;
};

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

// The loss-scale line of `fpscope advise`, worded as advice.
std::string advice_for_scale(const Trace& trace) {
  const LossScaleAdvice a = advise(trace).loss_scale;
  if (!a.initial_scale) return "use dynamic loss scaling (--loss-scale dynamic) so the scale backs off";
  return fmt::format("start the loss scale at {} or below: --loss-scale dynamic --scale-init {:g} (fpscope advise)",
                     human_scale(*a.initial_scale), *a.initial_scale);
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
  Cause c;
  c.kind = CauseKind::LossScale;
  c.kernel_id = o.kernel_id;
  c.tensor_id = o.tensor_id;
  c.step = o.step;
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
    c.advice = "keep the optimizer state in fp32 (mptrain --optimizer-state fp32), or raise the optimizer's epsilon";
    const auto eps = optimizer_epsilon(w.trace());
    const auto format = format_of_dtype(out.dtype);
    if (second_moment && eps && format && *eps < format_limits(*format).min_subnormal) {
      const FormatLimits& limits = format_limits(*format);
      c.summary += fmt::format("; the epsilon {} is below {}'s smallest subnormal {}, so it cannot keep the "
                               "denominator away from zero",
                               human_number(*eps), limits.name, human_number(limits.min_subnormal));
      c.advice = fmt::format("keep the optimizer state in fp32 (mptrain --optimizer-state fp32), or raise the "
                             "epsilon above {} (mptrain --eps)",
                             human_number(limits.min_subnormal));
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
        c.advice = fmt::format("lower the learning rate (--lr): below {} keeps this update within the weight's range",
                               human_number(*link.absmax_before / *gradient->absmax));
        return c;
      }
    } catch (const std::exception&) {
    }
  }
  c.advice = "lower the learning rate (--lr), or keep this parameter and its optimizer state in fp32";
  return c;
}

// Ops that turn a zero into an Inf or NaN: division, logarithm, (reciprocal) square root, and
// normalisations (they divide by a standard deviation). log_softmax is not one: it subtracts.
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
  Cause c;
  c.kind = CauseKind::ZeroVarianceNorm;
  c.kernel_id = o.kernel_id;
  c.tensor_id = deviation->id;
  c.step = o.step;
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

WhyReport why(const Trace& trace) {
  WhyReport report;
  const NonfiniteReport nf = nonfinite(trace, 0);
  const LossScaleReport ls = loss_scale(trace);
  Walker w(trace);
  report.origin = nf.first_origin;
  const bool scaled = ls.used || trace.meta_value("config.loss_scale").value_or("none").rfind("static:", 0) == 0;
  const std::string scale_advice = scaled ? advice_for_scale(trace) : std::string();

  if (report.origin) {
    const NonfiniteEvent& o = *report.origin;
    if (!o.origin) {
      Cause c;
      c.kind = CauseKind::NonfiniteData;
      c.kernel_id = o.kernel_id;
      c.tensor_id = o.tensor_id;
      c.step = o.step;
      if (how_it_came(o) == FirstNonfinite::ReceivedFromAnotherRank) {
        c.summary = fmt::format("no launch of this rank made the first NaN/Inf from finite inputs: {} received it from "
                                "another rank at {}",
                                where_text(o.kernel, o.layer), step_word(o.step));
        c.advice = "read the other ranks' reports (fpscope report --section ranks, --rank R): the origin is there";
      } else {
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
      }
      report.causes.push_back(std::move(c));
    } else {
      w.walk(o.kernel_id, 0, report);
      if (auto c = loss_scale_cause(w, o, ls, scale_advice)) report.causes.push_back(std::move(*c));
      // Parameters optimizer steps blew up, the earliest step first: the first one is where it began.
      std::vector<Cause> blown;
      for (const CauseLink& link : report.chain)
        if (auto c = optimizer_cause(w, link)) blown.push_back(std::move(*c));
      std::stable_sort(blown.begin(), blown.end(),
                       [](const Cause& a, const Cause& b) { return a.kernel_id < b.kernel_id; });
      // One cause for them all: the first in full, the others by name and jump.
      if (!blown.empty()) {
        Cause first = blown.front();
        std::string others;
        for (size_t i = 1; i < blown.size(); ++i) others += (others.empty() ? "" : ", ") + blown[i].subject;
        if (!others.empty())
          first.summary += fmt::format(". Optimizer steps also blew up {} more parameter{}: {}", blown.size() - 1,
                                       blown.size() == 2 ? "" : "s", others);
        report.causes.push_back(std::move(first));
      }
      if (report.causes.empty() && normalises(o.kernel)) {
        if (auto c = zero_variance_cause(w, o)) report.causes.push_back(std::move(*c));
      }
      if (report.causes.empty() && o.kind == "nan") {
        for (const Row& in : w.rows(o.kernel_id, contract::Role::Input)) {
          if (!is_float(in.dtype)) continue;
          const auto breach = outside_domain(o.kernel, in);
          if (!breach) continue;
          Cause c;
          c.kind = CauseKind::OutsideDomain;
          c.kernel_id = o.kernel_id;
          c.tensor_id = in.id;
          c.step = o.step;
          c.subject = in.name;
          c.summary = fmt::format("{} read {} holding {}: {}", where_text(o.kernel, o.layer), in.name, breach->what,
                                  breach->rule);
          // Its writer, as the walk found it: the latest measured write, unless launches the run did
          // not measure came between (then the walk's stop in the chain says which).
          if (const auto written = in.uid ? w.writer(*in.uid, o.kernel_id) : std::nullopt) {
            const Launch writer = w.launch(written->kernel_id);
            if (w.unmeasured_between(written->kernel_id, o.kernel_id).launches == 0) {
              c.summary += fmt::format("; {} wrote it at {} (launch {})", where_text(writer.kernel, writer.layer),
                                       step_word(writer.step), human_launch(writer.id));
            } else {
              c.summary += fmt::format("; the launch that wrote it was not measured (the last measured write: {} at {})",
                                       where_text(writer.kernel, writer.layer), step_word(writer.step));
            }
          }
          c.advice = "a model bug, not a precision problem: find why the input left the domain (the chain below), "
                     "or keep it inside (clamp, abs, or an epsilon that keeps it positive)";
          report.causes.push_back(std::move(c));
          break;
        }
      }
      if (report.causes.empty() && divides_or_logs(o.kernel)) {
        // The input with zeros that matters: a division's divisor (its second input) when it holds
        // any, else the input with the largest share of zeros.
        const std::vector<Row> ins = w.rows(o.kernel_id, contract::Role::Input);
        const Row* zeros = nullptr;
        for (const Row& in : ins) {
          if (!is_float(in.dtype) || in.zero == 0) continue;
          if (is_division(o.kernel) && in.slot == 1) {
            zeros = &in;
            break;
          }
          if (!zeros || in.zero * zeros->count > zeros->zero * in.count) zeros = &in;
        }
        if (zeros) {
          const Row& in = *zeros;
          const bool divisor = is_division(o.kernel) && in.slot == 1;
          Cause c;
          c.kind = CauseKind::UnderflowIntoDivision;
          c.kernel_id = o.kernel_id;
          c.tensor_id = in.id;
          c.step = o.step;
          c.subject = in.name;
          c.summary = divisor
                          ? fmt::format("{} of {} values of its divisor {} are zero (smallest nonzero {}), and {} made {} "
                                        "of them (x/0 is Inf, 0/0 is NaN)",
                                        in.zero, in.count, in.name,
                                        in.min_nonzero ? human_number(*in.min_nonzero) : std::string("-"),
                                        where_text(o.kernel, o.layer), o.kind)
                          : fmt::format("{} of {} values of its input {} are zero (smallest nonzero {}), and {} made {} "
                                        "of them",
                                        in.zero, in.count, in.name,
                                        in.min_nonzero ? human_number(*in.min_nonzero) : std::string("-"),
                                        where_text(o.kernel, o.layer), o.kind);
          for (const CauseLink& link : report.chain)
            if (link.tensor_uid == in.uid && link.zero_after > link.zero_before)
              c.summary += fmt::format(": {} flushed {} of them to zero at {}", link.writer_kernel,
                                       link.zero_after - link.zero_before, step_word(link.writer_step));
          c.advice = wider_format_advice(in.dtype, divisor ? "keep the divisor away from zero (an epsilon, or a clamp)"
                                                           : "add an epsilon before the division, log or square root");
          report.causes.push_back(std::move(c));
        }
      }
      std::vector<std::string> unknown;
      for (const CauseLink& link : report.chain)
        if (!link.writer_kernel_id) unknown.push_back(link.tensor);
      if (report.causes.empty() && !unknown.empty()) {
        Cause c;
        c.kind = CauseKind::NotMeasured;
        c.kernel_id = o.kernel_id;
        c.tensor_id = o.tensor_id;
        c.step = o.step;
        std::string names;
        for (const std::string& n : unknown) names += (names.empty() ? "" : ", ") + n;
        c.summary = fmt::format("{} made {}, but the trace cannot tell why: the launches that wrote its input{} {} "
                                "were not measured",
                                where_text(o.kernel, o.layer), o.kind, unknown.size() == 1 ? "" : "s", names);
        c.advice = o.step ? "trace the steps before it in full: " + rerun_steps(trace, *o.step - 1, *o.step)
                          : std::string("trace without --every, --steps or --ops");
        report.causes.push_back(std::move(c));
      }
      if (report.causes.empty() || report.causes.back().kind == CauseKind::NotMeasured) {
        for (const CauseLink& link : report.chain) {
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
          c.advice = fmt::format("look at what {} computes at {}: its inputs or arguments changed there",
                                 link.writer_kernel, step_word(link.writer_step));
          report.causes.push_back(std::move(c));
          break;
        }
      }
      // Inputs of a dtype fpscope does not measure (fp64) leave no rows: the NaN may have come in
      // with them, so nothing says that this op made it.
      if (report.causes.empty() && w.rows(o.kernel_id, contract::Role::Input).empty()) {
        Cause c;
        c.kind = CauseKind::NotMeasured;
        c.kernel_id = o.kernel_id;
        c.tensor_id = o.tensor_id;
        c.step = o.step;
        const std::string unmeasured = trace.meta_value("config.unmeasured").value_or("");
        c.summary = fmt::format("{} returned {}, but none of its inputs was measured: the value may have come in "
                                "with them (an input of a dtype fpscope does not measure{})",
                                where_text(o.kernel, o.layer), o.kind,
                                unmeasured.empty() ? std::string(", such as fp64") : ": " + unmeasured);
        c.advice = "look at the op that made its input: a module the run keeps in fp64 is not measured; run it in "
                   "fp32 to trace it, or find the NaN with torch.isfinite in that module";
        report.causes.push_back(std::move(c));
      }
      if (report.causes.empty()) {
        Cause c;
        c.kind = CauseKind::OpFromOrdinaryInputs;
        c.kernel_id = o.kernel_id;
        c.tensor_id = o.tensor_id;
        c.step = o.step;
        c.summary = fmt::format("{} made {} from inputs whose ranges look ordinary: no precursor in the trace",
                                where_text(o.kernel, o.layer), o.kind);
        c.advice = o.kind == "nan"
                       ? "look at this op's arguments in the program: a log or square root of a negative number, 0/0 or "
                         "inf-inf is a model bug, not a precision problem"
                       : "look at this op's arguments: a division by zero or an overflow of ordinary values";
        report.causes.push_back(std::move(c));
      }
    }
  }

  // Skipped steps: the first gradient that overflowed in each, and the scale then. The ranks of a
  // multi-process run skip together (their loss scalers agree): a step is told once.
  for (const LossScaleEvent& e : ls.events) {
    if (!e.skipped || !e.step || report.skipped_steps.size() >= 50) continue;
    if (std::any_of(report.skipped_steps.begin(), report.skipped_steps.end(),
                    [&](const Cause& seen) { return seen.step == e.step; }))
      continue;
    sql::Statement st(w.db(),
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
    report.skipped_steps.push_back(std::move(c));
  }
  report.forecasts = forecast(trace);
  return report;
}

}  // namespace fpscope::analysis
