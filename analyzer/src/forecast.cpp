// Trends toward an edge (trend.h: two least-squares lines, the model the points support) and the
// forecasts of ranges heading for fp16's largest value built on them: for each row of the forward
// activations, the stored gradients and the weights, the last measured steps give the step where the
// range would cross fp16's edge, while the trend lasts (why.h, RangeForecast).
#include "report_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace fpscope::analysis {

namespace {

struct Fit {
  double slope = 0, value_at_last = 0, r2 = 0;
  double slope_se = 0;  // the slope's standard error, from the residuals (0 with two points or fewer)
};

// Least squares of y on x; r2 is the share of y's variance the line explains.
Fit fit_line(const std::vector<std::pair<double, double>>& points) {
  Fit f;
  const double n = static_cast<double>(points.size());
  double sx = 0, sy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& [x, y] : points) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
    syy += (y - my) * (y - my);
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  f.value_at_last = my + f.slope * (points.back().first - mx);
  f.r2 = syy > 0 ? (sxy * sxy) / (sxx * syy) : 1.0;
  if (n > 2) f.slope_se = std::sqrt(std::max(0.0, syy - f.slope * sxy) / (n - 2) / sxx);
  return f;
}

// Squared error, in log2, of fitted line `f` at the points (x, log2 |v|): a line through log2 |v|,
// or (`in_value`) a line through |v| itself, which cannot stand for a magnitude where it reaches
// zero or below: infinite there.
double log2_error(const std::vector<std::pair<double, double>>& log2_points, const Fit& f, bool in_value) {
  double error = 0;
  const double last = log2_points.back().first;
  for (const auto& [x, y] : log2_points) {
    double fitted = f.value_at_last + f.slope * (x - last);
    if (in_value) {
      if (fitted <= 0) return std::numeric_limits<double>::infinity();
      fitted = std::log2(fitted);
    }
    error += (fitted - y) * (fitted - y);
  }
  return error;
}

}  // namespace

const char* growth_model_name(GrowthModel model) {
  return model == GrowthModel::Exponential ? "exponential" : "linear";
}

void ForecastLine::take(const Trend& t) {
  model = t.model;
  log2_per_100_steps = 100 * t.log2_per_step;
  per_step = t.value_per_step;
  points = t.points;
  first_step = t.first_step;
  last_step = t.last_step;
  log2_now = t.log2_now;
  crossing_step = t.crossing_step;
}

std::optional<Trend> fit_trend(const std::vector<std::pair<double, double>>& points, bool upward, double edge_log2,
                              const TrendRule& rule) {
  if (points.size() < 5) return std::nullopt;
  const Fit f = fit_line(points);
  std::vector<std::pair<double, double>> values;
  for (const auto& [x, y] : points) values.emplace_back(x, std::exp2(y));
  const Fit lin = fit_line(values);
  // The model that reaches the edge later is kept unless the other fits clearly better: a straight line
  // for a rise (exponential growth overtakes it), exponential decay for a fall (a straight line reaches
  // the edge first).
  const double exponential_error = log2_error(points, f, false), linear_error = log2_error(points, lin, true);
  const bool exponential = upward ? exponential_error <= kExponentialFitMargin * linear_error
                                  : !(linear_error <= kExponentialFitMargin * exponential_error);
  const Fit& chosen = exponential ? f : lin;
  const double sign = upward ? 1.0 : -1.0;  // toward the edge is positive
  const double move = sign * f.slope * (points.back().first - points.front().first);
  // A steady trend (the chosen line explains most of the spread), a quarter binade over the points
  // at least, toward the edge.
  if (chosen.r2 < rule.min_r2 || sign * chosen.slope <= 0 || move < 0.25) return std::nullopt;
  if (sign * chosen.slope < rule.min_slope_t * chosen.slope_se) return std::nullopt;
  // And still going at the end: the last quarter of the points (three at least) moves at
  // kRecentRateShare of the fitted rate or more. A trend that has levelled off is none.
  const size_t recent = std::max<size_t>(3, points.size() / 4);
  const auto& fitted = exponential ? points : values;
  const Fit end = fit_line({fitted.end() - static_cast<std::ptrdiff_t>(recent), fitted.end()});
  if (sign * end.slope + rule.recent_slack_se * end.slope_se < kRecentRateShare * sign * chosen.slope) return std::nullopt;
  // Not there yet by the chosen line (the two lines are fitted apart: a straight line's last value
  // can be past the edge where the log2 line's is not).
  const double now = exponential ? f.value_at_last : lin.value_at_last > 0 ? std::log2(lin.value_at_last) : -std::numeric_limits<double>::infinity();
  if (sign * (now - edge_log2) >= 0) return std::nullopt;
  Trend t;
  t.model = exponential ? GrowthModel::Exponential : GrowthModel::Linear;
  t.log2_per_step = f.slope;
  t.value_per_step = exponential ? 0.0 : lin.slope;
  t.log2_now = f.value_at_last;
  t.steps_to_edge = exponential ? (edge_log2 - f.value_at_last) / f.slope : (std::exp2(edge_log2) - lin.value_at_last) / lin.slope;
  t.points = static_cast<int64_t>(points.size());
  t.first_step = static_cast<int64_t>(points.front().first);
  t.last_step = static_cast<int64_t>(points.back().first);
  if (!(t.steps_to_edge > 0)) return std::nullopt;
  t.crossing_step = t.last_step + static_cast<int64_t>(std::ceil(t.steps_to_edge));
  return t;
}

