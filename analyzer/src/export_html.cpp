// The HTML report: one self-contained page (inline CSS and SVG, no scripts or external files) with
// the summary, the first non-finite origin, value ranges, loss and loss scale over steps, memory by
// category over time and a heat map of each layer's largest magnitude by step.
#include "fpscope/export.h"
#include "fpscope/palette.h"
#include "report_util.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace fpscope::analysis {

namespace {

constexpr int kWidth = 760, kHeight = 220, kMargin = 50;
static_assert(kCategoryCount == palette::kCategories.size());

std::string esc(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

struct Series {
  std::string label, color;
  std::vector<std::pair<double, double>> points;
};

// A line plot of one or more series over a shared x axis, with min/max labels on both axes.
std::string line_plot(const std::string& title, const std::string& x_label, const std::vector<Series>& series) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::ostringstream svg;
  svg << "<h3>" << esc(title) << "</h3>\n";
  if (x0 > x1) return svg.str() + "<p>No data.</p>\n";
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pw = kWidth - 2 * kMargin, ph = kHeight - 2 * kMargin;
  auto px = [&](double x) { return kMargin + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kHeight - kMargin - (y - y0) / (y1 - y0) * ph; };
  svg << "<svg width=\"" << kWidth << "\" height=\"" << kHeight << "\" role=\"img\">\n"
      << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", kMargin,
                     kMargin, pw, ph)
      << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>", kMargin, kHeight - kMargin + 15, human_number(x0))
      << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}</text>", kWidth - kMargin,
                     kHeight - kMargin + 15, human_number(x1))
      << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{}</text>", kWidth / 2,
                     kHeight - kMargin + 30, esc(x_label))
      << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}</text>", kMargin - 4, kMargin + 10,
                     human_number(y1))
      << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}</text>\n", kMargin - 4,
                     kHeight - kMargin, human_number(y0));
  for (const auto& s : series) {
    svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\" points=\"";
    for (auto [x, y] : s.points) svg << fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg << "\"/>\n";
  }
  svg << "</svg>\n";
  // The legend is HTML under the plot: it wraps however many series there are, never overlaps.
  svg << "<div class=\"legend\">";
  for (const auto& s : series) svg << "<span><i style=\"background:" << s.color << "\"></i>" << esc(s.label) << "</span>";
  return svg.str() + "</div>\n";
}

std::string memory_plot(const Trace& trace) {
  const auto points = memory_timeline(trace, 600);
  std::vector<Series> series;
  for (int c = 0; c < kCategoryCount; ++c) {
    Series s{kCategoryNames[c], palette::hex(palette::kCategories[c]), {}};
    for (const auto& p : points) s.points.emplace_back((p.t_ns - points.front().t_ns) / 1e9, p.by_category[c] / 1048576.0);
    bool any = std::any_of(s.points.begin(), s.points.end(), [](auto& q) { return q.second != 0; });
    if (any) series.push_back(std::move(s));
  }
  Series total{"total", "#333", {}};
  for (const auto& p : points) total.points.emplace_back((p.t_ns - points.front().t_ns) / 1e9, p.total / 1048576.0);
  series.push_back(std::move(total));
  return line_plot("Live memory by category (MiB)", "seconds since the first allocation", series);
}

