// The analyzer's numerics reports on traces of real training runs (real_run.h): the fp8 readiness
// and its forecast against an fp8 run, checked against direct SQL on the same files; the learning
// report's lost updates, flushed stores and update forecasts against SQL and the trainer's own runs.
#include "fpscope/analysis.h"
#include "fpscope/export.h"
#include "fpscope/units.h"
#include "real_run.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>

using namespace fpscope::analysis;
using fpscope::test::kCommon;
using fpscope::test::RealRun;
using fpscope::test::sql_value;
using fpscope::test::traced;

namespace {

// The fp8 readiness of a traced run against direct SQL over tensor_recipes: each layer's and
// operand's sums, each recipe's fit recomputed from the thresholds, each layer's verdict from its
// operands'; and with thresholds no 8-bit recipe can meet, every layer is to be kept, most severe
// first, its evidence the recipe that came closest.
TEST_F(RealRun, Fp8ReadinessMatchesSqlAndItsThresholds) {
  const std::string path = fpscope::test::temp_dir() + "/fp8.sqlite";
  const std::string cmd = fpscope::test::traced_command(path, "--recipes operands", "--precision bf16");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto t = Trace::open(path);
  ASSERT_TRUE(has_fp8_forecast(*t));
  const Fp8Readiness r = fp8_readiness(*t);
  ASSERT_TRUE(r.forecast);
  ASSERT_EQ(r.operands.size(), 12u);  // conv1, conv2, fc1, fc2: activation, weight, gradient each
  for (const OperandReadiness& o : r.operands) {
    for (int i = 0; i < kRecipeCount; ++i) {
      const RecipeFigures& f = o.recipes[std::size_t(i)];
      const std::string where = fmt::format(
          " from tensor_recipes r join kernels k on k.id = r.kernel_id left join strings l on l.id = k.layer_id"
          " where coalesce(l.value, '') = '{}' and r.operand = '{}' and r.recipe = {}",
          o.layer, fpscope::contract::operand_name(o.operand), i);
      SCOPED_TRACE(o.layer + " " + fpscope::contract::operand_name(o.operand) + " " + fpscope::contract::kRecipes[i].name);
      EXPECT_EQ(f.tensors, *sql_value(path, "select count(*)" + where));
      EXPECT_EQ(int64_t(f.quantized), *sql_value(path, "select sum(quantized)" + where));
      EXPECT_EQ(int64_t(f.underflow), *sql_value(path, "select sum(underflow)" + where));
      EXPECT_EQ(int64_t(f.saturated), *sql_value(path, "select sum(saturated)" + where));
      EXPECT_EQ(int64_t(f.blocks_lost), *sql_value(path, "select sum(blocks_lost)" + where));
      const double sse = std::stod(*fpscope::test::sql_text(path, "select printf('%.17g', sum(sse))" + where));
      EXPECT_NEAR(f.sse, sse, 1e-12 * sse);
      // The fit, from the thresholds.
      const FitThresholds& th = r.thresholds;
      const double u = double(f.underflow) / double(f.quantized), s = double(f.saturated) / double(f.quantized);
      const double q = 10 * std::log10(f.signal / f.sse);
      const bool fits = f.blocks_nonfinite == 0 && u <= th.max_underflow_share && s <= th.max_saturated_share &&
                        q >= th.min_sqnr_db(fpscope::contract::kRecipes[i].element);
      EXPECT_EQ(o.misfit[std::size_t(i)] == Misfit::None, fits) << u << " " << s << " " << q;
    }
  }
  ASSERT_EQ(r.layers.size(), 4u);
  for (const LayerReadiness& l : r.layers) {
    for (int i = 0; i < kRecipeCount; ++i) {
      bool all = true;
      for (const OperandReadiness& o : r.operands)
        if (o.layer == l.layer) all &= o.misfit[std::size_t(i)] == Misfit::None;
      EXPECT_EQ(std::count(l.fitting.begin(), l.fitting.end(), static_cast<Recipe>(i)), all ? 1 : 0)
          << l.layer << " " << fpscope::contract::kRecipes[i].name;
    }
  }

  FitThresholds impossible;
  impossible.min_sqnr_db_e4m3 = impossible.min_sqnr_db_e5m2 = 200;
  const Fp8Readiness none = fp8_readiness(*t, impossible);
  ASSERT_EQ(none.layers.size(), 4u);
  for (std::size_t i = 0; i < none.layers.size(); ++i) {
    const LayerReadiness& l = none.layers[i];
    EXPECT_TRUE(l.keep_high_precision) << l.layer;
    EXPECT_FALSE(l.best_8bit);
    ASSERT_TRUE(l.closest && l.failing_operand);
    EXPECT_EQ(l.failure, Misfit::Sqnr);
    EXPECT_GT(l.severity, 1);
    if (i > 0) EXPECT_GE(none.layers[i - 1].severity, l.severity);
  }

  // The HTML report's grid: a row per operand, a cell per recipe, each with the SQNR the report has.
  std::ostringstream html;
  export_html(*t, html);
  EXPECT_NE(html.str().find("<h2>fp8 readiness</h2>"), std::string::npos);
  for (const OperandReadiness& o : r.operands)
    for (const fpscope::contract::RecipeInfo& info : fpscope::contract::kRecipes)
      if (const std::string text = recipe_cell_text(o, info.id); !text.empty())
        EXPECT_NE(html.str().find(">" + text + "</td>"), std::string::npos) << o.layer << " " << info.name;

  // mptrain's fp8 modes: a mode keeps a layer when the recipe it applies to one of the layer's
  // operands (its gradient recipe to gradients, its forward recipe to the others) does not fit.
  for (const Fp8Readiness* readiness : {&r, &none}) {
    const Fp8Advice advice = fp8_advice(*readiness);
    ASSERT_EQ(advice.modes.size(), 10u);  // the modes whose gradients a forecast recipe replays
    ASSERT_TRUE(advice.best);
    for (const Fp8ModeAdvice& m : advice.modes) {
      std::set<std::string> expected;
      for (const OperandReadiness& o : readiness->operands) {
        const Recipe applied = o.operand == fpscope::contract::Operand::Gradient ? *m.mode.gradient : m.mode.forward;
        if (o.misfit[std::size_t(applied)] != Misfit::None) expected.insert(o.layer);
      }
      EXPECT_EQ(std::set<std::string>(m.keep.begin(), m.keep.end()), expected) << m.mode.recipe << " " << m.mode.format;
      EXPECT_EQ(m.reasons.size(), m.keep.size());
      EXPECT_LE(advice.modes[*advice.best].keep.size(), m.keep.size());
    }
  }
  EXPECT_EQ(fp8_advice(none).modes[0].keep.size(), 4u);  // nothing fits: every layer stays bf16

  // The CLI writes the best mode's list, and mptrain trains with the flags it suggests.
  const std::string dir = fpscope::test::temp_dir() + "/fp8_advice";
  const std::string advise_cmd = std::string(FPSCOPE_BIN) + " advise " + path + " -o " + dir;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(advise_cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) out.append(buffer, n);
  pipe.reset();
  const std::string marker = "Suggested mptrain flags for fp8:\n";
  const auto at = out.find(marker);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string flags = out.substr(at + marker.size(), out.find('\n', at + marker.size()) - at - marker.size());
  const Fp8Advice advised = fp8_advice(r);
  const Fp8ModeAdvice& best = advised.modes[*advised.best];
  EXPECT_NE(flags.find("--precision fp8 " + mptrain_fp8_flags(best.mode) + " --fp8-keep-bf16 @"), std::string::npos)
      << flags;
  std::ifstream list(dir + "/fp8_keep_bf16.txt");
  std::vector<std::string> listed;
  for (std::string line; std::getline(list, line);)
    if (!line.empty() && line[0] != '#') listed.push_back(line);
  EXPECT_EQ(listed, best.keep);
  const std::string train = std::string(MPTRAIN_BIN) + kCommon + " " + flags + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(train.c_str()), 0) << train;
}