std::vector<RangeForecast> forecast(const Trace& trace, int window) {
  std::vector<RangeForecast> out;
  const FormatLimits& fp16 = format_limits(Format::F16);
  const double top = std::log2(fp16.max_finite);
  const int64_t run_steps = std::max<int64_t>(summary(trace).steps, 1);
  for (const RangeView view : {RangeView::Activations, RangeView::GradientsScaled, RangeView::Weights}) {
    std::map<std::string, std::vector<const LayerStepCell*>> by_row;
    std::vector<std::string> order;
    const std::vector<LayerStepCell> cells = layer_step_ranges(trace, view);
    for (const LayerStepCell& c : cells) {
      auto [it, inserted] = by_row.try_emplace(c.layer);
      if (inserted) order.push_back(c.layer);
      it->second.push_back(&c);
    }
    for (const std::string& row : order) {
      auto& all = by_row[row];
      const size_t from = all.size() > static_cast<size_t>(window) ? all.size() - static_cast<size_t>(window) : 0;
      // Toward the largest value only: the smallest nonzero magnitude of weights and activations
      // is whichever value passes closest to zero, too noisy a trend to forecast.
      std::vector<std::pair<double, double>> points;
      for (size_t i = from; i < all.size(); ++i) {
        const auto& v = all[i]->absmax;
        if (all[i]->nonfinite == 0 && v && *v > 0) points.emplace_back(static_cast<double>(all[i]->step), std::log2(*v));
      }
      // A parameter that starts at zero (a bias) grows "exponentially" from nothing early in
      // training: not a trend toward the edge.
      if (view == RangeView::Weights && !points.empty() && points.front().second < -6) continue;
      const std::optional<Trend> t = fit_trend(points, true, top, TrendRule{});
      if (!t || t->steps_to_edge > 20.0 * static_cast<double>(run_steps)) continue;  // too far out to say
      const bool exponential = t->model == GrowthModel::Exponential;
      RangeForecast r;
      r.view = view;
      r.row = row;
      r.upward = true;
      r.take(*t);
      const std::string rate = exponential ? fmt::format("2^{:.2f} per 100 steps (exponential growth fits best)",
                                                         std::fabs(r.log2_per_100_steps))
                                           : fmt::format("by {} a step (a straight line fits best)",
                                                         human_number(t->value_per_step));
      r.summary = fmt::format("{} {} absmax grows {} over steps {} to {}: at this rate it exceeds fp16's largest value "
                              "at about step {}",
                              row, range_view_info(view).short_title, rate, r.first_step, r.last_step, r.crossing_step);
      out.push_back(std::move(r));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RangeForecast& a, const RangeForecast& b) { return a.crossing_step < b.crossing_step; });
  if (out.size() > 8) out.resize(8);  // the nearest first
  return out;
}

}  // namespace fpscope::analysis