// Rows: layers (or tensors); columns: steps (binned); colour: floor(log2(absmax)), red where NaN/Inf
// appeared. The title says which view it is.
std::string heat_map(const Trace& trace, RangeView view) {
  const auto cells = layer_step_ranges(trace, view);
  const RangeViewInfo& info = range_view_info(view);
  std::ostringstream svg;
  svg << "<h3>Largest magnitude by " << info.rows << " and step (log2): " << esc(info.title) << "</h3>\n";
  if (cells.empty()) return svg.str() + "<p>None in this trace.</p>\n";
  std::vector<std::string> layers;
  int64_t s0 = cells.front().step, s1 = cells.front().step;
  for (const auto& c : cells) {
    if (std::find(layers.begin(), layers.end(), c.layer) == layers.end()) layers.push_back(c.layer);
    s0 = std::min(s0, c.step), s1 = std::max(s1, c.step);
  }
  const int64_t columns = std::min<int64_t>(200, s1 - s0 + 1);
  const double per_column = static_cast<double>(s1 - s0 + 1) / columns;
  std::map<std::pair<size_t, int64_t>, std::pair<double, int64_t>> bins;  // (row, col) -> (absmax, nonfinite)
  for (const auto& c : cells) {
    size_t row = std::find(layers.begin(), layers.end(), c.layer) - layers.begin();
    int64_t col = std::min<int64_t>(columns - 1, static_cast<int64_t>((c.step - s0) / per_column));
    auto& bin = bins[{row, col}];
    bin.first = std::max(bin.first, c.absmax.value_or(0));
    bin.second += c.nonfinite;
  }
  double e0 = 1e9, e1 = -1e9;
  for (auto& [key, bin] : bins) {
    if (bin.first > 0) e0 = std::min(e0, std::floor(std::log2(bin.first))), e1 = std::max(e1, std::floor(std::log2(bin.first)));
  }
  const int label_w = 90, cell_w = std::max(2, static_cast<int>((kWidth - label_w) / columns)), cell_h = 18;
  svg << "<svg width=\"" << label_w + cell_w * columns + 10 << "\" height=\"" << cell_h * layers.size() + 40
      << "\" role=\"img\">\n";
  for (size_t r = 0; r < layers.size(); ++r) {
    svg << fmt::format("<text x=\"0\" y=\"{}\" class=\"ax\">{}</text>\n", r * cell_h + 13, esc(layers[r]));
  }
  for (auto& [key, bin] : bins) {
    std::string color = "#eee";
    if (bin.second > 0) {
      color = palette::hex(palette::kNaN);
    } else if (bin.first > 0) {
      color = palette::hex(palette::exponent_scale(palette::scale_position(std::floor(std::log2(bin.first)), e0, e1)));
    }
    svg << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} step {}: absmax {}{}</title></rect>\n",
                       label_w + key.second * cell_w, key.first * cell_h, cell_w, cell_h - 2, color, esc(layers[key.first]),
                       s0 + static_cast<int64_t>(key.second * per_column), human_number(bin.first),
                       bin.second ? fmt::format(", {} NaN/Inf", bin.second) : "");
  }
  svg << fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\">step {} … {}</text>\n", label_w, cell_h * layers.size() + 20,
                     s0, s1);
  svg << "</svg>\n";
  // The colour key: the scale's ends and up to three exponents between them, then NaN/Inf.
  std::string key = "<div class=\"legend\">";
  auto swatch = [&](palette::Rgb c, const std::string& label) {
    key += "<span><b style=\"background:" + palette::hex(c) + "\"></b>" + label + "</span>";
  };
  if (e0 <= e1) {
    const int lo = static_cast<int>(e0), hi = static_cast<int>(e1), stops = std::min(5, hi - lo + 1);
    for (int i = 0; i < stops; ++i) {
      const int e = stops == 1 ? lo : lo + static_cast<int>(std::lround(static_cast<double>(i) * (hi - lo) / (stops - 1)));
      swatch(palette::exponent_scale(palette::scale_position(e, e0, e1)), fmt::format("2^{}", e));
    }
  }
  swatch(palette::kNaN, "NaN/Inf");
  return svg.str() + key + "</div>\n";
}

