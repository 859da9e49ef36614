// Learning: lost weight updates (param_updates), narrowing stores that flushed results
// (tensor_stores), the update-to-weight ratios and the loss trend, with one line of advice each.
#include "report_util.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace fpscope::analysis {
namespace {

constexpr std::string_view kMasterSuffix = ".master";

// A config item of the run (meta config.*), "" if absent.
std::string config_value(const RunSummary& s, const std::string& key) {
  for (const auto& [k, v] : s.config)
    if (k == key) return v;
  return {};
}

struct UpdateSums {
  int64_t steps = 0, elements = 0, changed = 0, nonzero = 0, lost = 0;
  bool computed_known = true;  // every step counted its nonzero updates
  bool from_gradient = false;  // ... from the gradient (a front end)
  double computed_abs = 0, computed_sq = 0, applied_abs = 0, applied_sq = 0, weight_sq = 0;
};

std::optional<double> ratio_of(double numerator_sq, double weight_sq) {
  return weight_sq > 0 ? std::optional<double>(std::sqrt(numerator_sq / weight_sq)) : std::nullopt;
}

void add_sums(UpdateSums& into, const UpdateSums& u) {
  into.computed_known = into.computed_known && u.computed_known;
  into.from_gradient = into.from_gradient || u.from_gradient;
  into.nonzero += u.nonzero;
  into.lost += u.lost;
  into.computed_abs += u.computed_abs;
  into.computed_sq += u.computed_sq;
  into.applied_abs += u.applied_abs;
  into.applied_sq += u.applied_sq;
  into.weight_sq += u.weight_sq;
}

// The shares and ratios of summed updates, into a ParamLearning or a LayerLearning. The computed
// update's figures need the kernel's update (a front end counts nonzero gradients instead).
template <typename Figures>
void fill_figures(Figures& f, const UpdateSums& u) {
  if (u.computed_known) {
    f.nonzero = u.nonzero;
    f.lost = u.lost;
    if (u.nonzero > 0) f.lost_update_share = double(u.lost) / double(u.nonzero);
    if (!u.from_gradient) {
      if (u.computed_abs > 0) f.lost_magnitude_share = 1.0 - u.applied_abs / u.computed_abs;
      f.computed_ratio = ratio_of(u.computed_sq, u.weight_sq);
    }
  }
  f.update_ratio = ratio_of(u.applied_sq, u.weight_sq);
}

// The flag a 16-bit run without master weights gives mptrain for them.
std::string master_mode_for(const std::string& dtype) { return dtype == "f16" ? "amp-fp16" : "amp-bf16"; }

// One line of advice for a parameter that loses its updates, and its short form for a table.
std::pair<std::string, std::string> param_advice(const ParamLearning& p, bool stochastic, const LearningThresholds& t) {
  std::string advice, remedy;
  if (!p.master && (p.dtype == "bf16" || p.dtype == "f16")) {
    // A front end's program is PyTorch's: its words, not mptrain's flags.
    advice = p.nonzero_from_gradient
                 ? std::string("keep fp32 master weights (keep the parameters in fp32 and compute in ") + p.dtype +
                       " under autocast)"
                 : fmt::format("keep fp32 master weights (mptrain --precision {}; in PyTorch, keep the parameters in "
                               "fp32 under autocast)",
                               master_mode_for(p.dtype));
    remedy = "fp32 master weights";
    if (!stochastic) {
      advice += p.nonzero_from_gradient ? ", or round the updates stochastically (an optimizer that does)"
                                        : ", or round the updates stochastically (--stochastic-rounding)";
      remedy += " or stochastic rounding";
    }
  } else {
    advice = "the updates fall below the fp32 weights' own spacing";
    remedy = "below fp32 spacing";
  }
  if (p.computed_ratio && *p.computed_ratio < t.small_step_ratio) {
    advice += fmt::format("; the computed step is small too (update/weight below {}): a larger learning rate would "
                          "move it",
                          human_number(t.small_step_ratio));
    remedy += "; larger learning rate";
  }
  return {advice, remedy};
}

// One line of advice for a store that flushes results, and its short form.
std::pair<std::string, std::string> store_advice(const StoreLoss& s, const std::optional<std::string>& loss_scale_mode) {
  if (s.phase == "backward") {
    if (s.dtype == "f16") {
      const bool dynamic = loss_scale_mode && loss_scale_mode->rfind("dynamic", 0) == 0;
      if (dynamic)
        return {"let the dynamic loss scale start higher (--scale-init) or grow sooner (--scale-interval), or keep this "
                "layer in fp32 (--layer-precision)",
                "higher loss scale"};
      return {"use a larger or dynamic loss scale (--loss-scale dynamic)", "larger or dynamic loss scale"};
    }
    return {"keep this layer in fp32 (--layer-precision): a bf16 gradient has no loss scale to lift it",
            "layer in fp32"};
  }
  return {"keep this op in fp32 (fpscope advise writes the op lists)", "op in fp32"};
}

}  // namespace

