// The learning section of `fpscope report`: updates rounding lost, results flushed at the store,
// the loss curve's trend, and one line of advice per finding (see learning.h).
#include "sections.h"

#include "fpscope/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fpscope::cli {

using namespace fpscope::analysis;

namespace {

Cell share_or_dash(const std::optional<double>& share) {
  return share ? Cell(human_percent(*share), *share) : Cell("-", nullptr);
}

// A share that may be negative (stochastic rounding can apply more than was computed).
Cell signed_share(const std::optional<double>& share) {
  if (!share) return Cell("-", nullptr);
  return Cell((*share < 0 ? "-" : "") + human_percent(std::fabs(*share)), *share);
}

constexpr std::size_t kStoreRowsForPeople = 12;

Cell ratio_cell(const std::optional<double>& ratio) {
  return ratio ? Cell(human_number(*ratio), *ratio) : Cell("-", nullptr);
}

std::string loss_trend_text(const LossTrend& t) {
  if (t.steps == 0 || !t.first || !t.last) return "The run logged no finite loss.";
  std::string text = fmt::format("Loss: {} at the first step, {} at the last ({} steps)", human_number(*t.first),
                                 human_number(*t.last), t.steps);
  if (const auto change = t.relative_change(); change && t.steps >= 4) {
    const double c = *change;
    text += std::fabs(c) < 0.01 ? fmt::format("; the last quarter's mean is within 1% of the first quarter's (flat)")
                                : fmt::format("; the last quarter's mean is {} {} the first quarter's{}",
                                              human_percent(std::fabs(c)), c < 0 ? "below" : "above",
                                              c > 0 ? " (rising)" : "");
  }
  return text + ".";
}

std::string lr_trend_text(const LrTrend& t) {
  if (!t.first || !t.last) return {};
  return fmt::format("Learning rate (as the program logged it): {} at step {}, {} at step {}.", human_number(*t.first),
                     *t.first_step, human_number(*t.last), *t.last_step);
}

// The forecasts of update/weight ratios falling toward their spacing, and their advice once each.
void add_forecast_notes(const LearningReport& r, Section& sec) {
  if (r.forecasts.empty()) return;
  sec.notes.push_back(fmt::format(
      "Update/weight falling toward the weights' relative spacing (the last {} measured steps fitted by exponential "
      "decay, or by a straight line where that fits clearly better):",
      kUpdateForecastWindow));
  for (std::size_t i = 0; i < std::min(r.forecasts.size(), kForecastsShown); ++i)
    sec.notes.push_back("  " + r.forecasts[i].summary + ".");
  if (r.forecasts.size() > kForecastsShown)
    sec.notes.push_back(fmt::format("  ... and {} more, in the forecasts table.", r.forecasts.size() - kForecastsShown));
  for (const std::string& a : forecast_advice(r)) sec.notes.push_back("  Advice before then: " + a + ".");
}

}  // namespace