// `compare` of a forecast run (amp-bf16, --recipes operands) with an fp8 run of the same seed: every
// operand of the four matrix layers has a row; at step 0 the weights and conv1's input are the same
// values in both runs, and there the forecast's counts equal the quantize kernels'; B's totals are
// those of its quantize launches, read here straight from SQL.
TEST_F(RealRun, CompareSetsTheForecastAgainstAnFp8Run) {
  const std::string forecast = fpscope::test::temp_dir() + "/fp8_forecast.sqlite";
  const std::string cmd = fpscope::test::traced_command(forecast, "--recipes operands", "--precision amp-bf16");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto fp8 = traced("fp8_outcome", "--precision fp8 --fp8-recipe delayed");
  const Comparison c = compare(*Trace::open(forecast), *Trace::open(fp8));
  ASSERT_TRUE(c.fp8);
  EXPECT_STREQ(c.fp8->mode.recipe, "delayed");
  ASSERT_EQ(c.fp8->rows.size(), 12u);
  EXPECT_GE(c.fp8->step0_compared, 5);  // four weights and conv1's input at least
  EXPECT_EQ(c.fp8->step0_equal, c.fp8->step0_compared);
  uint64_t lost_at_step0 = 0;
  for (const Fp8OutcomeRow& r : c.fp8->rows) {
    SCOPED_TRACE(r.layer + " " + fpscope::contract::operand_name(r.operand));
    EXPECT_EQ(r.recipe, r.operand == fpscope::contract::Operand::Gradient ? Recipe::DelayedE5M2 : Recipe::DelayedE4M3);
    if (r.operand == fpscope::contract::Operand::Weight ||
        (r.layer == "conv1" && r.operand == fpscope::contract::Operand::Activation)) {
      EXPECT_TRUE(r.step0_same_operand);
      lost_at_step0 += r.b_step0_underflow.value_or(0) + r.b_step0_subnormal.value_or(0);
    }
    EXPECT_GE(r.a_rank, 1);
    EXPECT_GE(r.b_rank, 1);
    EXPECT_EQ(r.a_quantized, r.b_quantized);  // each operand tensor once a step, in both runs
    EXPECT_TRUE(r.b_saturated.has_value());    // the kernels count saturation
    if (r.step0_same_operand) EXPECT_EQ(r.a_step0_saturated, r.b_step0_saturated);
  }
  EXPECT_GT(lost_at_step0, 0u);  // delayed scaling's first step (scale 1) loses values: the counts are not all zero
  const std::string weights_b =
      " from v_kernels k join tensors x on x.kernel_id = k.id and x.role = 'in' and x.slot = 0 join tensors q on "
      "q.kernel_id = k.id and q.role = 'out' and q.slot = 0 join strings s on s.id = x.name_id "
      "join tensor_stores c on c.tensor_id = q.id where k.kernel like "
      "'fp8_quantize_%' and k.phase = 'forward' and s.value = 'fc1.weight'";
  for (const Fp8OutcomeRow& r : c.fp8->rows) {
    if (r.layer != "fc1" || r.operand != fpscope::contract::Operand::Weight) continue;
    EXPECT_EQ(int64_t(r.b_quantized), *sql_value(fp8, "select sum(x.count)" + weights_b));
    EXPECT_EQ(int64_t(r.b_underflow), *sql_value(fp8, "select sum(q.zero - x.zero)" + weights_b));
    EXPECT_EQ(int64_t(r.b_underflow), *sql_value(fp8, "select sum(c.flushed)" + weights_b));
    EXPECT_EQ(int64_t(r.b_subnormal), *sql_value(fp8, "select sum(q.subnormal)" + weights_b));
    EXPECT_EQ(int64_t(r.b_saturated.value_or(-1)), *sql_value(fp8, "select sum(c.overflowed)" + weights_b));
  }
  // The learning report's narrowing stores are the 16-bit ones: the quantize kernels' counts are
  // compare's.
  EXPECT_GT(*sql_value(fp8, "select count(*) from v_tensor_stores where dtype_name in ('e4m3', 'e5m2')"), 0);
  for (const auto& store : learning(*Trace::open(fp8)).stores) EXPECT_TRUE(store.dtype == "f16" || store.dtype == "bf16") << store.dtype;
  // Not an fp8 run, or no forecast: nothing to set side by side.
  EXPECT_FALSE(compare(*Trace::open(forecast), *Trace::open(forecast)).fp8);
  EXPECT_FALSE(compare(*Trace::open(fp8), *Trace::open(fp8)).fp8);
}