void summary_section(const Trace& trace, std::ostream& out) {
  const RunSummary s = summary(trace);
  out << "<h2>Summary</h2>\n<table class=\"kv\">\n";
  auto row = [&](const std::string& k, const std::string& v) { out << "<tr><th>" << esc(k) << "</th><td>" << esc(v) << "</td></tr>\n"; };
  row("trace", s.path);
  row("command", s.command);
  for (const auto& [k, v] : s.config) row(k, v);
  out << "<tr><th>ended</th><td" << (contract::is_failure(s.state) ? " class=\"bad\"" : "") << ">"
      << esc(ending_text(s)) << "</td></tr>\n";
  if (!s.incomplete.empty())
    out << "<tr><th>trace</th><td class=\"bad\">incomplete: " << esc(s.incomplete) << "</td></tr>\n";
  row("steps", steps_text(s));
  if (s.ranks > 1) row("ranks", std::to_string(s.ranks));
  row("kernel launches", std::to_string(s.kernels));
  for (const TracingCost& line : tracing_cost(s)) row(line.label, line.text);
  out << "<tr><th>final loss</th><td" << (s.nonfinite_loss_steps > 0 ? " class=\"bad\"" : "") << ">"
      << esc(final_loss_text(s)) << "</td></tr>\n";
  row("test accuracy", s.test_accuracy ? fmt::format("{:.2f}%", *s.test_accuracy) : "-");
  out << "</table>\n";
  const NonfiniteReport nf = nonfinite(trace, 16);
  out << "<h2>Non-finite values</h2>\n";
  if (!nf.first_origin) {
    out << "<p>" << esc(no_nonfinite_text(s)) << "</p>\n";
  } else {
    const auto& o = *nf.first_origin;
    const char* how = how_it_came_words(how_it_came(o));
    out << fmt::format("<p class=\"bad\">First {} {} <b>{}</b> (layer {}, {}, step {}{}) in tensor {} at index {}.</p>\n",
                       esc(o.kind), how, esc(o.kernel), esc(o.layer.value_or("-")), esc(o.phase.value_or("-")),
                       o.step ? std::to_string(*o.step) : "-", s.ranks > 1 ? fmt::format(", rank {}", o.rank) : "",
                       esc(o.tensor), o.first_index);
    if (!nf.propagation.empty()) {
      out << "<p>Passed on by: ";
      for (size_t i = 0; i < nf.propagation.size(); ++i) {
        out << (i ? " → " : "") << esc(nf.propagation[i].kernel) << " (" << esc(nf.propagation[i].layer.value_or("-")) << ")";
      }
      out << (nf.propagation_truncated ? " …" : "") << "</p>\n";
    }
  }
  if (const std::string intended = intended_text(nf.intended); !intended.empty()) out << "<p>" << esc(intended) << "</p>\n";
  // Why: the causes and the chain they come from (fpscope report --section why).
  const WhyReport w = why(trace);
  if (w.causes.empty() && w.skipped_steps.empty()) return;
  out << "<h2>Why</h2>\n<ol>\n";
  for (const Cause& c : w.causes)
    out << "<li><b>" << esc(cause_label(c.kind)) << "</b>: " << esc(c.summary) << "<br><i>What to change:</i> "
        << esc(c.advice) << "</li>\n";
  out << "</ol>\n";
  if (!w.chain.empty()) {
    out << "<table>\n<tr><th>read by launch</th><th>tensor</th><th>written by</th><th>step</th><th>absmax before</th>"
           "<th>absmax after</th><th>zeros before → after</th><th>note</th></tr>\n";
    for (const CauseLink& l : w.chain) {
      out << fmt::format("<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td></tr>\n",
                         human_launch(l.reader_kernel_id), std::string(static_cast<size_t>(l.depth) * 2, '.'), esc(l.tensor),
                         l.writer_kernel_id ? esc(l.writer_kernel) + fmt::format(" (launch {})", human_launch(*l.writer_kernel_id)) : "-",
                         l.writer_step ? std::to_string(*l.writer_step) : "-", human_optional(l.absmax_before),
                         human_optional(l.absmax_after), l.zero_before, l.zero_after, esc(l.note));
    }
    out << "</table>\n";
  }
  if (!w.skipped_steps.empty()) {
    out << "<p>" << w.skipped_steps.size() << " skipped step" << (w.skipped_steps.size() == 1 ? "" : "s") << ":</p>\n<ul>\n";
    for (size_t i = 0; i < w.skipped_steps.size() && i < 20; ++i) out << "<li>" << esc(w.skipped_steps[i].summary) << "</li>\n";
    out << "</ul>\n";
  }
}

// A multi-process trace: the ranks side by side (fpscope report --section ranks).
void ranks_section(const Trace& trace, std::ostream& out) {
  const RanksReport r = ranks(trace);
  if (r.ranks.size() <= 1) return;
  out << "<h2>Ranks</h2>\n";
  if (r.first_origin_rank) {
    out << fmt::format("<p class=\"bad\">First NaN/Inf made from finite inputs: rank {}{}.</p>\n", *r.first_origin_rank,
                       r.first_origin_lead_ns ? ", " + human_duration(*r.first_origin_lead_ns) + " before the next rank's first" : "");
  }
  if (r.loss_scale_steps_compared > 0) {
    out << "<p>Loss scale: " << (r.loss_scale_disagreements == 0
                                     ? fmt::format("the ranks agreed in all {} steps they share", r.loss_scale_steps_compared)
                                     : fmt::format("the ranks disagreed in {} of {} steps", r.loss_scale_disagreements,
                                                   r.loss_scale_steps_compared))
        << ".</p>\n";
  }
  out << "<table>\n<tr><th>rank</th><th>pid</th><th>host</th><th>ended</th><th>kernels</th><th>NaN/Inf outputs</th>"
         "<th>first origin step</th><th>memory peak</th><th>skipped steps</th><th>slowest in</th><th>held others back</th></tr>\n";
  for (const RankRow& k : r.ranks) {
    out << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                       "<td>{} steps</td><td>{}</td></tr>\n",
                       k.rank, k.pid ? std::to_string(*k.pid) : "-", esc(k.host),
                       k.ended && *k.ended == "vanished" ? " class=\"bad\"" : "", esc(k.ended.value_or("-")), k.kernels,
                       k.nonfinite_tensors, k.first_origin_step ? std::to_string(*k.first_origin_step) : "-",
                       k.memory_peak_bytes ? human_bytes(*k.memory_peak_bytes) : "-", k.skipped_steps, k.slowest_steps,
                       human_duration(k.held_back_ns));
  }
  out << "</table>\n";
}

