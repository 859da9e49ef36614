// fp8 readiness: the scaling recipes' forecast (tensor_recipes) summed per layer and operand, the
// recipes each layer fits, the layers to keep in higher precision, delayed scaling's overflows.
#include "fpscope/analysis/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "report_util.h"

namespace fpscope::analysis {
namespace {

std::optional<double> sqnr_of(double signal, double sse) {
  if (!(signal > 0)) return std::nullopt;
  if (sse == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / sse);
}

bool is_4bit(Recipe r) { return contract::recipe_info(r).element == contract::ElementFormat::E2M1; }

// How far an operand's figures are past each threshold: the largest ratio (above 1: no fit) and why.
std::pair<double, Misfit> severity(const RecipeFigures& f, Recipe r, const FitThresholds& t) {
  if (f.quantized == 0) return {0, Misfit::None};
  if (f.blocks_nonfinite > 0) return {1e12, Misfit::Nonfinite};
  std::pair<double, Misfit> worst{0, Misfit::None};
  const auto consider = [&](double ratio, Misfit m) {
    if (ratio > worst.first) worst = {ratio, m};
  };
  consider(*f.saturated_share() / t.max_saturated_share, Misfit::Saturation);
  consider(*f.underflow_share() / t.max_underflow_share, Misfit::Underflow);
  if (const auto s = f.sqnr_db()) {
    const double min = t.min_sqnr_db(contract::recipe_info(r).element);
    if (std::isfinite(*s)) consider(std::pow(10.0, (min - *s) / 10.0), Misfit::Sqnr);  // noise over allowed noise
  }
  if (worst.first <= 1) worst.second = Misfit::None;
  return worst;
}

}  // namespace

std::optional<double> RecipeFigures::underflow_share() const {
  return quantized ? std::optional<double>(double(underflow) / double(quantized)) : std::nullopt;
}
std::optional<double> RecipeFigures::saturated_share() const {
  return quantized ? std::optional<double>(double(saturated) / double(quantized)) : std::nullopt;
}
std::optional<double> RecipeFigures::sqnr_db() const { return sqnr_of(signal, sse); }

const char* misfit_name(Misfit m) {
  switch (m) {
    case Misfit::None: return "fits";
    case Misfit::Underflow: return "underflow";
    case Misfit::Saturation: return "saturation";
    case Misfit::Sqnr: return "SQNR";
    case Misfit::Nonfinite: return "non-finite blocks";
  }
  return "?";
}

bool has_fp8_forecast(const Trace& trace) {
  return detail::db(trace).query_int("SELECT EXISTS (SELECT 1 FROM tensor_recipes)").value_or(0) != 0;
}

Fp8Readiness fp8_readiness(const Trace& trace, const FitThresholds& thresholds, std::size_t max_overflows) {
  const auto& db = detail::db(trace);
  Fp8Readiness out;
  out.thresholds = thresholds;
  std::map<std::pair<std::string, int>, std::size_t> index;  // (layer, operand) -> operands[]
  std::map<std::size_t, std::set<std::string>> names;
  sql::Statement st(db,
                    "SELECT coalesce(k.layer, ''), r.operand, s.value, r.recipe, r.quantized, r.underflow, "
                    "r.subnormal, r.saturated, r.blocks, r.blocks_lost, r.blocks_nonfinite, r.sse, r.signal, k.step, "
                    "r.kernel_id, r.scale, r.amax, r.tensor_id FROM tensor_recipes r JOIN v_kernels k ON k.id = r.kernel_id JOIN tensors t ON t.id = r.tensor_id "
                    "JOIN strings s ON s.id = t.name_id ORDER BY r.kernel_id, r.tensor_id, r.recipe");
  while (st.step()) {
    out.forecast = true;
    const std::string layer = st.text(0), operand_name = st.text(1), tensor = st.text(2);
    const int64_t recipe = st.i64(3);
    if (recipe < 0 || recipe >= kRecipeCount) continue;
    int operand = 0;
    while (operand < int(contract::kOperandNames.size()) && operand_name != contract::kOperandNames[operand]) ++operand;
    if (operand == int(contract::kOperandNames.size())) continue;
    auto [it, added] = index.try_emplace({layer, operand}, out.operands.size());
    if (added) {
      OperandReadiness o;
      o.layer = layer;
      o.operand = static_cast<Operand>(operand);
      out.operands.push_back(std::move(o));
    }
    names[it->second].insert(tensor);
    RecipeFigures& f = out.operands[it->second].recipes[std::size_t(recipe)];
    const uint64_t quantized = uint64_t(st.i64(4));
    const double sse = st.f64(11), signal = st.f64(12);
    ++f.tensors;
    f.quantized += quantized;
    f.underflow += uint64_t(st.i64(5));
    f.subnormal += uint64_t(st.i64(6));
    const uint64_t saturated = uint64_t(st.i64(7));
    f.saturated += saturated;
    f.blocks += uint64_t(st.i64(8));
    f.blocks_lost += uint64_t(st.i64(9));
    f.blocks_nonfinite += uint64_t(st.i64(10));
    f.sse += sse;
    f.signal += signal;
    const std::optional<int64_t> step = st.opt_i64(13);
    if (const auto s = sqnr_of(signal, sse); s && (!f.worst_sqnr_db || *s < *f.worst_sqnr_db)) {
      f.worst_sqnr_db = s;
      f.worst_step = step;
      f.worst_tensor_id = st.i64(17);
      f.worst_amax = st.opt_f64(16);
      f.worst_scale = st.opt_f64(15);
    }
    if (saturated > 0 && contract::kRecipes[std::size_t(recipe)].rule == contract::ScaleRule::TensorDelayed) {
      ++out.overflow_count;
      if (out.overflows.size() < max_overflows)
        out.overflows.push_back({layer, static_cast<Operand>(operand), static_cast<Recipe>(recipe), step, st.i64(14),
                                 tensor, saturated, quantized, st.opt_f64(16), st.opt_f64(15)});
    }
  }
  if (!out.forecast) {
    sql::Statement asked(db, "SELECT EXISTS (SELECT 1 FROM processes WHERE injector_options LIKE '% recipes=operands %' "
                             "OR injector_options LIKE '% recipes=all %')");
    out.asked_without_operands = asked.step() && asked.i64(0) != 0;
  }
  for (auto& [i, set] : names) {
    for (const std::string& n : set) out.operands[i].tensors += (out.operands[i].tensors.empty() ? "" : ", ") + n;
  }
  for (OperandReadiness& o : out.operands)
    for (int r = 0; r < kRecipeCount; ++r)
      std::tie(o.severity[std::size_t(r)], o.misfit[std::size_t(r)]) =
          severity(o.recipes[std::size_t(r)], static_cast<Recipe>(r), thresholds);

  // Layers: the recipes that fit all their operands (activation, weight, gradient).
  std::vector<std::string> order;
  for (const OperandReadiness& o : out.operands)
    if (std::find(order.begin(), order.end(), o.layer) == order.end()) order.push_back(o.layer);
  std::vector<LayerReadiness> keep, fine;
  for (const std::string& layer : order) {
    LayerReadiness l;
    l.layer = layer;
    double closest = std::numeric_limits<double>::infinity();
    double best_sqnr = -std::numeric_limits<double>::infinity();
    for (int r = 0; r < kRecipeCount; ++r) {
      const Recipe recipe = static_cast<Recipe>(r);
      double worst = 0, worst_sqnr = std::numeric_limits<double>::infinity();
      std::optional<Operand> worst_operand;
      Misfit why = Misfit::None;
      bool any = false;
      for (const OperandReadiness& o : out.operands) {
        if (o.layer != layer || o.operand == Operand::Other) continue;
        any = true;
        const double ratio = o.severity[std::size_t(r)];
        const Misfit misfit = o.misfit[std::size_t(r)];
        if (ratio > worst || !worst_operand) {
          worst = std::max(worst, ratio);
          worst_operand = o.operand;
          why = misfit;
        }
        worst_sqnr = std::min(worst_sqnr, o.recipes[std::size_t(r)].sqnr_db().value_or(worst_sqnr));
      }
      if (!any) continue;
      if (worst <= 1) {
        l.fitting.push_back(recipe);
        if (!is_4bit(recipe) && worst_sqnr > best_sqnr) {
          best_sqnr = worst_sqnr;
          l.best_8bit = recipe;
        }
      }
      if (!is_4bit(recipe) && worst < closest) {
        closest = worst;
        l.closest = recipe;
        l.failing_operand = worst_operand;
        l.failure = why;
        l.severity = worst;
      }
    }
    l.keep_high_precision = !l.best_8bit.has_value() && l.closest.has_value();
    if (!l.keep_high_precision) {
      l.failing_operand.reset();
      l.failure = Misfit::None;
    }
    (l.keep_high_precision ? keep : fine).push_back(std::move(l));
  }
  std::stable_sort(keep.begin(), keep.end(), [](const LayerReadiness& a, const LayerReadiness& b) {
    return a.severity > b.severity;
  });
  out.layers = std::move(keep);
  out.layers.insert(out.layers.end(), fine.begin(), fine.end());
  return out;
}

namespace {

// "gradient: SQNR 17.2 dB, limit 19 dB" for an operand a recipe does not fit.
std::string misfit_text(const OperandReadiness& o, Recipe r, const FitThresholds& t) {
  const RecipeFigures& f = o.recipes[std::size_t(r)];
  const char* operand = contract::operand_name(o.operand);
  switch (o.misfit[std::size_t(r)]) {
    case Misfit::Underflow:
      return fmt::format("{}: {} flushed to zero, limit {}", operand, human_percent(f.underflow_share().value_or(0)),
                         human_percent(t.max_underflow_share));
    case Misfit::Saturation:
      return fmt::format("{}: {} saturated, limit {}", operand, human_percent(f.saturated_share().value_or(0)),
                         human_percent(t.max_saturated_share));
    case Misfit::Sqnr:
      return fmt::format("{}: SQNR {:.1f} dB, limit {:.0f} dB", operand, f.sqnr_db().value_or(0),
                         t.min_sqnr_db(contract::recipe_info(r).element));
    case Misfit::Nonfinite:
      return fmt::format("{}: {} non-finite block{}", operand, f.blocks_nonfinite, f.blocks_nonfinite == 1 ? "" : "s");
    case Misfit::None: break;
  }
  return operand;
}

}  // namespace

Fp8Advice fp8_advice(const Fp8Readiness& r) {
  Fp8Advice advice;
  if (!r.forecast) return advice;
  std::vector<std::string> layers;
  for (const OperandReadiness& o : r.operands)
    if (o.operand != Operand::Other && std::find(layers.begin(), layers.end(), o.layer) == layers.end())
      layers.push_back(o.layer);
  for (const MptrainFp8Mode& mode : kMptrainFp8Modes) {
    Fp8ModeAdvice m{mode, {}, {}, 0};
    for (const std::string& layer : layers) {
      double worst = 0;
      std::string why;
      for (const OperandReadiness& o : r.operands) {
        if (o.layer != layer || o.operand == Operand::Other) continue;
        const Recipe recipe = o.operand == Operand::Gradient ? mode.gradient : mode.forward;
        const double severity = o.severity[std::size_t(recipe)];
        if (o.misfit[std::size_t(recipe)] != Misfit::None && severity >= worst) {
          worst = severity;
          why = misfit_text(o, recipe, r.thresholds);
        }
      }
      if (why.empty()) continue;
      m.keep.push_back(layer);
      m.reasons.push_back(why);
      m.severity += worst;
    }
    advice.modes.push_back(std::move(m));
  }
  for (std::size_t i = 0; i < advice.modes.size(); ++i) {
    const Fp8ModeAdvice& m = advice.modes[i];
    if (!advice.best) {
      advice.best = i;
      continue;
    }
    const Fp8ModeAdvice& b = advice.modes[*advice.best];
    if (m.keep.size() < b.keep.size() || (m.keep.size() == b.keep.size() && m.severity < b.severity)) advice.best = i;
  }
  return advice;
}

}  // namespace fpscope::analysis