// A trace made without --recipes says it holds no forecast; one that asked for it but measured no
// operand it knows (here only the ReLUs) says that.
TEST_F(RealRun, Fp8ReadinessOfATraceWithoutForecast) {
  const auto path = traced("no_fp8", "");
  auto t = Trace::open(path);
  EXPECT_FALSE(has_fp8_forecast(*t));
  const Fp8Readiness r = fp8_readiness(*t);
  EXPECT_FALSE(r.forecast);
  EXPECT_FALSE(r.asked_without_operands);
  EXPECT_TRUE(r.operands.empty() && r.layers.empty());
  std::ostringstream html;
  export_html(*t, html);
  EXPECT_EQ(html.str().find("fp8 readiness"), std::string::npos);

  const std::string asked = fpscope::test::temp_dir() + "/fp8-relu.sqlite";
  const std::string cmd = fpscope::test::traced_command(asked, "--recipes operands --ops 'relu*'", "");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Fp8Readiness a = fp8_readiness(*Trace::open(asked));
  EXPECT_FALSE(a.forecast);
  EXPECT_TRUE(a.asked_without_operands);
}

const ParamLearning* param_named(const LearningReport& r, const std::string& param) {
  for (const ParamLearning& p : r.params)
    if (p.param == param) return &p;
  return nullptr;
}