void ranges_section(const Trace& trace, std::ostream& out) {
  out << "<h2>Ranges per layer and kernel (outputs)</h2>\n<table>\n<tr><th>layer</th><th>kernel</th><th>absmax</th>"
         "<th>smallest nonzero</th><th>fp16 headroom</th><th>bf16 headroom</th><th>fp16 overflow</th>"
         "<th>fp16 underflow</th><th>fp16 subnormal</th><th>NaN/Inf</th></tr>\n";
  for (const auto& r : ranges(trace)) {
    const auto& f16 = r.formats[0];
    out << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       esc(r.layer.value_or("-")), esc(r.kernel), human_optional(r.absmax), human_optional(r.min_nonzero),
                       r.headroom_f16_log2 ? fmt::format("2^{:.1f}", *r.headroom_f16_log2) : "-",
                       r.headroom_bf16_log2 ? fmt::format("2^{:.1f}", *r.headroom_bf16_log2) : "-",
                       f16.measured ? human_percent(f16.overflow_share) : "-",
                       f16.measured ? human_percent(f16.underflow_share) : "-",
                       f16.measured ? human_percent(f16.subnormal_share) : "-", r.nan + r.inf);
  }
  out << "</table>\n";
}

}  // namespace

// fp8 readiness (fpscope report --section fp8), when the trace holds the forecast: the layers to
// keep in bf16, then the grid of operands by recipes coloured as the GUI colours it.
void fp8_section(const Trace& trace, std::ostream& out) {
  if (!has_fp8_forecast(trace)) return;
  const Fp8Readiness r = fp8_readiness(trace);
  out << "<h2>fp8 readiness</h2>\n";
  std::string keep;
  for (const LayerReadiness& l : r.layers)
    if (l.keep_high_precision) keep += (keep.empty() ? "" : ", ") + (l.layer.empty() ? std::string("(no layer)") : l.layer);
  out << (keep.empty() ? std::string("<p>Every layer fits an 8-bit recipe.</p>\n")
                       : "<p class=\"bad\">Keep in bf16: " + esc(keep) + ".</p>\n");
  out << fmt::format(
      "<p>Each cell: the recipe's SQNR in dB over every step traced. Green: it fits (brighter, more to spare); amber: "
      "just past a threshold; red: far past it. A recipe fits when it flushes at most {} of the values to zero, "
      "saturates at most {} and keeps {:.0f} dB (e4m3), {:.0f} dB (e5m2) or {:.0f} dB (e2m1).</p>\n",
      human_percent(r.thresholds.max_underflow_share), human_percent(r.thresholds.max_saturated_share),
      r.thresholds.min_sqnr_db_e4m3, r.thresholds.min_sqnr_db_e5m2, r.thresholds.min_sqnr_db_e2m1);
  out << "<table class=\"grid\"><tr><th>layer</th><th>operand</th>";
  for (const contract::RecipeInfo& info : contract::kRecipes) out << "<th class=\"r\">" << esc(info.name) << "</th>";
  out << "</tr>\n";
  for (const OperandReadiness& o : r.operands) {
    out << "<tr><td>" << esc(o.layer.empty() ? "(no layer)" : o.layer) << "</td><td>" << contract::operand_name(o.operand)
        << "</td>";
    for (const contract::RecipeInfo& info : contract::kRecipes) {
      const palette::Rgb c = recipe_cell_color(o, info.id, r.thresholds);
      const bool dark = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 140;
      out << "<td style=\"background:" << palette::hex(c) << (dark ? ";color:#fff" : "") << "\">"
          << esc(recipe_cell_text(o, info.id)) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
}

// Learning (fpscope report --section learning), when the trace has update or store counts: the
// findings with their advice, a grid of parameters by steps coloured by log10 update/weight as the
// GUI's updates view colours it, and the parameters' table.
void learning_section(const Trace& trace, std::ostream& out) {
  if (!has_learning_counts(trace)) return;
  const LearningReport r = learning(trace);
  out << "<h2 id=\"learning\">Learning</h2>\n";
  const auto groups = advice_groups(r);
  bool any = false;
  for (const AdviceGroup& g : groups) {
    out << "<p class=\"bad\">" << esc(g.sentence()) << "</p>\n";
    any = true;
  }
  for (const StoreLoss& st : r.stores) {
    if (!st.flagged) continue;
    out << "<p class=\"bad\">"
        << esc(fmt::format("{} ({}, {}): {} of its nonzero values flushed to zero at the store, {} at step {}. Advice: {}.",
                           st.tensor, st.layer.empty() ? "no layer" : st.layer, st.phase,
                           human_percent(st.flushed_share().value_or(0)), human_percent(st.worst_flushed_share),
                           st.worst_step ? std::to_string(*st.worst_step) : "-", st.advice))
        << "</p>\n";
    any = true;
  }
  if (!any) out << "<p>No parameter loses its updates and no store flushes its results beyond the thresholds.</p>\n";
  if (!r.forecasts.empty()) {
    out << "<p>Update/weight falling toward the weights' relative spacing, the nearest first:</p>\n<ul>\n";
    for (std::size_t i = 0; i < std::min(r.forecasts.size(), kForecastsShown); ++i)
      out << "<li>" << esc(r.forecasts[i].summary) << ".</li>\n";
    if (r.forecasts.size() > kForecastsShown)
      out << "<li>... and " << r.forecasts.size() - kForecastsShown << " more (fpscope report --section learning).</li>\n";
    out << "</ul>\n";
    for (const std::string& a : forecast_advice(r)) out << "<p>Advice before then: " << esc(a) << ".</p>\n";
  }
  if (!r.measured_updates) return;
  // The grid: at most 60 columns, each the smallest ratio of its steps.
  std::vector<int64_t> step_list;
  for (const UpdatePoint& p : r.points) step_list.push_back(p.step);
  std::sort(step_list.begin(), step_list.end());
  step_list.erase(std::unique(step_list.begin(), step_list.end()), step_list.end());
  const std::size_t columns = std::min<std::size_t>(60, step_list.size());
  double lo = 0, hi = -1e300;
  for (const UpdatePoint& p : r.points)
    if (p.update_ratio && *p.update_ratio > 0) lo = std::min(lo, std::log10(*p.update_ratio)), hi = std::max(hi, std::log10(*p.update_ratio));
  lo = std::floor(std::min(lo, -4.0));
  hi = std::ceil(std::max(hi, -2.0));
  out << fmt::format("<p>Each cell: log10 of the rms of the change a step applied over the rms of the weight, from "
                     "1e{:.0f} (dark) to 1e{:.0f} (bright); grey: nothing moved; a dot: the step lost {} or more of the "
                     "nonzero updates. bf16's relative spacing is about 4e-3, fp16's 5e-4: below them an update is "
                     "rounded away without fp32 master weights. Steps {} to {}.</p>\n",
                     lo, hi, human_percent(r.thresholds.lost_update_share), step_list.empty() ? 0 : step_list.front(),
                     step_list.empty() ? 0 : step_list.back());
  out << "<table class=\"grid\" style=\"margin-bottom:14px\">\n";
  for (const ParamLearning& p : r.params) {
    out << "<tr><td>" << esc(p.param) << "</td>";
    for (std::size_t c = 0; c < columns; ++c) {
      const std::size_t s0 = c * step_list.size() / columns, s1 = std::max(s0 + 1, (c + 1) * step_list.size() / columns);
      std::optional<double> v, lost;
      for (const UpdatePoint& u : r.points) {
        if (u.param != p.param || u.step < step_list[s0] || u.step > step_list[s1 - 1]) continue;
        if (u.update_ratio && (!v || *u.update_ratio < *v)) v = u.update_ratio;
        if (u.lost_update_share && (!lost || *u.lost_update_share > *lost)) lost = u.lost_update_share;
      }
      const std::string fill = !v ? "#2d2d34" : *v <= 0 ? "#888" : palette::hex(palette::exponent_scale(palette::scale_position(std::log10(*v), lo, hi)));
      const bool dot = lost && *lost >= r.thresholds.lost_update_share;
      out << "<td style=\"background:" << fill << ";width:10px;padding:0;text-align:center\">" << (dot ? "&middot;" : "") << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n<table><tr><th>parameter</th><th>updated as</th><th>lost share</th><th>magnitude lost</th>"
         "<th>update/weight</th><th>computed/weight</th><th>lost from step</th><th>remedy</th></tr>\n";
  for (const ParamLearning& p : r.params) {
    const auto share = [](const std::optional<double>& v) { return v ? (*v < 0 ? "-" : "") + human_percent(std::fabs(*v)) : std::string("-"); };
    const auto number = [](const std::optional<double>& v) { return v ? human_number(*v) : std::string("-"); };
    out << "<tr" << (p.flagged ? " class=\"bad\"" : "") << "><td>" << esc(p.param) << "</td><td>" << esc(p.type())
        << "</td><td>" << share(p.lost_update_share) << "</td><td>"
        << share(p.lost_magnitude_share) << "</td><td>" << number(p.update_ratio) << "</td><td>"
        << number(p.computed_ratio) << "</td><td>" << (p.first_lost_step ? std::to_string(*p.first_lost_step) : "-")
        << "</td><td>" << esc(p.flagged ? p.remedy : "-") << "</td></tr>\n";
  }
  out << "</table>\n";
}

void export_html(const Trace& trace, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fpscope report: "
      << esc(trace.path()) << "</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
      << "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
      << "th{background:#f3f3f3}.ax{font-size:11px;fill:#555}.bad{color:#b00}"
      // Long values (op lists, commands) wrap inside the page instead of widening it; break-word,
      // unlike anywhere, leaves short numbers whole in narrow columns.
      << "table.kv{width:100%;table-layout:fixed}table.kv th{width:11em}td{overflow-wrap:break-word}"
      << "svg{max-width:100%;height:auto}p{overflow-wrap:anywhere}"
      << "table.grid{font-size:11px}table.grid th.r{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal}"
      << ".legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;color:#444;margin:2px 0 14px 50px}"
      << ".legend i{display:inline-block;width:14px;height:4px;margin-right:6px;vertical-align:middle}"
      << ".legend b{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}"
      << "</style></head><body>\n"
      << "<h1>fpscope report</h1>\n";
  if (trace.unfinished()) out << "<p class=\"bad\">This trace is incomplete: " << esc(std::string(contract::label(trace.state()))) << ".</p>\n";
  summary_section(trace, out);
  ranks_section(trace, out);
  const auto step_rows = steps(trace);
  Series loss{"loss", palette::hex(palette::kLoss), {}}, scale{"log2(loss scale)", palette::hex(palette::kLossScale), {}};
  for (const auto& r : step_rows) {
    if (r.loss && std::isfinite(*r.loss)) loss.points.emplace_back(r.step, *r.loss);
    if (r.loss_scale && *r.loss_scale > 0) scale.points.emplace_back(r.step, std::log2(*r.loss_scale));
  }
  out << "<h2>Training</h2>\n" << line_plot("Loss by step", "step", {loss});
  if (const RunSummary s = summary(trace); s.nonfinite_loss_steps > 0 && s.first_nonfinite_loss_step)
    out << fmt::format("<p class=\"bad\">The loss was NaN/Inf from step {} on ({} steps), which the plot leaves out.</p>\n",
                       *s.first_nonfinite_loss_step, s.nonfinite_loss_steps);
  if (!scale.points.empty()) out << line_plot("Loss scale by step (log2)", "step", {scale});
  const LossScaleReport ls = loss_scale(trace);
  if (ls.used) {
    out << fmt::format("<p>Loss scale: {} updates, {} skipped steps, {} growths, {} backoffs, final scale {}.</p>\n",
                       ls.updates, ls.skipped_steps, ls.growths, ls.backoffs, ls.final_scale ? human_scale(*ls.final_scale) : "-");
  }
  out << "<h2>Memory</h2>\n";
  const MemoryReport m = memory(trace);
  out << fmt::format("<p>Peak {} {}.</p>\n<table><tr><th>category</th><th>at peak</th><th>own maximum</th></tr>\n",
                     human_bytes(m.peak_bytes), human_step_place(m.peak_step));
  for (const auto& c : m.by_category) {
    out << "<tr><td>" << c.category << "</td><td>" << human_bytes(c.at_peak) << "</td><td>" << human_bytes(c.max_live) << "</td></tr>\n";
  }
  out << "</table>\n" << memory_plot(trace);
  out << "<h2>Ranges</h2>\n" << heat_map(trace, RangeView::Activations) << heat_map(trace, RangeView::GradientsScaled);
  ranges_section(trace, out);
  fp8_section(trace, out);
  learning_section(trace, out);
  out << "</body></html>\n";
}

}  // namespace fpscope::analysis
