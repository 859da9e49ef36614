// A trend of a magnitude over training steps toward an edge, shared by the forecasts of ranges
// heading for fp16's largest value (forecast(), why.h) and of update-to-weight ratios falling toward
// the weights' relative spacing (update_forecast(), learning.h).
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include "fpscope/analysis/why.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace fpscope::analysis {

struct Trend {
  GrowthModel model = GrowthModel::Exponential;
  double log2_per_step = 0;   // the line through log2 |v|: binades a step (either model)
  double value_per_step = 0;  // the line through |v| itself: the linear model's change a step (0 for the other)
  double log2_now = 0;        // the log2 line's value at the last step
  double steps_to_edge = 0;   // from the last step to where the chosen line meets the edge (> 0)
  int64_t points = 0, first_step = 0, last_step = 0;
  int64_t crossing_step = 0;  // last_step + steps_to_edge, rounded up
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
// one through |v| (linear change), keeps the model the points support (why.h: kExponentialFitMargin)
// and returns the trend if it is one that heads for `edge_log2` (`upward`: from below; else from
// above): at least 5 points, the chosen line is a trend by `rule`, it moves a quarter binade or more
// over them toward the edge, its last quarter (three points at least) still moves at
// kRecentRateShare of its rate or more (less `rule`'s allowance), and the chosen line has not
// reached the edge at the last point. nullopt otherwise. Of the two models the one that reaches the
// edge later is kept unless the other fits clearly better (kExponentialFitMargin): the straight
// line for a rise, exponential decay for a fall.
std::optional<Trend> fit_trend(const std::vector<std::pair<double, double>>& log2_points, bool upward, double edge_log2,
                               const TrendRule& rule);

}  // namespace fpscope::analysis