// A bf16 run without master weights at SGD's lr 1e-4 loses most updates: the learning report names
// its weights with the shares and ratios that direct SQL over param_updates gives, advises fp32
// master weights or stochastic rounding, and the report's text says so. With fp32 master weights
// (amp-bf16) nothing is flagged, nor with stochastic rounding for fc1, whose magnitude it keeps.
TEST_F(RealRun, LearningNamesTheWeightsWhoseUpdatesAreLost) {
  const std::string sgd = "--momentum 0 --lr 1e-4 ";
  const auto path = traced("learning_bf16", sgd + "--precision bf16");
  auto t = Trace::open(path);
  ASSERT_TRUE(has_learning_counts(*t));
  const LearningReport r = learning(*t);
  ASSERT_TRUE(r.measured_updates);
  ASSERT_EQ(r.params.size(), 10u);
  for (const char* name : {"fc1.weight", "fc2.weight", "conv1.weight", "conv2.weight"}) {
    SCOPED_TRACE(name);
    const ParamLearning* p = param_named(r, name);
    ASSERT_NE(p, nullptr);
    const std::string where = std::string(" from param_updates u join strings s on s.id = u.name_id where s.value = '") +
                              name + "'";
    EXPECT_EQ(p->lost, fpscope::test::sql_value(path, "select sum(lost)" + where));
    EXPECT_EQ(p->nonzero, fpscope::test::sql_value(path, "select sum(nonzero)" + where));
    EXPECT_DOUBLE_EQ(*p->lost_update_share, double(*p->lost) / double(*p->nonzero));
    EXPECT_GE(*p->lost_update_share, 0.5);
    EXPECT_NEAR(*p->update_ratio, *fpscope::test::sql_value(path, "select sqrt(sum(applied_sq_sum) / sum(weight_sq_sum))" + where),
                1e-15 * *p->update_ratio);
    EXPECT_EQ(p->steps, 10);
    EXPECT_EQ(p->dtype, "bf16");
    EXPECT_FALSE(p->master);
    EXPECT_TRUE(p->flagged);
    EXPECT_EQ(p->first_lost_step, 0);
    EXPECT_NE(p->advice.find("--precision amp-bf16"), std::string::npos) << p->advice;
    EXPECT_NE(p->advice.find("--stochastic-rounding"), std::string::npos) << p->advice;
  }
  // The layer's figure sums its parameters.
  for (const LayerLearning& l : r.layers) {
    if (l.layer != "fc1") continue;
    const auto lost = fpscope::test::sql_value(path, "select sum(lost) * 1.0 / sum(nonzero) from v_param_updates where param like 'fc1.%'");
    EXPECT_DOUBLE_EQ(*l.lost_update_share, *lost);
    EXPECT_TRUE(l.flagged);
  }
  // Each step's point is its row's ratio.
  const auto first = fpscope::test::sql_value(path, "select update_ratio from v_param_updates where param = 'fc1.weight' and step = 3");
  for (const UpdatePoint& p : r.points)
    if (p.param == "fc1.weight" && p.step == 3) EXPECT_DOUBLE_EQ(*p.update_ratio, *first);
  EXPECT_EQ(r.points.size(), 100u);
  // The command line says it in words.
  const std::string text_cmd = std::string(FPSCOPE_BIN) + " report " + path + " --section learning";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(text_cmd.c_str(), "r"), pclose);
  std::string text;
  for (char buf[4096]; fgets(buf, sizeof buf, pipe.get());) text += buf;
  EXPECT_NE(text.find("bf16 parameters (share of nonzero updates lost)"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("fc1.weight {}", human_percent(*param_named(r, "fc1.weight")->lost_update_share))),
            std::string::npos) << text;
  EXPECT_NE(text.find("Advice: keep fp32 master weights (mptrain --precision amp-bf16"), std::string::npos) << text;

  const LearningReport amp = learning(*Trace::open(traced("learning_amp", sgd + "--precision amp-bf16")));
  for (const ParamLearning& p : amp.params) {
    EXPECT_FALSE(p.flagged) << p.param;
    EXPECT_LT(p.lost_update_share.value_or(0), 0.01) << p.param;
  }
  ASSERT_NE(param_named(amp, "fc1.weight"), nullptr);
  EXPECT_TRUE(param_named(amp, "fc1.weight")->master);
  const LearningReport sr = learning(*Trace::open(traced("learning_sr", sgd + "--precision bf16 --stochastic-rounding")));
  const ParamLearning* fc1 = param_named(sr, "fc1.weight");
  ASSERT_NE(fc1, nullptr);
  EXPECT_GE(*fc1->lost_update_share, 0.5);
  EXPECT_LT(std::fabs(*fc1->lost_magnitude_share), 0.03);
  EXPECT_FALSE(fc1->flagged);
}

