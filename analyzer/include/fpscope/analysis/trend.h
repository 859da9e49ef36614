// A trend of a magnitude over training steps toward an edge, shared by the forecasts of ranges
// heading for fp16's largest value (forecast(), why.h) and of update-to-weight ratios falling toward
// the weights' relative spacing (update_forecast(), learning.h).
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace fpscope::analysis {

// How a magnitude changes, as the fitted steps support it: by a factor a step (a straight line
// through its log2) or by an amount a step (a straight line through the values). Of the two, the
// one that reaches the edge later is kept unless the other's squared error, measured in log2 over
// the fitted steps, is at most kExponentialFitMargin of its own: the straight line for a rise
// (exponential growth overtakes it), exponential decay for a fall (a straight line reaches the edge
// first).
enum class GrowthModel { Exponential, Linear };
inline constexpr double kExponentialFitMargin = 0.5;
const char* growth_model_name(GrowthModel model);  // "exponential", "linear" (JSON, tables)
// A trend is forecast only while it lasts: the last quarter of the fitted steps must move toward the
// edge at this share of the fitted rate or more.
inline constexpr double kRecentRateShare = 0.5;

struct Trend {
  GrowthModel model = GrowthModel::Exponential;
  double log2_per_step = 0;   // the line through log2 |v|: binades a step (either model)
  double value_per_step = 0;  // the line through |v| itself: the linear model's change a step (0 for the other)
  double log2_now = 0;        // the log2 line's value at the last step
  double steps_to_edge = 0;   // from the last step to where the chosen line meets the edge (> 0)
  int64_t points = 0, first_step = 0, last_step = 0;
  int64_t crossing_step = 0;  // last_step + steps_to_edge, rounded up
};

// The fitted line a forecast reports (RangeForecast, UpdateForecast), taken from its Trend.
struct ForecastLine {
  GrowthModel model = GrowthModel::Exponential;
  double log2_per_100_steps = 0;  // the log2 line's rate over the fitted steps, in binades (either model)
  double per_step = 0;            // the linear model's change of the value a step (0 for the other)
  int64_t points = 0, first_step = 0, last_step = 0;  // the steps fitted
  double log2_now = 0;            // the log2 line's value at last_step
  int64_t crossing_step = 0;      // where the chosen line reaches the edge
  void take(const Trend& t);
};

// What makes a fitted line a trend. Ranges move smoothly: the line must explain most of their
// spread. An update-to-weight ratio carries each batch's gradient noise: its line must stand out of
// that noise (the slope this many of its standard errors from zero), and its last quarter is judged
// with the same allowance.
struct TrendRule {
  double min_r2 = 0.8;           // share of the points' spread the chosen line explains
  double min_slope_t = 0;        // the chosen slope over its standard error, toward the edge
  double recent_slack_se = 0;    // standard errors of the last quarter's slope allowed below kRecentRateShare
};

// Fits (step, log2 |v|) points, oldest first, by a line through log2 |v| (exponential change) and by
// one through |v| (linear change), keeps the model the points support (kExponentialFitMargin above)
// and returns the trend if it is one that heads for `edge_log2` (`upward`: from below; else from
// above): at least 5 points, the chosen line is a trend by `rule`, it moves a quarter binade or more
// over them toward the edge, its last quarter (three points at least) still moves at
// kRecentRateShare of its rate or more (less `rule`'s allowance), and the chosen line has not
// reached the edge at the last point. nullopt otherwise.
std::optional<Trend> fit_trend(const std::vector<std::pair<double, double>>& log2_points, bool upward, double edge_log2,
                               const TrendRule& rule);

}  // namespace fpscope::analysis
