// The trend fit shared by the forecasts (fpscope/analysis/trend.h), on series whose answer is known
// in closed form: an exact exponential and an exact straight line in each direction, noise that hides
// a slope, a trend that levelled off, and a straight line already past the edge.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "fpscope/analysis.h"

namespace {

using namespace fpscope::analysis;

using Points = std::vector<std::pair<double, double>>;  // (step, log2 |v|)

Points series(int first, int last, double (*log2_of)(double)) {
  Points p;
  for (int s = first; s <= last; ++s) p.emplace_back(s, log2_of(s));
  return p;
}

const TrendRule kNoisy{.min_r2 = 0, .min_slope_t = kUpdateTrendT, .recent_slack_se = kUpdateRecentSlackSe};

TEST(Trend, AnExactExponentialDecayReachesTheEdgeWhereItsLineDoes) {
  // log2 v = -5 - 0.05 step: -6.95 at step 39, 21.5 steps above the edge 2^-8.025.
  const Points p = series(0, 39, [](double s) { return -5 - 0.05 * s; });
  for (const TrendRule& rule : {TrendRule{}, kNoisy}) {
    const std::optional<Trend> t = fit_trend(p, false, -8.025, rule);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->model, GrowthModel::Exponential);
    EXPECT_NEAR(t->log2_per_step, -0.05, 1e-12);
    EXPECT_NEAR(t->log2_now, -5 - 0.05 * 39, 1e-12);
    EXPECT_NEAR(t->steps_to_edge, 21.5, 1e-9);
    EXPECT_EQ(t->crossing_step, 61);
    EXPECT_EQ(t->points, 40);
    EXPECT_EQ(t->first_step, 0);
    EXPECT_EQ(t->last_step, 39);
  }
  // The same line heading up is no fall, and a fall is no rise.
  EXPECT_FALSE(fit_trend(p, true, 0, TrendRule{}));
  EXPECT_FALSE(fit_trend(series(0, 39, [](double s) { return -5 + 0.05 * s; }), false, -8, TrendRule{}));
}

TEST(Trend, AStraightLineTowardZeroIsTheModelAndReachesTheEdgeFirst) {
  // v = 1 - 0.01 step: 0.61 at step 39, 35.5 steps above 0.255.
  const Points p = series(0, 39, [](double s) { return std::log2(1 - 0.01 * s); });
  const std::optional<Trend> t = fit_trend(p, false, std::log2(0.255), kNoisy);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->model, GrowthModel::Linear);
  EXPECT_NEAR(t->value_per_step, -0.01, 1e-12);
  EXPECT_NEAR(t->steps_to_edge, 35.5, 1e-9);
  EXPECT_EQ(t->crossing_step, 75);
}

TEST(Trend, ARiseKeepsTheStraightLineUnlessExponentialGrowthFitsClearlyBetter) {
  // v = 100 + 10 step, heading for 2^10 = 1024: a straight line, crossing at step 92.4 -> 93.
  const std::optional<Trend> line = fit_trend(series(0, 19, [](double s) { return std::log2(100 + 10 * s); }), true, 10,
                                              TrendRule{});
  ASSERT_TRUE(line);
  EXPECT_EQ(line->model, GrowthModel::Linear);
  EXPECT_EQ(line->crossing_step, 93);
  // log2 v = 2 + 0.2 step: 5.8 at step 19, 21.5 steps below 2^10.1.
  const std::optional<Trend> growth = fit_trend(series(0, 19, [](double s) { return 2 + 0.2 * s; }), true, 10.1, TrendRule{});
  ASSERT_TRUE(growth);
  EXPECT_EQ(growth->model, GrowthModel::Exponential);
  EXPECT_EQ(growth->crossing_step, 41);
}

TEST(Trend, NoiseThatHidesTheSlopeIsNoTrend) {
  // A fall of 0.01 binades a step under noise of sd 0.5: about 1.5 standard errors (0.0068) over 40
  // steps, though it falls more than a quarter binade.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.5);
  Points p;
  for (int s = 0; s < 40; ++s) p.emplace_back(s, -6 - 0.01 * s + noise(rng));
  EXPECT_FALSE(fit_trend(p, false, -12, kNoisy));
  // The same noise over a fall of 0.058 a step (about 8.5 standard errors) is one ...
  Points steep;
  for (const auto& [s, y] : p) steep.emplace_back(s, y - 0.048 * s);
  const std::optional<Trend> t = fit_trend(steep, false, -12, kNoisy);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->log2_per_step, -0.058, 0.02);
  // ... which the rule for smooth ranges refuses: the line explains about 65% of the spread, not 80%.
  EXPECT_FALSE(fit_trend(steep, false, -12, TrendRule{}));
}

TEST(Trend, AFallThatLevelledOffIsNoTrend) {
  // Falls 0.1 a step for 30 steps, then stays: the last quarter does not fall.
  const Points p = series(0, 39, [](double s) { return -4 - 0.1 * std::min(s, 30.0); });
  EXPECT_FALSE(fit_trend(p, false, -8, TrendRule{}));
  EXPECT_FALSE(fit_trend(p, false, -8, kNoisy));
}

TEST(Trend, NothingIsForecastPastTheEdgeOrFromTooFewPoints) {
  // Already below the edge at the last step.
  EXPECT_FALSE(fit_trend(series(0, 39, [](double s) { return -7 - 0.05 * s; }), false, -8, kNoisy));
  // A straight line whose own last value (0.0445, 2^-4.49) is past the edge 2^-4, though the line
  // through log2 ends above it.
  const Points p = series(0, 39, [](double s) { return std::log2(1.0 - 0.0245 * s); });
  EXPECT_FALSE(fit_trend(p, false, -4, kNoisy));
  EXPECT_FALSE(fit_trend(series(0, 3, [](double s) { return -5 - 0.5 * s; }), false, -8, kNoisy));  // 4 points
  EXPECT_FALSE(fit_trend({}, false, -8, kNoisy));
}

}  // namespace
