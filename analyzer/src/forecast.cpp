// Forecasts: ranges heading for fp16's largest value. For each row of the forward activations,
// the stored gradients and the weights, the last measured steps are fitted by exponential growth
// and by a straight line; the model the steps support gives the step where the range would cross
// fp16's edge, while the trend lasts (analysis.h, RangeForecast).
#include "report_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace fpscope::analysis {

namespace {

struct Fit {
  double slope = 0, value_at_last = 0, r2 = 0;
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

std::vector<RangeForecast> forecast(const Trace& trace, int window) {
  std::vector<RangeForecast> out;
  const FormatLimits& fp16 = format_limits(Format::F16);
  const double top = std::log2(fp16.max_finite), bottom = std::log2(fp16.min_subnormal);
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
      for (const bool upward : {true}) {
        std::vector<std::pair<double, double>> points;
        for (size_t i = from; i < all.size(); ++i) {
          const auto& v = upward ? all[i]->absmax : all[i]->min_nonzero;
          if (all[i]->nonfinite == 0 && v && *v > 0) points.emplace_back(static_cast<double>(all[i]->step), std::log2(*v));
        }
        if (points.size() < 5) continue;
        // A parameter that starts at zero (a bias) grows "exponentially" from nothing early in
        // training: not a trend toward the edge.
        if (view == RangeView::Weights && points.front().second < -6) continue;
        const Fit f = fit_line(points);
        std::vector<std::pair<double, double>> values;
        for (const auto& [x, y] : points) values.emplace_back(x, std::exp2(y));
        const Fit lin = fit_line(values);
        const bool exponential = log2_error(points, f, false) <= kExponentialFitMargin * log2_error(points, lin, true);
        const Fit& chosen = exponential ? f : lin;
        const double rise = f.slope * (points.back().first - points.front().first);
        // A steady trend (the chosen line explains most of the spread), a quarter binade over the
        // window at least, toward the edge, and not over it already.
        if (chosen.r2 < 0.8 || chosen.slope <= 0 || (upward ? rise < 0.25 : rise > -0.25)) continue;
        // And still going at the end: the last quarter of the steps (three at least) rises at half
        // the fitted rate or more. Growth that has levelled off (early training) is no trend.
        const size_t recent = std::max<size_t>(3, points.size() / 4);
        const auto& fitted = exponential ? points : values;
        const Fit end = fit_line({fitted.end() - static_cast<std::ptrdiff_t>(recent), fitted.end()});
        if (end.slope < kRecentRateShare * chosen.slope) continue;
        const double edge = upward ? top : bottom;
        if (upward ? f.value_at_last >= edge : f.value_at_last <= edge) continue;
        const double steps_left = exponential ? (edge - f.value_at_last) / f.slope
                                              : (std::exp2(edge) - lin.value_at_last) / lin.slope;
        const int64_t last = static_cast<int64_t>(points.back().first);
        if (steps_left > 20.0 * static_cast<double>(run_steps)) continue;  // too far out to say
        const int64_t crossing = last + static_cast<int64_t>(std::ceil(steps_left));
        RangeForecast r;
        r.view = view;
        r.row = row;
        r.upward = upward;
        r.model = exponential ? GrowthModel::Exponential : GrowthModel::Linear;
        r.log2_per_100_steps = 100 * f.slope;
        r.per_step = exponential ? 0.0 : lin.slope;
        r.points = static_cast<int64_t>(points.size());
        r.first_step = static_cast<int64_t>(points.front().first);
        r.last_step = last;
        r.log2_now = f.value_at_last;
        r.crossing_step = crossing;
        const std::string rate = exponential ? fmt::format("2^{:.2f} per 100 steps (exponential growth fits best)",
                                                           std::fabs(r.log2_per_100_steps))
                                             : fmt::format("by {} a step (a straight line fits best)",
                                                           human_number(lin.slope));
        r.summary = fmt::format("{} {} {} {} {} over steps {} to {}: at this rate it {} at about step {}", row,
                                range_view_info(view).short_title, upward ? "absmax" : "smallest nonzero",
                                upward ? "grows" : "shrinks", rate, r.first_step, last,
                                upward ? "exceeds fp16's largest value" : "falls below fp16's smallest subnormal",
                                crossing);
        out.push_back(std::move(r));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RangeForecast& a, const RangeForecast& b) { return a.crossing_step < b.crossing_step; });
  if (out.size() > 8) out.resize(8);  // the nearest first
  return out;
}

}  // namespace fpscope::analysis
