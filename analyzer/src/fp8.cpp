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

palette::Rgb recipe_cell_color(const OperandReadiness& o, Recipe r, const FitThresholds& t) {
  const RecipeFigures& f = o.recipes[std::size_t(r)];
  const Misfit misfit = o.misfit[std::size_t(r)];
  if (f.tensors == 0 || f.quantized == 0) return palette::recipe_fit(palette::RecipeFit::Unseen, 0, 0);
  if (misfit == Misfit::Nonfinite) return palette::recipe_fit(palette::RecipeFit::Nonfinite, 0, 0);
  if (misfit != Misfit::None) return palette::recipe_fit(palette::RecipeFit::Misses, 0, o.severity[std::size_t(r)]);
  const double margin = f.sqnr_db().value_or(0) - t.min_sqnr_db(contract::recipe_info(r).element);
  return palette::recipe_fit(palette::RecipeFit::Fits, margin, 0);
}

std::string recipe_cell_text(const OperandReadiness& o, Recipe r) {
  const std::optional<double> db = o.recipes[std::size_t(r)].sqnr_db();
  if (!db) return "";
  return std::isinf(*db) ? "lossless" : human_number(std::round(*db * 10) / 10);
}

std::string no_forecast_text(const Fp8Readiness& r) {
  if (r.forecast) return "";
  if (r.asked_without_operands)
    return "This trace holds no fp8 forecast although the run asked for one: none of its launches had an operand the "
           "forecast knows (the inputs of the reference trainer's linear and convolution kernels, the operands of "
           "PyTorch's matrix products and convolutions). `fpscope run --recipes all` forecasts every tensor.";
  return "This trace holds no fp8 forecast: trace the run with `fpscope run --recipes operands` (full statistics) to "
         "see what each fp8 and microscaling recipe would do to the operands of its linear and convolution layers.";
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
    const std::optional<Operand> named = contract::operand_named(operand_name);
    if (!named) continue;
    const int operand = int(*named);
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
    if (!mode.gradient) continue;
    Fp8ModeAdvice m{mode, {}, {}, 0};
    for (const std::string& layer : layers) {
      double worst = 0;
      std::string why;
      for (const OperandReadiness& o : r.operands) {
        if (o.layer != layer || o.operand == Operand::Other) continue;
        const Recipe recipe = o.operand == Operand::Gradient ? *mode.gradient : mode.forward;
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

std::optional<MptrainFp8Mode> mptrain_fp8_mode(std::string_view recipe, std::string_view format) {
  for (const MptrainFp8Mode& m : kMptrainFp8Modes)
    if (recipe == m.recipe && format == m.format) return m;
  return std::nullopt;
}

std::string mptrain_fp8_flags(const MptrainFp8Mode& mode) {
  const bool four_bit = std::string_view(mode.format) == "e2m1";
  return fmt::format("--fp8-recipe {}{}{}", mode.recipe, four_bit ? "" : " --fp8-format ", four_bit ? "" : mode.format);
}

namespace {

// What both runs measured of a tensor, to tell whether two operands held the same values.
struct OperandStats {
  int64_t count = 0, zero = 0, nonfinite = 0;
  std::optional<double> min, max, mean, rms;
  std::string exp_hist;
  bool operator==(const OperandStats&) const = default;
};
// The columns OperandStats reads, of a tensors row aliased `t`.
constexpr const char* kStatsColumns =
    "t.count, t.zero, t.nan + t.pos_inf + t.neg_inf, t.min, t.max, t.mean, t.rms, coalesce(t.exp_hist, '')";
OperandStats read_stats(sql::Statement& st, int first) {
  return {st.i64(first), st.i64(first + 1), st.i64(first + 2), st.opt_f64(first + 3), st.opt_f64(first + 4),
          st.opt_f64(first + 5), st.opt_f64(first + 6), st.text(first + 7)};
}

struct Step0 {
  uint64_t underflow = 0, subnormal = 0;
  std::optional<uint64_t> saturated;
  OperandStats stats;
};
struct Side {
  uint64_t quantized = 0, underflow = 0, subnormal = 0;
  uint64_t saturated = 0;
  bool uncounted = false;  // a launch did not count saturation: the sum is unknown
  std::optional<Step0> step0;
};
using OperandKey = std::pair<std::string, int>;  // (layer, operand)

// 1 for the largest share, 2 for the next, ... (equal shares share a rank); 0 without a share.
template <typename Get>
void rank_rows(std::vector<Fp8OutcomeRow>& rows, Get share, int Fp8OutcomeRow::*rank) {
  for (Fp8OutcomeRow& r : rows) {
    const std::optional<double> mine = share(r);
    if (!mine) continue;
    int above = 0;
    for (const Fp8OutcomeRow& o : rows)
      if (const auto other = share(o); other && *other > *mine) ++above;
    r.*rank = above + 1;
  }
}

}  // namespace

namespace {

// What run B's quantize steps did, per layer and operand, in the order B met them.
struct Measured {
  MptrainFp8Mode mode;
  std::string trainer;  // "mptrain" or "torchao"
  std::map<OperandKey, Side> sides;
  std::vector<OperandKey> order;
  Side& side(const OperandKey& key) {
    if (!sides.count(key)) order.push_back(key);
    return sides[key];
  }
};

// Adds one quantized tensor to `side`: its values quantized, flushed, made subnormal and saturated
// (when counted), its counts and statistics as the side's step-0 operand if it is the first at step 0.
void add_quantized(Side& side, const OperandStats& stats, std::optional<int64_t> step, uint64_t underflow,
                   uint64_t subnormal, std::optional<uint64_t> saturated) {
  side.quantized += uint64_t(stats.count - stats.nonfinite);
  side.underflow += underflow;
  side.subnormal += subnormal;
  side.saturated += saturated.value_or(0);
  side.uncounted = side.uncounted || !saturated;
  if (step == 0 && !side.step0) side.step0 = Step0{underflow, subnormal, saturated, stats};
}

std::set<int64_t> weight_allocations(const Trace& t) {
  std::set<int64_t> out;
  sql::Statement wq(detail::db(t), "SELECT DISTINCT m.alloc_id FROM memory_events m JOIN categories c ON c.id = m.category "
                                   "WHERE m.kind = 'alloc' AND c.name = 'weight'");
  while (wq.step()) out.insert(wq.i64(0));
  return out;
}

// B as an fp8 run of mptrain: every quantize launch of the training steps. The operand: a gradient
// in backward, else a weight where the input's allocation holds weights, else an activation. The
// counts: the kernel's own (tensor_stores of its output), else what the output's statistics say.
std::optional<Measured> mptrain_quantized(const Trace& b) {
  if (b.meta_value("config.precision").value_or("") != "fp8") return std::nullopt;
  auto mode = mptrain_fp8_mode(b.meta_value("config.fp8_recipe").value_or(""),
                               b.meta_value("config.fp8_format").value_or(""));
  if (!mode) return std::nullopt;
  // Delayed scaling's window: the forecast replays 1024 steps (delayed-e4m3, delayed-e5m2) and 16
  // (delayed16-e4m3, whose e5m2 twin it lacks); another window has no forecast to compare with.
  if (mode->forward == Recipe::DelayedE4M3) {
    const std::string history = b.meta_value("config.fp8_amax_history").value_or("1024");
    if (history == "16") {
      mode->forward = Recipe::Delayed16E4M3;
      mode->gradient = std::string_view(mode->format) == "e4m3" ? std::optional<Recipe>(Recipe::Delayed16E4M3) : std::nullopt;
    } else if (history != "1024") {
      return std::nullopt;
    }
  }
  Measured out{*mode, "mptrain", {}, {}};
  const std::set<int64_t> weights = weight_allocations(b);
  sql::Statement bq(detail::db(b),
                    std::string("SELECT coalesce(k.layer, ''), k.phase, k.step, q.zero, q.subnormal, ") + kStatsColumns +
                        ", t.tensor_uid, s.flushed, s.subnormal, s.overflowed "
                        "FROM v_kernels k JOIN tensors t ON t.kernel_id = k.id AND t.role = 'in' AND t.slot = 0 "
                        "JOIN tensors q ON q.kernel_id = k.id AND q.role = 'out' AND q.slot = 0 "
                        "LEFT JOIN tensor_stores s ON s.tensor_id = q.id "
                        "WHERE k.kernel LIKE 'fp8_quantize_%' AND k.phase IN ('forward', 'backward') ORDER BY k.id");
  while (bq.step()) {
    const Operand operand = bq.text(1) == "backward"                              ? Operand::Gradient
                            : !bq.is_null(13) && weights.count(bq.i64(13)) != 0 ? Operand::Weight
                                                                                  : Operand::Activation;
    const OperandStats stats = read_stats(bq, 5);
    const bool counted = !bq.is_null(14);
    const uint64_t zeros_out = uint64_t(bq.i64(3));
    const uint64_t underflow =
        counted ? uint64_t(bq.i64(14)) : zeros_out - uint64_t(std::min<int64_t>(stats.zero, int64_t(zeros_out)));
    const uint64_t subnormal = uint64_t(counted ? bq.i64(15) : bq.i64(4));
    const std::optional<uint64_t> saturated = counted ? std::optional<uint64_t>(bq.i64(16)) : std::nullopt;
    add_quantized(out.side({bq.text(0), int(operand)}), stats, bq.opt_i64(2), underflow, subnormal, saturated);
  }
  return out;
}

// B as a program trained with torchao's float8 tensorwise scaling: each cast to fp8 torchao makes
// (hp_tensor_to_float8_dynamic: the tensor x multiplied by its one fp32 scale, clamped to the
// format's range, then _to_copy to e4m3 or e5m2) in the training steps, each found from the cast
// back through its input's writers within the few launches before it. The operand: a weight where
// x's allocation holds a parameter; in backward, a tensor the same step's forward cast (torchao
// quantizes a layer's input and weight again for its backward products) is that operand, any other
// the gradient; in forward, any other an activation. Counts from the statistics: the values flushed
// are the zeros of the fp8 tensor less those of x, the subnormals the fp8 tensor's, and the values
// saturated those of x times the scale that a cast to the format would overflow (beyond 464 for
// e4m3, from 61440 for e5m2: where the rounded value exceeds the largest). Rowwise scaling (a scale
// per row) is not compared.
std::optional<Measured> torchao_quantized(const Trace& b) {
  const sql::Database& db = detail::db(b);
  if (db.query_int("SELECT EXISTS (SELECT 1 FROM v_kernels k JOIN v_tensors t ON t.kernel_id = k.id "
                   "WHERE k.kernel = '_scaled_mm' AND t.role = 'in' AND t.dtype_name IN ('e4m3', 'e5m2'))")
          .value_or(0) == 0)
    return std::nullopt;
  const std::set<int64_t> weights = weight_allocations(b);
  // The last launch at most 8 before `before` that wrote allocation `uid`: its id, kernel and first
  // input's allocation.
  sql::Statement writer(db, "SELECT o.kernel_id, k.kernel, i.tensor_uid, d.bits FROM tensors o "
                            "JOIN v_kernels k ON k.id = o.kernel_id "
                            "LEFT JOIN tensors i ON i.kernel_id = o.kernel_id AND i.role = 'in' AND i.slot = 0 "
                            "LEFT JOIN dtypes d ON d.id = i.dtype "
                            "WHERE o.role = 'out' AND o.tensor_uid = ?1 AND o.kernel_id < ?2 AND o.kernel_id >= ?2 - 8 "
                            "ORDER BY o.kernel_id DESC LIMIT 1");
  struct Launch {
    int64_t id;
    std::string kernel;
    std::optional<int64_t> input_uid;
    std::optional<int64_t> input_bits;  // the first input's dtype width
  };
  auto written = [&writer](int64_t uid, int64_t before) -> std::optional<Launch> {
    writer.reset();
    writer.bind(1, uid);
    writer.bind(2, before);
    if (!writer.step()) return std::nullopt;
    return Launch{writer.i64(0), writer.text(1), writer.opt_i64(2), writer.opt_i64(3)};
  };
  // The multiply's tensors: x (slot 0, with its statistics), the scale (slot 1) and the product.
  sql::Statement product(db, std::string("SELECT ") + kStatsColumns + ", t.tensor_uid, s.count, p.e4m3_overflow, "
                             "p.e5m2_overflow FROM tensors t JOIN tensors s ON s.kernel_id = t.kernel_id AND s.role = 'in' "
                             "AND s.slot = 1 JOIN tensors p ON p.kernel_id = t.kernel_id AND p.role = 'out' AND p.slot = 0 "
                             "WHERE t.kernel_id = ?1 AND t.role = 'in' AND t.slot = 0");
  sql::Statement casts(db, "SELECT k.id, coalesce(k.layer, ''), k.phase, k.step, o.dtype_name, o.zero, o.subnormal, "
                           "i.tensor_uid FROM v_kernels k JOIN tensors i ON i.kernel_id = k.id AND i.role = 'in' AND i.slot = 0 "
                           "JOIN v_tensors o ON o.kernel_id = k.id AND o.role = 'out' AND o.slot = 0 "
                           "WHERE k.kernel = '_to_copy' AND o.dtype_name IN ('e4m3', 'e5m2') "
                           "AND k.phase IN ('forward', 'backward') AND i.tensor_uid IS NOT NULL ORDER BY k.id");
  Measured out{*mptrain_fp8_mode(contract::kTrainerFp8Recipes[0], contract::kTrainerFp8Formats[0]), "torchao", {}, {}};
  bool any = false, gradient_e4m3 = false, gradient_e5m2 = false;
  std::map<std::tuple<std::optional<int64_t>, std::string, int64_t>, Operand> forward_sources;  // (step, layer, x)
  std::set<std::tuple<std::string, int, std::optional<int64_t>, int64_t>> seen;                  // once a step
  while (casts.step()) {
    const std::optional<Launch> clamp = written(casts.i64(7), casts.i64(0));
    if (!clamp || clamp->kernel != "clamp" || !clamp->input_uid) continue;
    const std::optional<Launch> mul = written(*clamp->input_uid, clamp->id);
    if (!mul || mul->kernel != "mul") continue;
    product.reset();
    product.bind(1, mul->id);
    if (!product.step() || product.is_null(8)) continue;
    if (product.i64(9) != 1) return std::nullopt;  // a scale per row or block: not tensorwise
    const std::string layer = casts.text(1), format = casts.text(4);
    const bool backward = casts.text(2) == "backward";
    const std::optional<int64_t> step = casts.opt_i64(3);
    // x: the tensor cast, or the 16-bit tensor whose fp32 copy torchao scaled (same values).
    int64_t x = product.i64(8);
    if (const std::optional<Launch> widened = written(x, mul->id);
        widened && widened->kernel == "_to_copy" && widened->input_bits == 16 && widened->input_uid)
      x = *widened->input_uid;
    Operand operand = weights.count(x) ? Operand::Weight : Operand::Activation;
    if (backward && operand != Operand::Weight) {
      const auto it = forward_sources.find({step, layer, x});
      operand = it != forward_sources.end() ? it->second : Operand::Gradient;
    }
    if (!backward) forward_sources.emplace(std::make_tuple(step, layer, x), operand);
    if (operand == Operand::Gradient) (format == "e5m2" ? gradient_e5m2 : gradient_e4m3) = true;
    else if (format != "e4m3") return std::nullopt;  // torchao's forward operands are e4m3
    any = true;
    if (!seen.insert({layer, int(operand), step, x}).second) continue;
    const OperandStats stats = read_stats(product, 0);
    const uint64_t underflow = uint64_t(std::max<int64_t>(0, casts.i64(5) - stats.zero));
    const uint64_t saturated = uint64_t(product.i64(format == "e5m2" ? 11 : 10));
    add_quantized(out.side({layer, int(operand)}), stats, step, underflow, uint64_t(casts.i64(6)), saturated);
  }
  if (!any || (gradient_e4m3 && gradient_e5m2)) return std::nullopt;
  // Current scaling, hybrid or e4m3 everywhere: the mptrain mode that quantizes alike.
  out.mode = *mptrain_fp8_mode(contract::kTrainerFp8Recipes[0],
                               contract::kTrainerFp8Formats[gradient_e4m3 ? 1 : 0]);
  return out;
}

}  // namespace

std::optional<Fp8Outcome> fp8_outcome(const Trace& a, const Trace& b) {
  if (!has_fp8_forecast(a)) return std::nullopt;
  std::optional<Measured> measured = mptrain_quantized(b);
  if (!measured) measured = torchao_quantized(b);
  if (!measured) return std::nullopt;
  const MptrainFp8Mode& mode = measured->mode;
  // The forecast recipe B's mode applies to an operand (none for a gradient no recipe replays).
  auto applied_to = [&mode](Operand o) { return o == Operand::Gradient ? mode.gradient : std::optional<Recipe>(mode.forward); };
  Fp8Outcome out{mode, measured->trainer, {}, 0, 0};
  std::map<OperandKey, Side> forecast;
  std::vector<OperandKey> order = measured->order;

  // A: the forecast of the recipe B's mode applies to each operand, each tensor once a step (B
  // quantizes an operand once for the products that read it; A forecasts it at each).
  sql::Statement aq(detail::db(a),
                    std::string("SELECT coalesce(k.layer, ''), r.operand, r.recipe, k.step, r.quantized, r.underflow, "
                                "r.subnormal, ") + kStatsColumns +
                        ", t.name_id, r.saturated FROM tensor_recipes r JOIN v_kernels k ON k.id = r.kernel_id JOIN tensors t ON t.id = r.tensor_id "
                        "WHERE k.phase IN ('forward', 'backward') ORDER BY r.kernel_id, r.tensor_id");
  std::set<std::tuple<std::string, std::string, std::optional<int64_t>, int64_t>> seen;
  while (aq.step()) {
    const std::optional<Operand> named = contract::operand_named(aq.text(1));
    if (!named || *named == Operand::Other) continue;
    const int operand = int(*named);
    const std::optional<Recipe> applied = applied_to(*named);
    if (!applied || aq.i64(2) != int64_t(*applied)) continue;
    if (!seen.insert({aq.text(0), aq.text(1), aq.opt_i64(3), aq.i64(15)}).second) continue;
    Side& side = forecast[{aq.text(0), operand}];
    side.quantized += uint64_t(aq.i64(4));
    side.underflow += uint64_t(aq.i64(5));
    side.subnormal += uint64_t(aq.i64(6));
    side.saturated += uint64_t(aq.i64(16));
    if (aq.opt_i64(3) == 0 && !side.step0)
      side.step0 = Step0{uint64_t(aq.i64(5)), uint64_t(aq.i64(6)), uint64_t(aq.i64(16)), read_stats(aq, 7)};
  }
  for (const auto& [key, side] : forecast)
    if (!measured->sides.count(key)) order.push_back(key);

  for (const OperandKey& key : order) {
    const Operand operand = static_cast<Operand>(key.second);
    const std::optional<Recipe> applied = applied_to(operand);
    if (!applied) continue;
    Fp8OutcomeRow row;
    row.layer = key.first;
    row.operand = operand;
    row.recipe = *applied;
    const Side fa = forecast.count(key) ? forecast.at(key) : Side{};
    const Side mb = measured->sides.count(key) ? measured->sides.at(key) : Side{};
    row.a_quantized = fa.quantized, row.a_underflow = fa.underflow, row.a_subnormal = fa.subnormal;
    row.a_saturated = fa.saturated;
    row.b_quantized = mb.quantized, row.b_underflow = mb.underflow, row.b_subnormal = mb.subnormal;
    if (measured->sides.count(key) && !mb.uncounted) row.b_saturated = mb.saturated;
    if (fa.step0) {
      row.a_step0_underflow = fa.step0->underflow;
      row.a_step0_subnormal = fa.step0->subnormal;
      row.a_step0_saturated = fa.step0->saturated;
    }
    if (mb.step0) {
      row.b_step0_underflow = mb.step0->underflow;
      row.b_step0_subnormal = mb.step0->subnormal;
      row.b_step0_saturated = mb.step0->saturated;
    }
    row.step0_same_operand = fa.step0 && mb.step0 && fa.step0->stats == mb.step0->stats;
    out.step0_compared += row.step0_same_operand ? 1 : 0;
    out.step0_equal += row.step0_equal() ? 1 : 0;
    out.rows.push_back(std::move(row));
  }
  rank_rows(out.rows, [](const Fp8OutcomeRow& r) { return r.a_share(); }, &Fp8OutcomeRow::a_rank);
  rank_rows(out.rows, [](const Fp8OutcomeRow& r) { return r.b_share(); }, &Fp8OutcomeRow::b_rank);
  return out;
}

}  // namespace fpscope::analysis