std::string param_of_name(const std::string& name) {
  if (name.size() > kMasterSuffix.size() &&
      name.compare(name.size() - kMasterSuffix.size(), kMasterSuffix.size(), kMasterSuffix) == 0)
    return name.substr(0, name.size() - kMasterSuffix.size());
  return name;
}

std::string layer_of_param(const std::string& param) {
  const auto dot = param.rfind('.');
  return dot == std::string::npos ? std::string() : param.substr(0, dot);
}

std::vector<AdviceGroup> advice_groups(const LearningReport& r) {
  std::vector<AdviceGroup> groups;
  for (const ParamLearning& p : r.params) {
    if (!p.flagged) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const AdviceGroup& g) { return g.advice == p.advice; });
    if (it == groups.end()) {
      it = groups.insert(groups.end(), AdviceGroup{});
      it->advice = p.advice;
      it->type = p.type();
    }
    it->params.push_back(&p);
    if (it->type != p.type()) it->type.clear();
    if (p.first_lost_step && (!it->from_step || *p.first_lost_step < *it->from_step)) it->from_step = p.first_lost_step;
  }
  return groups;
}

std::string AdviceGroup::list() const {
  std::string text;
  for (const ParamLearning* p : params)
    text += fmt::format("{}{} {}{}", text.empty() ? "" : ", ", p->param, human_percent(p->lost_update_share.value_or(0)),
                        type.empty() ? " (" + p->type() + ")" : "");
  return text;
}

std::string AdviceGroup::sentence() const {
  return fmt::format("Updates lost from step {} in {} {}parameter{} (share of nonzero updates lost): {}. Advice: {}.",
                     from_step ? std::to_string(*from_step) : "-", params.size(), type.empty() ? "" : type + " ",
                     params.size() == 1 ? "" : "s", list(), advice);
}

std::vector<std::string> forecast_advice(const LearningReport& r) {
  std::vector<std::string> advice;
  for (const UpdateForecast& f : r.forecasts)
    if (std::find(advice.begin(), advice.end(), f.advice) == advice.end()) advice.push_back(f.advice);
  return advice;
}

namespace {

// The narrowing stores the learning report reads, of a tensor_stores row (or v_tensor_stores row)
// `s`: those of 16-bit outputs. A quantize kernel's 8-bit and 4-bit outputs are the fp8 comparison's.
constexpr const char* kSixteenBitStore =
    "(SELECT d.bits FROM tensors t JOIN dtypes d ON d.id = t.dtype WHERE t.id = s.tensor_id) = 16";

}  // namespace

bool has_learning_counts(const Trace& trace) {
  return detail::db(trace)
             .query_int(std::string("SELECT EXISTS (SELECT 1 FROM param_updates) OR EXISTS (SELECT 1 FROM tensor_stores s "
                                    "WHERE ") + kSixteenBitStore + ")")
             .value_or(0) != 0;
}

std::string no_updates_text(const LearningReport& r) {
  if (r.measured_updates || r.measured_stores) return {};
  return "This trace holds no parameter update and no store count. `fpscope run` (schema 6 and later, unless "
         "--updates off) records them on the steps it measures: the reference trainer's CPU kernels count both, the "
         "PyTorch front end compares each parameter before and after its optimizer's step.";
}