Section learning_section(const Trace& trace) {
  const LearningReport r = learning(trace);
  Section sec{"learning", "Learning (updates lost to rounding, results flushed at the store)", {}, {}, {}};
  sec.extra["measured_updates"] = r.measured_updates;
  sec.extra["measured_stores"] = r.measured_stores;
  if (!r.measured_updates && !r.measured_stores) {
    sec.notes.push_back(no_updates_text(r));
    return sec;
  }
  const LearningThresholds& t = r.thresholds;
  sec.notes.push_back(fmt::format(
      "An update is lost when the optimizer computed a nonzero change for an element and rounding to the weight's type "
      "left the element where it was. Reported: parameters that lose {} or more of their nonzero updates (unless "
      "stochastic rounding keeps the magnitude), and stored tensors whose kernel flushed {} or more of their nonzero "
      "results to zero, or overflowed any.",
      human_percent(t.lost_update_share), human_percent(t.flushed_share)));
  sec.notes.push_back(loss_trend_text(r.loss));
  if (const std::string lr = lr_trend_text(r.lr); !lr.empty()) sec.notes.push_back(lr);
  if (std::any_of(r.params.begin(), r.params.end(), [](const ParamLearning& p) { return p.nonzero_from_gradient; }))
    sec.notes.push_back("A front end (PyTorch) sees each parameter before and after its optimizer's step, not the update "
                        "the optimizer computed: an element's update counts as nonzero where its gradient was, and the "
                        "computed update's columns stay empty.");

  // Parameters that lose their updates, grouped by the advice they share, most severe first.
  for (const AdviceGroup& g : advice_groups(r)) sec.notes.push_back(g.sentence());
  for (const StoreLoss& s : r.stores) {
    if (!s.flagged) continue;
    std::string where = s.worst_step ? fmt::format(" at step {}", *s.worst_step) : std::string();
    if (s.worst_loss_scale) where += " at loss scale " + human_scale(*s.worst_loss_scale);
    std::string overflow = s.overflowed > 0 ? fmt::format(" ({} overflowed)", s.overflowed) : std::string();
    sec.notes.push_back(fmt::format("{} ({}, {}): {} of its nonzero values flushed to zero over the run, {}{}{}. "
                                    "Advice: {}.",
                                    s.tensor, s.layer.empty() ? "no layer" : s.layer, s.phase,
                                    human_percent(s.flushed_share().value_or(0)), human_percent(s.worst_flushed_share),
                                    where, overflow, s.advice));
  }
  int flagged = 0;
  for (const ParamLearning& p : r.params) flagged += p.flagged ? 1 : 0;
  for (const StoreLoss& s : r.stores) flagged += s.flagged ? 1 : 0;
  if (flagged == 0)
    sec.notes.push_back("No parameter loses its updates and no store flushes its results beyond the thresholds.");
  add_forecast_notes(r, sec);

  if (r.measured_updates) {
    Table params{"updates",
                 {"parameter", "layer", "updated as", "steps", "elements", "lost updates", "lost share",
                  "magnitude lost", "update/weight", "computed/weight", "lost from step", "remedy"},
                 {}};
    for (const ParamLearning& p : r.params)
      params.rows.push_back({Cell(p.param), Cell(p.layer.empty() ? "-" : p.layer),
                             Cell(p.type()), int_cell(p.steps), int_cell(p.elements),
                             opt_int_cell(p.lost), share_or_dash(p.lost_update_share),
                             signed_share(p.lost_magnitude_share), ratio_cell(p.update_ratio),
                             ratio_cell(p.computed_ratio), opt_int_cell(p.first_lost_step),
                             Cell(p.flagged ? p.remedy : "-")});
    sec.tables.push_back(std::move(params));
  }
  if (!r.forecasts.empty()) {
    Table forecasts{"forecasts",
                    {"parameter", "layer", "updated as", "ratio fitted", "steps fitted", "update/weight now",
                     "binades per 100 steps", "model", "spacing", "reaches it at step"},
                    {}};
    for (const UpdateForecast& f : r.forecasts)
      forecasts.rows.push_back(
          {Cell(f.param), Cell(f.layer.empty() ? "-" : f.layer), Cell(f.dtype),
           Cell(f.computed ? "computed" : "applied"), Cell(fmt::format("{} to {}", f.first_step, f.last_step)),
           Cell(fmt::format("2^{:.2f}", f.log2_now), std::exp2(f.log2_now)),
           Cell(fmt::format("{:.2f}", f.log2_per_100_steps), f.log2_per_100_steps),
           Cell(growth_model_name(f.model)),
           Cell(fmt::format("2^{}", f.spacing_log2), std::exp2(f.spacing_log2)), int_cell(f.crossing_step)});
    sec.tables.push_back(std::move(forecasts));
  }
  if (r.measured_stores) {
    Table stores{"stores",
                 {"tensor", "layer", "phase", "kernel", "type", "stores", "flushed", "subnormal", "overflowed",
                  "worst step", "flushed then", "loss scale then", "remedy"},
                 {}};
    for (const StoreLoss& s : r.stores)
      stores.rows.push_back(
          {Cell(s.tensor), Cell(s.layer.empty() ? "-" : s.layer), Cell(s.phase.empty() ? "-" : s.phase), Cell(s.kernel),
           Cell(s.dtype), int_cell(s.stores), share_or_dash(s.flushed_share()),
           share_or_dash(s.subnormal_share()),
           int_cell(s.overflowed), opt_int_cell(s.worst_step),
           s.worst_step ? Cell(human_percent(s.worst_flushed_share), s.worst_flushed_share) : Cell("-", nullptr),
           s.worst_loss_scale ? Cell(human_scale(*s.worst_loss_scale), *s.worst_loss_scale) : Cell("-", nullptr),
           Cell(s.flagged ? s.remedy : "-")});
    if (stores.rows.empty()) {
      sec.notes.push_back("No narrowing store flushed, made subnormal or overflowed any result.");
    } else {
      if (stores.rows.size() > kStoreRowsForPeople) {
        std::vector<size_t> shown(kStoreRowsForPeople);
        for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
        stores.rows_for_people = shown;
        sec.notes.push_back(fmt::format("The stores table shows the {} that lost the most of {} (--format csv or json "
                                        "lists them all).",
                                        kStoreRowsForPeople, stores.rows.size()));
      }
      sec.tables.push_back(std::move(stores));
    }
  }
  return sec;
}

Section updates_comparison_section(const Comparison& c) {
  Section sec{"updates", "Updates: the share rounding lost and update/weight, A against B", {}, {}, {}};
  int only_a = 0, only_b = 0;
  for (const UpdateShift& u : c.updates) {
    only_a += u.a_flagged && !u.b_flagged ? 1 : 0;
    only_b += u.b_flagged && !u.a_flagged ? 1 : 0;
  }
  sec.notes.push_back(fmt::format("Parameters that lose their updates only in A: {}; only in B: {}.", only_a, only_b));
  Table t{"updates", {"parameter", "A updated as", "B updated as", "A lost share", "B lost share", "A update/weight",
                      "B update/weight"}, {}};
  for (const UpdateShift& u : c.updates)
    t.rows.push_back({Cell(u.param), opt_text_cell(u.a_type), opt_text_cell(u.b_type), share_or_dash(u.a_lost_share),
                      share_or_dash(u.b_lost_share), ratio_cell(u.a_ratio), ratio_cell(u.b_ratio)});
  sec.tables.push_back(std::move(t));
  sec.extra["lost_only_in_a"] = only_a;
  sec.extra["lost_only_in_b"] = only_b;
  return sec;
}

}  // namespace fpscope::cli
