// Learning: the failures that make no NaN. Weight updates that rounding lost (param_updates),
// results that a kernel's narrowing store flushed to zero (tensor_stores), the update-to-weight
// ratio per parameter and step, the loss curve's trend, and one line of advice per finding.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area); docs/statistics.md
// ("Parameter updates", "Narrowing stores") defines every number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/trace.h"
#include "fpscope/analysis/trend.h"

namespace fpscope::analysis {

// When a finding is reported.
struct LearningThresholds {
  double lost_update_share = 0.1;  // a parameter loses at least this share of its nonzero updates
  double flushed_share = 0.01;     // a store flushes at least this share of its nonzero results (advise's underflow share)
  double small_step_ratio = 1e-4;  // a computed update-to-weight ratio below this is a small step
};

// One parameter over the optimizer steps the trace measured (its lowest rank's rows).
struct ParamLearning {
  std::string param;    // as the program names its weight: "fc1.weight" (a master copy's ".master" left out)
  std::string layer;    // the name up to its last dot: "fc1"
  std::string dtype;    // of the values the optimizer updates: "bf16", or "f32" for fp32 master weights
  bool master = false;  // the optimizer updates an fp32 master copy of a narrower weight
  // Its nonzero updates are the elements with a nonzero gradient (a front end's: the optimizer's
  // own update is not visible), not the kernel's computed update.
  bool nonzero_from_gradient = false;
  int64_t steps = 0, elements = 0;  // steps measured; elements of the parameter
  int64_t changed = 0;              // element updates that changed the stored value, summed over steps
  std::optional<int64_t> nonzero, lost;  // summed; unknown where no step knew its computed update
  std::optional<double> lost_update_share;     // lost / nonzero
  std::optional<double> lost_magnitude_share;  // 1 - sum |applied| / sum |computed|
  std::optional<double> update_ratio;          // sqrt(sum applied^2 / sum weight^2): rms over the run
  std::optional<double> computed_ratio;        // the same of the computed update
  std::optional<int64_t> first_lost_step;      // first step whose lost share reached the threshold
  bool flagged = false;                        // lost share at or above the threshold
  std::string advice;                          // one line, for a flagged parameter
  std::string remedy;                          // its short form: "fp32 master weights or stochastic rounding"
  std::string type() const { return master ? dtype + " master" : dtype; }  // "bf16", "f32 master"
};

// A layer's parameters together (their updates summed over parameters and steps).
struct LayerLearning {
  std::string layer;
  int64_t params = 0;
  std::optional<int64_t> nonzero, lost;
  std::optional<double> lost_update_share, lost_magnitude_share, update_ratio, computed_ratio;
  bool flagged = false;  // one of its parameters is
};

// One tensor name's narrowing stores over the steps measured: "fc1.weight.grad" in backward.
struct StoreLoss {
  std::string tensor, layer, phase, kernel, dtype;
  int64_t stores = 0;  // launches counted
  int64_t results = 0, flushed = 0, subnormal = 0, overflowed = 0;
  std::optional<double> flushed_share() const {
    return results > 0 ? std::optional<double>(double(flushed) / double(results)) : std::nullopt;
  }
  std::optional<double> subnormal_share() const {
    return results > 0 ? std::optional<double>(double(subnormal) / double(results)) : std::nullopt;
  }
  // The store that flushed the largest share, its step and the loss scale in force then.
  std::optional<int64_t> worst_step;
  double worst_flushed_share = 0;
  std::optional<double> worst_loss_scale;
  std::optional<int64_t> first_flush_step;  // first step with a flushed value
  bool flagged = false;
  std::string advice, remedy;  // as ParamLearning's
};

// One parameter's update at one step (the GUI's ratio view, `compare`).
struct UpdatePoint {
  std::string param;
  int64_t step = 0;
  std::optional<double> update_ratio, computed_ratio, lost_update_share;
};

// The loss curve in brief: the mean of its first and of its last quarter of steps.
struct LossTrend {
  int64_t steps = 0;
  std::optional<double> first, last;  // the first and last finite loss
  std::optional<double> early_mean, late_mean;
  std::optional<double> relative_change() const {
    return early_mean && late_mean && *early_mean != 0 ? std::optional<double>((*late_mean - *early_mean) / *early_mean)
                                                       : std::nullopt;
  }
};

// A 16-bit parameter updated without fp32 master weights (nor stochastic rounding) whose
// update-to-weight ratio falls toward the relative spacing of its type (the unit roundoff
// 2^-(mantissa bits + 1): 2^-8 bf16, 2^-11 fp16), found while the ratio is still above it, with the
// step where the fitted trend reaches it: there about half of its elements' updates round away, more
// after. The ratio fitted is the computed update's where the kernel reported it at every step fitted,
// else the applied change's (a front end's, leaving out steps where nothing moved); the fit is
// trend.h's over the parameter's last kUpdateForecastWindow measured steps. A ratio carries each
// batch's gradient noise: its line is a trend when its slope is kUpdateTrendT standard errors or
// more below zero (rather than by the share of the spread it explains), and its last quarter of steps
// still falls at half the fitted rate, allowing kUpdateRecentSlackSe standard errors of their slope.
struct UpdateForecast : ForecastLine {  // of log2 of the ratio: its fall (log2_per_100_steps < 0)
  std::string param, layer, dtype;  // as ParamLearning's
  bool computed = true;             // the computed update's ratio was fitted (else the applied change's)
  int spacing_log2 = 0;             // the edge: log2 of the type's unit roundoff
  std::string summary, advice;
};
inline constexpr int kUpdateForecastWindow = 50;
inline constexpr double kUpdateTrendT = 4;
inline constexpr double kUpdateRecentSlackSe = 2;
// How many forecasts the report's notes, the HTML export, the GUI's findings and the event list
// show, the nearest first (the table and the JSON hold them all): under a decaying learning rate every
// parameter falls together.
inline constexpr std::size_t kForecastsShown = 8;
// learning(trace).forecasts (the event list's source).
std::vector<UpdateForecast> update_forecast(const Trace& trace);

// The learning rate the program logged (scalar "lr"; mptrain under --lr-schedule), first and last.
struct LrTrend {
  std::optional<int64_t> first_step, last_step;
  std::optional<double> first, last;
};

struct LearningReport {
  bool measured_updates = false;  // the trace has param_updates rows
  bool measured_stores = false;   // ... tensor_stores rows
  LearningThresholds thresholds;
  std::vector<ParamLearning> params;  // flagged first, by updates lost; then by lost share
  std::vector<LayerLearning> layers;  // by name ("" for parameters outside any layer)
  std::vector<StoreLoss> stores;      // stores that lost anything: flagged first, by flushed share
  std::vector<UpdatePoint> points;    // by param, then step
  std::vector<UpdateForecast> forecasts;  // ratios falling toward their spacing, the nearest crossing first
  LossTrend loss;
  LrTrend lr;
  std::optional<std::string> loss_scale_mode;  // the run's --loss-scale (config), when it logged one
};

LearningReport learning(const Trace& trace, const LearningThresholds& thresholds = {});
// Whether the trace holds any parameter update or store count (cheap).
bool has_learning_counts(const Trace& trace);

// The flagged parameters that share one line of advice, most severe first: how the report and the
// GUI tell them together.
struct AdviceGroup {
  std::string advice;
  std::vector<const ParamLearning*> params;  // into the report's params
  std::optional<int64_t> from_step;          // the earliest first_lost_step among them
  std::string type;                          // their common "bf16" / "f32 master", "" when they differ
  std::string list() const;                  // "fc1.weight 99.27%, fc2.weight 99.20%" (each type when they differ)
  std::string sentence() const;              // "Updates lost from step 0 in 9 bf16 parameters (...): LIST. Advice: ADVICE."
};
std::vector<AdviceGroup> advice_groups(const LearningReport& r);

// The forecasts' advice, each distinct line once, in the forecasts' order.
std::vector<std::string> forecast_advice(const LearningReport& r);

// "fc1.weight.master" -> "fc1.weight"; "fc1.weight" -> "fc1" (layer_of_param).
std::string param_of_name(const std::string& name);
std::string layer_of_param(const std::string& param);

// What a trace without these tables, or a run that measured none, lacks, as one sentence.
std::string no_updates_text(const LearningReport& r);

}  // namespace fpscope::analysis