namespace {

// The forecasts of the parameters' ratios (learning.h, UpdateForecast), from the report's rows.
std::vector<UpdateForecast> forecasts_of(const std::vector<ParamLearning>& params, const std::vector<UpdatePoint>& points,
                                         bool stochastic, int64_t run_steps, int window) {
  std::vector<UpdateForecast> out;
  for (const ParamLearning& p : params) {
    // Only a 16-bit weight without fp32 master weights loses its updates to its own spacing, and
    // stochastic rounding keeps their expected change.
    if (p.master || (p.dtype != "bf16" && p.dtype != "f16") || stochastic) continue;
    const bool bf16 = p.dtype == "bf16";
    const int spacing = (bf16 ? contract::kBF16 : contract::kF16).unit_roundoff_log2();
    const char* format = bf16 ? "bf16" : "fp16";
    std::vector<const UpdatePoint*> rows;  // points are by param, then step
    for (const UpdatePoint& u : points)
      if (u.param == p.param && u.step >= 0) rows.push_back(&u);
    const std::size_t from = rows.size() > std::size_t(window) ? rows.size() - std::size_t(window) : 0;
    // The computed ratio where every step that has a ratio at all (a weight not all zero) has it.
    const bool computed = std::all_of(rows.begin() + std::ptrdiff_t(from), rows.end(), [](const UpdatePoint* u) {
      return u->computed_ratio.has_value() || !u->update_ratio.has_value();
    });
    std::vector<std::pair<double, double>> fit_points;
    for (std::size_t i = from; i < rows.size(); ++i) {
      const std::optional<double>& ratio = computed ? rows[i]->computed_ratio : rows[i]->update_ratio;
      if (ratio && *ratio > 0) fit_points.emplace_back(double(rows[i]->step), std::log2(*ratio));
    }
    const std::optional<Trend> t = fit_trend(fit_points, false, double(spacing),
                                             TrendRule{.min_r2 = 0, .min_slope_t = kUpdateTrendT,
                                                       .recent_slack_se = kUpdateRecentSlackSe});
    if (!t || t->steps_to_edge > 20.0 * double(run_steps)) continue;  // no falling trend, or too far out to say
    UpdateForecast f;
    f.param = p.param;
    f.layer = p.layer;
    f.dtype = p.dtype;
    f.computed = computed;
    f.spacing_log2 = spacing;
    f.take(*t);
    const std::string rate = f.model == GrowthModel::Exponential
                                 ? fmt::format("by a factor of 2^{:.2f} per 100 steps (exponential decay)",
                                               std::fabs(f.log2_per_100_steps))
                                 : fmt::format("by {} a step (a straight line fits clearly better than exponential decay)",
                                               human_number(std::fabs(f.per_step)));
    f.summary = fmt::format("{} ({}): {} update/weight 2^{:.2f} at step {}, falling {} over steps {} to {}: it "
                            "reaches {}'s relative spacing 2^{} at about step {}, where its updates begin to round away",
                            f.param, format, computed ? "computed" : "applied", f.log2_now, f.last_step, rate,
                            f.first_step, f.last_step, format, f.spacing_log2, f.crossing_step);
    f.advice = param_advice(p, stochastic, LearningThresholds{}).first;
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const UpdateForecast& a, const UpdateForecast& b) {
    return a.crossing_step < b.crossing_step;
  });
  return out;
}

}  // namespace

std::vector<UpdateForecast> update_forecast(const Trace& trace) { return learning(trace).forecasts; }