// A loss scale far too small (amp-fp16, static 0.001) flushes gradients at the backward kernels'
// stores: the report names those stores with the shares of tensor_stores, the step that flushed the
// most and the scale then, and advises a larger or dynamic loss scale.
TEST_F(RealRun, LearningNamesTheGradientsFlushedAtTheStore) {
  const auto path = traced("learning_flush", "--precision amp-fp16 --loss-scale static:0.001");
  const LearningReport r = learning(*Trace::open(path));
  ASSERT_TRUE(r.measured_stores);
  ASSERT_FALSE(r.stores.empty());
  const StoreLoss& worst = r.stores.front();
  EXPECT_TRUE(worst.flagged);
  EXPECT_EQ(worst.phase, "backward");
  const std::string where = " from v_tensor_stores where tensor = '" + worst.tensor + "' and phase = 'backward' and kernel = '" +
                            worst.kernel + "'";
  EXPECT_EQ(worst.flushed, fpscope::test::sql_value(path, "select sum(flushed)" + where));
  EXPECT_EQ(worst.results, fpscope::test::sql_value(path, "select sum(results)" + where));
  EXPECT_DOUBLE_EQ(worst.worst_flushed_share, *fpscope::test::sql_value(path, "select max(flushed_share)" + where));
  EXPECT_GE(*worst.flushed_share(), r.thresholds.flushed_share);
  ASSERT_TRUE(worst.worst_loss_scale);
  EXPECT_DOUBLE_EQ(*worst.worst_loss_scale, double(0.001f));  // the scale mptrain logged, an fp32 value
  EXPECT_EQ(worst.advice, "use a larger or dynamic loss scale (--loss-scale dynamic)");
  // Sorted: flagged first, then by the share flushed.
  for (size_t i = 1; i < r.stores.size(); ++i)
    if (r.stores[i].flagged == r.stores[i - 1].flagged)
      EXPECT_LE(r.stores[i].flushed_share().value_or(0), r.stores[i - 1].flushed_share().value_or(0));
}