LearningReport learning(const Trace& trace, const LearningThresholds& thresholds) {
  const auto& db = detail::db(trace);
  LearningReport out;
  out.thresholds = thresholds;
  const RunSummary s = summary(trace);
  const bool stochastic = config_value(s, "stochastic_rounding") == "on";
  if (const std::string mode = config_value(s, "loss_scale"); !mode.empty()) out.loss_scale_mode = mode;

  // Parameter updates, of the lowest rank that has any (ranks of a data-parallel run apply the same).
  std::map<std::string, UpdateSums> sums;
  std::map<std::string, std::pair<std::string, bool>> kinds;  // param -> (dtype, master)
  std::map<std::string, std::optional<int64_t>> first_lost;
  {
    sql::Statement st(db,
                      "SELECT u.param, u.dtype_name, u.step, u.elements, u.changed, u.nonzero, u.lost, "
                      "u.computed_abs_sum, u.computed_sq_sum, u.applied_abs_sum, u.applied_sq_sum, u.weight_sq_sum, "
                      "u.nonzero_from FROM v_param_updates u WHERE u.rank = (SELECT min(rank) FROM param_updates) "
                      "ORDER BY u.step, u.id");
    while (st.step()) {
      out.measured_updates = true;
      const std::string name = st.text(0), param = param_of_name(name);
      kinds.try_emplace(param, st.text(1), name != param);
      UpdateSums& u = sums[param];
      u.from_gradient = u.from_gradient || st.text(12) == "gradient";
      const std::optional<int64_t> step = st.opt_i64(2), nonzero = st.opt_i64(5), lost = st.opt_i64(6);
      ++u.steps;
      u.elements = st.i64(3);
      u.changed += st.i64(4);
      if (nonzero && lost) {
        u.nonzero += *nonzero;
        u.lost += *lost;
        u.computed_abs += st.f64(7);  // 0 where NULL (a front end's)
        u.computed_sq += st.f64(8);
        auto& first = first_lost[param];
        if (!first && step && *nonzero > 0 && double(*lost) >= thresholds.lost_update_share * double(*nonzero))
          first = step;
      } else {
        u.computed_known = false;
      }
      u.applied_abs += st.f64(9);
      u.applied_sq += st.f64(10);
      u.weight_sq += st.f64(11);
      const std::optional<double> computed_sq = st.opt_f64(8);
      out.points.push_back({param, step.value_or(-1), ratio_of(st.f64(10), st.f64(11)),
                            computed_sq ? ratio_of(*computed_sq, st.f64(11)) : std::nullopt,
                            nonzero && *nonzero > 0 ? std::optional<double>(double(lost.value_or(0)) / double(*nonzero))
                                                    : std::nullopt});
    }
  }
  std::map<std::string, UpdateSums> by_layer;
  std::map<std::string, int64_t> layer_params;
  for (const auto& [param, u] : sums) {
    add_sums(by_layer[layer_of_param(param)], u);
    ++layer_params[layer_of_param(param)];
  }
  for (const auto& [layer, u] : by_layer) {
    LayerLearning l;
    l.layer = layer;
    l.params = layer_params[layer];
    fill_figures(l, u);
    out.layers.push_back(std::move(l));
  }
  for (const auto& [param, u] : sums) {
    ParamLearning p;
    p.param = param;
    p.layer = layer_of_param(param);
    std::tie(p.dtype, p.master) = kinds[param];
    p.steps = u.steps;
    p.elements = u.elements;
    p.changed = u.changed;
    p.nonzero_from_gradient = u.from_gradient;
    fill_figures(p, u);
    p.first_lost_step = first_lost[param];
    // Stochastic rounding keeps the expected change: elements that stay put are not updates lost
    // when the magnitude is kept.
    const bool magnitude_kept = stochastic && p.lost_magnitude_share &&
                                *p.lost_magnitude_share < thresholds.lost_update_share;
    p.flagged = p.lost_update_share && *p.lost_update_share >= thresholds.lost_update_share && !magnitude_kept;
    if (p.flagged) std::tie(p.advice, p.remedy) = param_advice(p, stochastic, thresholds);
    out.params.push_back(std::move(p));
  }
  for (LayerLearning& l : out.layers)
    for (const ParamLearning& p : out.params) l.flagged = l.flagged || (p.flagged && p.layer == l.layer);
  // Flagged parameters first, the most updates lost first (a large weight matrix before a bias that
  // loses a larger share of fewer); then the others by the share they lose.
  std::stable_sort(out.params.begin(), out.params.end(), [](const ParamLearning& a, const ParamLearning& b) {
    if (a.flagged != b.flagged) return a.flagged;
    if (a.flagged && a.lost.value_or(0) != b.lost.value_or(0)) return a.lost.value_or(0) > b.lost.value_or(0);
    return a.lost_update_share.value_or(-1) > b.lost_update_share.value_or(-1);
  });
  std::sort(out.points.begin(), out.points.end(),
            [](const UpdatePoint& a, const UpdatePoint& b) { return std::tie(a.param, a.step) < std::tie(b.param, b.step); });

  // Narrowing stores that lost anything, per tensor name, phase and kernel (lowest rank). Only
  // 16-bit outputs: what a quantize kernel did to its 8-bit or 4-bit output is the fp8 comparison's.
  const std::vector<StepRow> step_rows = steps(trace);
  std::map<int64_t, double> scale_at;
  for (const StepRow& r : step_rows)
    if (r.loss_scale) scale_at[r.step] = *r.loss_scale;
  // A static loss scale has no scaler kernel to read it off: the scale the program logged then.
  for (const auto& [step, value] : scalar_by_step(trace, "loss_scale")) scale_at.try_emplace(step, value);
  {
    std::map<std::tuple<std::string, std::string, std::string>, std::size_t> index;
    sql::Statement st(db,
                      "SELECT s.tensor, coalesce(s.layer, ''), coalesce(s.phase, ''), s.kernel, s.dtype_name, s.step, "
                      "s.results, s.flushed, s.subnormal, s.overflowed FROM v_tensor_stores s "
                      "WHERE s.rank = (SELECT min(rank) FROM tensor_stores) AND " + std::string(kSixteenBitStore) +
                          " ORDER BY s.kernel_id, s.tensor_id");
    while (st.step()) {
      out.measured_stores = true;
      const int64_t flushed = st.i64(7), subnormal = st.i64(8), overflowed = st.i64(9), results = st.i64(6);
      const auto key = std::make_tuple(st.text(0), st.text(2), st.text(3));
      auto [it, added] = index.try_emplace(key, out.stores.size());
      if (added) {
        StoreLoss l;
        std::tie(l.tensor, l.phase, l.kernel) = key;
        l.layer = st.text(1);
        l.dtype = st.text(4);
        out.stores.push_back(std::move(l));
      }
      StoreLoss& l = out.stores[it->second];
      const std::optional<int64_t> step = st.opt_i64(5);
      ++l.stores;
      l.results += results;
      l.flushed += flushed;
      l.subnormal += subnormal;
      l.overflowed += overflowed;
      if (flushed > 0 && step && !l.first_flush_step) l.first_flush_step = step;
      const double share = results > 0 ? double(flushed) / double(results) : 0.0;
      if (flushed > 0 && share > l.worst_flushed_share) {
        l.worst_flushed_share = share;
        l.worst_step = step;
        l.worst_loss_scale = step && scale_at.count(*step) ? std::optional<double>(scale_at[*step]) : std::nullopt;
      }
    }
  }
  std::erase_if(out.stores, [](const StoreLoss& l) { return l.flushed + l.subnormal + l.overflowed == 0; });
  for (StoreLoss& l : out.stores) {
    l.flagged = l.flushed_share().value_or(0) >= thresholds.flushed_share || l.overflowed > 0;
    if (l.flagged) std::tie(l.advice, l.remedy) = store_advice(l, out.loss_scale_mode);
  }
  // Flagged first, then by the share flushed, then by the share made subnormal.
  std::stable_sort(out.stores.begin(), out.stores.end(), [](const StoreLoss& a, const StoreLoss& b) {
    if (a.flagged != b.flagged) return a.flagged;
    if (a.flushed_share().value_or(0) != b.flushed_share().value_or(0))
      return a.flushed_share().value_or(0) > b.flushed_share().value_or(0);
    return a.subnormal_share().value_or(0) > b.subnormal_share().value_or(0);
  });

  out.forecasts = forecasts_of(out.params, out.points, stochastic, std::max<int64_t>(s.steps, 1), kUpdateForecastWindow);
  if (const std::map<int64_t, double> lr = scalar_by_step(trace, "lr"); !lr.empty()) {
    out.lr.first_step = lr.begin()->first;
    out.lr.first = lr.begin()->second;
    out.lr.last_step = lr.rbegin()->first;
    out.lr.last = lr.rbegin()->second;
  }

  // The loss curve: first and last finite loss, and the means of the first and last quarter.
  std::vector<double> losses;
  for (const StepRow& r : step_rows)
    if (r.loss && std::isfinite(*r.loss)) losses.push_back(*r.loss);
  out.loss.steps = int64_t(losses.size());
  if (!losses.empty()) {
    out.loss.first = losses.front();
    out.loss.last = losses.back();
    const std::size_t quarter = std::max<std::size_t>(1, losses.size() / 4);
    double early = 0, late = 0;
    for (std::size_t i = 0; i < quarter; ++i) {
      early += losses[i];
      late += losses[losses.size() - quarter + i];
    }
    out.loss.early_mean = early / double(quarter);
    out.loss.late_mean = late / double(quarter);
  }
  return out;
}

}  // namespace fpscope::analysis