// Forecast: a bf16 run without master weights whose learning rate decays (SGD, exponential:0.96)
// measured on its first 40 of 100 steps. The largest weight's computed update/weight falls toward
// bf16's spacing 2^-8: it is flagged before it gets there, by the least-squares line through log2 of
// the ratio that direct SQL gives, and the same run measured to its end reaches 2^-8 near the step
// forecast, where half or more of its updates are lost (fewer than half before it).
TEST_F(RealRun, LearningForecastsWhenFallingUpdatesReachTheWeightsSpacing) {
  const std::string args = kCommon + " --train-subset 3200 --precision bf16 --momentum 0 --lr 0.1 --lr-schedule exponential:0.96";
  const std::string early = fpscope::test::temp_dir() + "/forecast_early.sqlite",
                    whole = fpscope::test::temp_dir() + "/forecast_whole.sqlite";
  for (const auto& [path, options] : {std::pair{early, std::string(" --steps 0-39")}, std::pair{whole, std::string()}}) {
    const std::string cmd = std::string(FPSCOPE_BIN) + " run -q --force" + options + " -o " + path + " -- " + MPTRAIN_BIN +
                            args + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  const LearningReport r = learning(*Trace::open(early));
  const auto fc1 = std::find_if(r.forecasts.begin(), r.forecasts.end(),
                                [](const UpdateForecast& f) { return f.param == "fc1.weight"; });
  ASSERT_NE(fc1, r.forecasts.end());
  EXPECT_EQ(fc1->dtype, "bf16");
  EXPECT_TRUE(fc1->computed);
  EXPECT_EQ(fc1->spacing_log2, -8);
  EXPECT_EQ(fc1->model, GrowthModel::Exponential);  // the rate decays by a factor a step
  EXPECT_EQ(fc1->first_step, 0);
  EXPECT_EQ(fc1->last_step, 39);
  // The trainer logs the rate of every step's update, measured or not: update n at 0.1 * 0.96^(n-1).
  EXPECT_EQ(r.lr.first_step, 0);
  EXPECT_DOUBLE_EQ(*r.lr.first, 0.1);
  EXPECT_EQ(r.lr.last_step, 99);
  EXPECT_NEAR(*r.lr.last, 0.1 * std::pow(0.96, 99), 1e-15);
  for (const UpdateForecast& f : r.forecasts) {
    EXPECT_GT(f.crossing_step, 39) << f.param;
    EXPECT_TRUE(f.computed) << f.param;  // mptrain's kernels report the computed update, a bias at zero too
  }

  // The line, by the usual least-squares sums over (step, log2 computed_ratio).
  const std::string rows = "from v_param_updates where param = 'fc1.weight' and computed_ratio > 0";
  const auto sum = [&](const std::string& term) { return *fpscope::test::sql_value(early, "select sum(" + term + ") " + rows); };
  const std::string y = "(ln(computed_ratio) / ln(2.0))";
  const double n = sum("1"), sx = sum("step"), sy = sum(y), sxx = sum("step * step"), sxy = sum("step * " + y);
  ASSERT_EQ(n, 40);
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), at_39 = sy / n + slope * (39 - sx / n);
  EXPECT_NEAR(fc1->log2_now, at_39, 1e-9);
  EXPECT_NEAR(fc1->log2_per_100_steps, 100 * slope, 1e-7);
  const double steps_left = (-8 - at_39) / slope;
  if (std::fabs(steps_left - std::round(steps_left)) > 1e-6)
    EXPECT_EQ(fc1->crossing_step, 39 + static_cast<int64_t>(std::ceil(steps_left)));

  // The event list places it on the optimizer launch that updated fc1.weight in step 39.
  EventQuery forecasts_only;
  forecasts_only.kinds.fill(false);
  forecasts_only.kinds[static_cast<size_t>(EventKind::Forecast)] = true;
  const EventPage page = events(*Trace::open(early), forecasts_only);
  const auto event = std::find_if(page.events.begin(), page.events.end(), [](const Event& e) { return e.tensor == "fc1.weight"; });
  ASSERT_NE(event, page.events.end());
  EXPECT_EQ(event->step, 39);
  EXPECT_EQ(event->kernel, "sgd_step");
  EXPECT_EQ(event->kernel_id, fpscope::test::sql_value(early, "select kernel_id from v_param_updates where param = "
                                                               "'fc1.weight' and step = 39"));
  EXPECT_EQ(event->amount, static_cast<double>(fc1->crossing_step));

  // The whole run: where the ratio (a centred mean over 5 steps) first reaches 2^-8.
  std::optional<int64_t> reached;
  for (int64_t step = 2; step < 98 && !reached; ++step) {
    const auto mean = fpscope::test::sql_value(
        whole, fmt::format("select avg(ln(computed_ratio) / ln(2.0)) from v_param_updates where param = 'fc1.weight' "
                           "and step between {} and {}", step - 2, step + 2));
    if (mean && *mean <= -8) reached = step;
  }
  ASSERT_TRUE(reached);
  EXPECT_LE(std::abs(*reached - fc1->crossing_step), std::max<int64_t>(3, (fc1->crossing_step - 39) / 2))
      << "forecast step " << fc1->crossing_step << ", reached at " << *reached;
  const auto lost_share = [&](int64_t from, int64_t to) {
    return *fpscope::test::sql_value(whole, fmt::format("select sum(lost) * 1.0 / sum(nonzero) from v_param_updates "
                                                        "where param = 'fc1.weight' and step between {} and {}", from, to));
  };
  EXPECT_LT(lost_share(30, 39), 0.5);
  EXPECT_GE(lost_share(*reached, *reached + 9), 0.5);
  // Measured to the end the ratio is past the spacing: no forecast for it, its lost updates flagged.
  const LearningReport w = learning(*Trace::open(whole));
  for (const UpdateForecast& f : w.forecasts) EXPECT_NE(f.param, "fc1.weight");
  EXPECT_TRUE(param_named(w, "fc1.weight")->flagged);

  // The command line says it in words, next to the learning rate the trainer logged.
  const std::string text_cmd = std::string(FPSCOPE_BIN) + " report " + early + " --section learning";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(text_cmd.c_str(), "r"), pclose);
  std::string text;
  for (char buf[4096]; fgets(buf, sizeof buf, pipe.get());) text += buf;
  EXPECT_NE(text.find(fmt::format("reaches bf16's relative spacing 2^-8 at about step {}", fc1->crossing_step)),
            std::string::npos) << text;
  EXPECT_NE(text.find("Learning rate (as the program logged it): 0.1 at step 0, "), std::string::npos) << text;
}


}  // namespace
