// libfpscope_analysis on synthetic traces: every number checked against direct SQL on the same
// file; the live fallback (no summary tables) against the finalized trace; bad inputs.
#include "fpscope/analysis.h"
#include "fpscope/palette.h"
#include "fpscope/export.h"
#include "fpscope/units.h"
#include "processes.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace fpscope::analysis;
namespace contract = fpscope::contract;
namespace palette = fpscope::palette;
using fpscope::test::make_trace;
using fpscope::test::nan_run;
using fpscope::test::sql_exec;
using fpscope::test::sql_value;
using fpscope::test::sql_text;

namespace {

// The one formatting module every front end uses (CLI, HTML, GUI).
TEST(Units, BytesCountsDurationsAndChanges) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(-3 * 1024 * 1024), "-3.00 MiB");
  EXPECT_EQ(human_bytes(int64_t{150} * 1024 * 1024 * 1024), "150.0 GiB");
  EXPECT_EQ(human_bytes_delta(2048), "+2.00 KiB");
  EXPECT_EQ(human_bytes_delta(-512), "-512 B");
  EXPECT_EQ(human_bytes_delta(0), "0 B");
  EXPECT_EQ(human_count(10000000), "10,000,000");
  EXPECT_EQ(human_count(-1234), "-1,234");
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(INT64_MIN), "-9,223,372,036,854,775,808");
  EXPECT_EQ(human_percent_change(200, 150), "-25.0%");
  EXPECT_EQ(human_percent_change(0, 5), "n/a");
  EXPECT_EQ(human_points(-0.29999999999999716), "-0.30 points");
  EXPECT_EQ(human_duration(850), "850 ns");
  EXPECT_EQ(human_duration(12345), "12.3 us");
  EXPECT_EQ(human_duration(2500000000), "2.5 s");
  EXPECT_EQ(human_number(NAN), "NaN");
  EXPECT_EQ(human_number(-INFINITY), "-Inf");
  EXPECT_EQ(human_number(65504), "6.55e+04");
}

// Room to a format's edges in powers of two, exactly, from the contract's limits.
TEST(Units, HeadroomAndFootroomAgainstFormatLimits) {
  EXPECT_EQ(headroom_log2(65504.0, Format::F16), 0.0);
  EXPECT_EQ(headroom_log2(65504.0 * 4, Format::F16), -2.0);
  EXPECT_EQ(headroom_log2(65504.0 / 1024, Format::F16), 10.0);
  EXPECT_EQ(footroom_log2(std::ldexp(1.0, -24), Format::F16), 0.0);
  EXPECT_EQ(footroom_log2(std::ldexp(1.0, -26), Format::F16), -2.0);
  EXPECT_EQ(footroom_log2(std::ldexp(1.0, -133), Format::BF16), 0.0);
  EXPECT_FALSE(headroom_log2(0.0, Format::F16));
  EXPECT_FALSE(headroom_log2(std::nullopt, Format::F16));
  EXPECT_FALSE(footroom_log2(-1.0, Format::F16));
}

// Against a zero or tiny base a percentage says nothing: the change is given in bytes.
TEST(Units, MemoryChangeAgainstATinyBaseIsInBytes) {
  auto amp = nan_run();
  auto fp32 = amp;
  fp32.precision = "fp32";
  fp32.loss_scale = "none";
  fp32.nan_at_step.reset();
  const auto a = Trace::open(make_trace("tiny_base_amp", amp));
  const auto b = Trace::open(make_trace("tiny_base_fp32", fp32));
  const Comparison c = compare(*a, *b);
  bool seen_workspace = false;
  for (const MemoryDelta& d : c.memory) {
    if (d.category == "workspace") {  // the loss scaler's 12 bytes in the AMP run, none in fp32
      seen_workspace = true;
      ASSERT_GT(d.a, 0);
      ASSERT_LT(d.a, kMinPercentBaseBytes);
      EXPECT_FALSE(d.reduction_pct);
      EXPECT_EQ(change_text(d), human_bytes_delta(d.b - d.a));
    }
  }
  EXPECT_TRUE(seen_workspace);
  MemoryDelta tiny{"workspace", 8, 16 * 1024 * 1024, std::nullopt};
  EXPECT_EQ(change_text(tiny), "+16.00 MiB");
  MemoryDelta halved{"weight", 2048, 1024, 50.0};
  EXPECT_EQ(change_text(halved), "-50.0%");
  MemoryDelta same{"data", 0, 0, std::nullopt};
  EXPECT_EQ(change_text(same), "0 B");
}

TEST(Analysis, FirstOriginMatchesView) {
  const auto path = make_trace("origin", nan_run());
  auto t = Trace::open(path);
  const NonfiniteReport r = nonfinite(*t);
  ASSERT_TRUE(r.first_origin);
  EXPECT_EQ(r.first_origin->kernel_id, *sql_value(path, "select kernel_id from v_first_nonfinite"));
  EXPECT_EQ(r.first_origin->kernel, "linear_forward");
  EXPECT_EQ(r.first_origin->layer, "fc1");
  EXPECT_EQ(r.first_origin->step, 4);
  EXPECT_TRUE(r.first_origin->origin);
  EXPECT_EQ(r.nan, *sql_value(path, "select sum(nan) from tensors where role='out'"));
  EXPECT_EQ(r.tensors, *sql_value(path, "select count(*) from nonfinite"));
  ASSERT_FALSE(r.propagation.empty());
  EXPECT_EQ(r.propagation.front().kernel, "relu_forward");  // fc1's relu read fc1's output first
  int64_t by_kernel_nan = 0;
  for (const auto& k : r.by_kernel) by_kernel_nan += k.nan;
  EXPECT_EQ(by_kernel_nan, *sql_value(path, "select sum(t.nan) from tensors t join nonfinite n on n.tensor_id = t.id"));
}

TEST(Analysis, RangesMatchSql) {
  const auto path = make_trace("ranges", nan_run());
  auto t = Trace::open(path);
  for (const auto& r : ranges(*t)) {
    const std::string where = "from tensors t join kernels k on k.id = t.kernel_id join strings s on s.id = k.name_id "
                              "left join strings l on l.id = k.layer_id where t.role = 'out' and s.value = '" + r.kernel +
                              "' and l.value " + (r.layer ? "= '" + *r.layer + "'" : "is null");
    EXPECT_EQ(r.elements, *sql_value(path, "select sum(t.count) " + where)) << r.kernel;
    EXPECT_EQ(r.absmax, sql_value(path, "select max(t.absmax) " + where)) << r.kernel;
    EXPECT_EQ(r.min_nonzero, sql_value(path, "select min(t.min_nonzero) " + where)) << r.kernel;
    if (r.absmax) EXPECT_DOUBLE_EQ(*r.headroom_f16_log2, std::log2(65504.0 / *r.absmax));
    ASSERT_TRUE(r.formats[0].measured);
    EXPECT_DOUBLE_EQ(r.formats[0].subnormal_share,
                     *sql_value(path, "select 1.0 * sum(t.f16_subnormal) / sum(t.count) " + where)) << r.kernel;
  }
}

TEST(Analysis, MemoryMatchesView) {
  const auto path = make_trace("memory", nan_run());
  auto t = Trace::open(path);
  const MemoryReport m = memory(*t);
  EXPECT_EQ(m.peak_bytes, *sql_value(path, "select peak_total_bytes from v_memory_peak limit 1"));
  EXPECT_EQ(*m.peak_ns, *sql_value(path, "select peak_t_ns from v_memory_peak limit 1"));
  for (int c = 0; c < kCategoryCount; ++c) {
    EXPECT_EQ(m.by_category[c].at_peak,
              *sql_value(path, std::string("select bytes from v_memory_peak where category = '") + kCategoryNames[c] + "'"));
  }
  ASSERT_FALSE(m.largest.empty());
  EXPECT_EQ(m.largest.front().bytes, *sql_value(path, "select max(bytes) from memory_events"));
}

TEST(Analysis, LossScaleMatchesSql) {
  const auto path = make_trace("scale", nan_run());
  auto t = Trace::open(path);
  const LossScaleReport r = loss_scale(*t);
  EXPECT_EQ(r.backoffs, *sql_value(path, "select count(*) from loss_scale where event = 'backoff'"));
  EXPECT_EQ(r.growths, *sql_value(path, "select count(*) from loss_scale where event = 'growth'"));
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_EQ(r.skipped_step_numbers, std::vector<int64_t>{4});
  EXPECT_EQ(*r.final_scale, *sql_value(path, "select scale_after from loss_scale order by t_ns desc limit 1"));
}

TEST(Analysis, LiveFallbackEqualsFinalized) {
  auto o = nan_run();
  const auto done = make_trace("finalized", o);
  o.finalize = false;
  const auto live = make_trace("live", o);
  auto a = Trace::open(done);
  auto b = Trace::open(live);
  EXPECT_TRUE(a->summaries_precomputed());
  EXPECT_FALSE(b->summaries_precomputed());
  EXPECT_EQ(memory(*a).peak_bytes, memory(*b).peak_bytes);
  EXPECT_EQ(nonfinite(*a).nan, nonfinite(*b).nan);
  const auto ra = ranges(*a), rb = ranges(*b);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i].absmax, rb[i].absmax);
}

TEST(Analysis, CompareFp32WithFp16HalvesWeightsAndActivations) {
  fpscope::synthetic::Options o;
  o.steps = 4;
  const auto fp32 = make_trace("cmp32", o);
  o.precision = "fp16";
  const auto fp16 = make_trace("cmp16", o);
  auto a = Trace::open(fp32);
  auto b = Trace::open(fp16);
  const Comparison c = compare(*a, *b);
  std::map<std::string, MemoryDelta> by;
  for (const auto& d : c.memory) by[d.category] = d;
  EXPECT_DOUBLE_EQ(*by["weight"].reduction_pct, 50.0);
  EXPECT_DOUBLE_EQ(*by["activation"].reduction_pct, 50.0);
  EXPECT_GT(*by["peak"].reduction_pct, 0.0);
  EXPECT_EQ(c.loss_curve.size(), 4u);
}

// A loss that went NaN (stored NULL) or infinite stays in the aligned curve: finite against
// non-finite parts the curves whatever the tolerance, and the last finite losses are not
// subtracted as if they were the final ones.
TEST(Analysis, CompareKeepsNonFiniteLosses) {
  fpscope::synthetic::Options o;
  o.steps = 6;
  const auto a_path = make_trace("cmp_loss_a", o);
  const auto b_path = make_trace("cmp_loss_b", o);
  const std::string loss_rows = "name_id = (SELECT id FROM strings WHERE value = 'loss')";
  sql_exec(b_path, "UPDATE scalars SET value = NULL WHERE " + loss_rows + " AND step >= 3");
  sql_exec(b_path, "UPDATE scalars SET value = 9e999 WHERE " + loss_rows + " AND step = 5");
  sql_exec(a_path, "UPDATE scalars SET value = NULL WHERE " + loss_rows + " AND step = 4");
  auto a = Trace::open(a_path);
  auto b = Trace::open(b_path);
  const Comparison c = compare(*a, *b, CompareOptions{1.0, 1});  // a tolerance no finite pair exceeds
  ASSERT_EQ(c.loss_curve.size(), 6u);
  EXPECT_EQ(c.first_divergent_step, 3);
  for (const LossPoint& p : c.loss_curve) {
    SCOPED_TRACE(p.step);
    ASSERT_TRUE(p.a && p.b);
    if (p.step < 3) {
      EXPECT_TRUE(std::isfinite(*p.a) && std::isfinite(*p.b));
      EXPECT_EQ(*p.a, *p.b);
      EXPECT_EQ(p.relative_difference, 0.0);
      EXPECT_FALSE(p.nonfinite_mismatch);
      continue;
    }
    EXPECT_FALSE(p.relative_difference);
    if (p.step == 4) {  // NaN in both: they agree
      EXPECT_TRUE(std::isnan(*p.a) && std::isnan(*p.b));
      EXPECT_FALSE(p.nonfinite_mismatch);
    } else if (p.step == 5) {
      EXPECT_TRUE(std::isfinite(*p.a));
      EXPECT_EQ(*p.b, INFINITY);
      EXPECT_TRUE(p.nonfinite_mismatch);
    } else {
      EXPECT_TRUE(std::isfinite(*p.a) && std::isnan(*p.b));
      EXPECT_TRUE(p.nonfinite_mismatch);
    }
  }
  EXPECT_EQ(c.b.nonfinite_loss_steps, 3);
  EXPECT_EQ(c.a.nonfinite_loss_steps, 0);  // A's NaN at step 4 came before its last finite loss
  EXPECT_TRUE(c.diverged_to_nonfinite);
  EXPECT_FALSE(c.final_loss_delta);
  // Without the non-finite losses the final losses subtract again.
  sql_exec(b_path, "UPDATE scalars SET value = 1.0 WHERE " + loss_rows + " AND step >= 3");
  sql_exec(a_path, "UPDATE scalars SET value = 1.0 WHERE " + loss_rows + " AND step = 4");
  auto a2 = Trace::open(a_path);
  auto b2 = Trace::open(b_path);
  const Comparison c2 = compare(*a2, *b2);
  ASSERT_TRUE(c2.final_loss_delta);
  EXPECT_EQ(*c2.final_loss_delta, *c2.b.final_loss - *c2.a.final_loss);
}

TEST(Analysis, QueryRefusesWrites) {
  const auto path = make_trace("query", nan_run());
  auto t = Trace::open(path);
  for (const char* sql : {"delete from meta", "insert into strings values (999, 'x')", "drop table kernels",
                          "create temp table x(a)", "attach '/tmp/x.db' as x", "pragma query_only = 0"}) {
    try {
      t->query(sql);
      ADD_FAILURE() << "accepted: " << sql;
    } catch (const TraceError& e) {
      EXPECT_EQ(e.kind(), TraceErrorKind::Query) << sql;
    }
  }
  EXPECT_EQ(std::get<int64_t>(t->query("select count(*) from kernels").rows.at(0).at(0)),
            *sql_value(path, "select count(*) from kernels"));
}

TraceErrorKind open_error(const std::string& path) {
  try {
    Trace::open(path);
  } catch (const TraceError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    return e.kind();
  }
  ADD_FAILURE() << path << " opened";
  return TraceErrorKind::Query;
}

TEST(Analysis, BadInputs) {
  const std::string dir = fpscope::test::temp_dir();
  EXPECT_EQ(open_error(dir + "/missing.sqlite"), TraceErrorKind::NotFound);
  std::ofstream(dir + "/text.sqlite") << "hello, not a database\n";
  EXPECT_EQ(open_error(dir + "/text.sqlite"), TraceErrorKind::NotSqlite);
  const std::string other = dir + "/other.sqlite";
  std::filesystem::remove(other);
  sql_exec(other, "create table t(a); insert into t values (1)");
  EXPECT_EQ(open_error(other), TraceErrorKind::NotATrace);
  const auto newer = make_trace("newer", nan_run());
  sql_exec(newer, "update meta set value = '99' where key = 'schema_version'; pragma user_version = 99");
  EXPECT_EQ(open_error(newer), TraceErrorKind::NewerSchema);
  try {
    Trace::open(newer);
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("newer fpscope (schema 99)"), std::string::npos) << e.what();
  }
  const auto truncated = make_trace("truncated", nan_run());
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2 + 100);
  EXPECT_EQ(open_error(truncated), TraceErrorKind::Corrupt);
  const auto dropped = make_trace("dropped", nan_run());
  sql_exec(dropped, "drop view v_kernels; drop view v_first_nonfinite; drop view v_op_ranges; drop view v_step_summary; "
                    "drop view v_tensors; drop table dumps; drop table tensors");
  EXPECT_EQ(open_error(dropped), TraceErrorKind::Corrupt);
}

// How the first non-finite output came to be: a collective's value is received from another rank
// only when its own inputs were measured and finite.
TEST(Analysis, HowTheFirstNonfiniteOutputCame) {
  NonfiniteEvent e;
  e.kernel = "conv2d_forward";
  e.origin = true;
  EXPECT_EQ(how_it_came(e), FirstNonfinite::Made);
  e.origin = false;
  EXPECT_EQ(how_it_came(e), FirstNonfinite::Returned);
  e.kernel = "allreduce_sum";
  EXPECT_EQ(how_it_came(e), FirstNonfinite::ReceivedOrOwnInput);
  e.inputs_finite = true;
  EXPECT_EQ(how_it_came(e), FirstNonfinite::ReceivedFromAnotherRank);
  e.inputs_finite = false;
  EXPECT_EQ(how_it_came(e), FirstNonfinite::Returned);
  e.origin = true;  // every rank's inputs finite: the sum made it
  EXPECT_EQ(how_it_came(e), FirstNonfinite::Made);
}

// Each range view against plain SQL over the raw tables: the right phase, the right tensors, and
// gradients divided by exactly the scale in force during their step.
TEST(Analysis, RangeViewsMatchSql) {
  const auto path = make_trace("views", nan_run());
  auto t = Trace::open(path);
  struct Case {
    RangeView view;
    std::string sql;  // row, step, absmax, min_nonzero, nonfinite
  };
  const std::string phase_sql =
      "select l.value, k.step, max(t.absmax) / %SCALE%, min(t.min_nonzero) / %SCALE%, sum(t.nan + t.pos_inf + t.neg_inf) "
      "from tensors t join kernels k on k.id = t.kernel_id join strings l on l.id = k.layer_id "
      "join strings p on p.id = k.phase_id where t.role = 'out' and p.value = '%PHASE%' and k.step is not null "
      "group by l.value, k.step";
  auto phase = [&](const char* name, const char* scale) {
    std::string q = phase_sql;
    for (auto [key, value] : {std::pair<std::string, std::string>{"%PHASE%", name}, {"%SCALE%", scale}}) {
      for (size_t at; (at = q.find(key)) != std::string::npos;) q.replace(at, key.size(), value);
    }
    return q;
  };
  const char* step_scale = "(select scale_before from loss_scale ls where ls.step = k.step)";
  const std::string param_sql =
      "select n.value, k.step, max(t.absmax), min(t.min_nonzero), sum(t.nan + t.pos_inf + t.neg_inf) "
      "from tensors t join kernels k on k.id = t.kernel_id join strings n on n.id = t.name_id "
      "join strings p on p.id = k.phase_id join memory_events m on m.alloc_id = t.tensor_uid and m.kind = 'alloc' "
      "where t.role = 'out' and p.value = 'optimizer' and k.step is not null and m.category in ";
  for (const Case& c : {Case{RangeView::Activations, phase("forward", "1")},
                        Case{RangeView::GradientsScaled, phase("backward", "1")},
                        Case{RangeView::GradientsUnscaled, phase("backward", step_scale)},
                        Case{RangeView::Weights, param_sql + "(0, 1) group by n.value, k.step"},
                        Case{RangeView::OptimizerState, param_sql + "(4) group by n.value, k.step"}}) {
    std::map<std::pair<std::string, int64_t>, LayerStepCell> expected;
    const QueryResult rows = t->query(c.sql);
    for (const auto& r : rows.rows) {
      LayerStepCell cell;
      cell.layer = std::get<std::string>(r[0]);
      cell.step = std::get<int64_t>(r[1]);
      if (auto* v = std::get_if<double>(&r[2])) cell.absmax = *v;
      if (auto* v = std::get_if<double>(&r[3])) cell.min_nonzero = *v;
      cell.nonfinite = std::get<int64_t>(r[4]);
      expected[{cell.layer, cell.step}] = cell;
    }
    const auto cells = layer_step_ranges(*t, c.view);
    const char* key = range_view_info(c.view).key;
    ASSERT_EQ(cells.size(), expected.size()) << key;
    if (c.view == RangeView::Activations || c.view == RangeView::GradientsScaled) EXPECT_FALSE(cells.empty()) << key;
    for (const auto& cell : cells) {
      auto it = expected.find({cell.layer, cell.step});
      ASSERT_NE(it, expected.end()) << key << " " << cell.layer << " step " << cell.step;
      EXPECT_EQ(cell.absmax, it->second.absmax) << key << " " << cell.layer << " step " << cell.step;
      EXPECT_EQ(cell.min_nonzero, it->second.min_nonzero) << key << " " << cell.layer << " step " << cell.step;
      EXPECT_EQ(cell.nonfinite, it->second.nonfinite) << key << " " << cell.layer << " step " << cell.step;
    }
  }
  // Loss-scaled gradients are larger than the unscaled ones by the scale, cell by cell.
  const auto scaled = layer_step_ranges(*t, RangeView::GradientsScaled);
  const auto unscaled = layer_step_ranges(*t, RangeView::GradientsUnscaled);
  ASSERT_EQ(scaled.size(), unscaled.size());
  bool any_scale_above_one = false;
  for (size_t i = 0; i < scaled.size(); ++i) {
    if (scaled[i].absmax && unscaled[i].absmax && *scaled[i].absmax > *unscaled[i].absmax) any_scale_above_one = true;
  }
  EXPECT_TRUE(any_scale_above_one) << "the synthetic AMP run should scale its gradients";
  EXPECT_EQ(parse_range_view("gradients-unscaled"), RangeView::GradientsUnscaled);
  EXPECT_FALSE(parse_range_view("gradient"));
}

// The tensor a click on a heat-map cell selects is the one that gives the cell its colour: for
// every cell of every view, the picked tensor's absmax is the cell's (scaled back for the unscaled
// view), and it belongs to the cell's layer (or is the cell's tensor) and step.
TEST(Analysis, LargestTensorOfEveryCellIsTheOneThatColoursIt) {
  const auto path = make_trace("cell_tensors", nan_run());
  auto t = Trace::open(path);
  for (int v = 0; v < kRangeViewCount; ++v) {
    const auto view = static_cast<RangeView>(v);
    const char* key = range_view_info(view).key;
    const bool by_tensor = view == RangeView::Weights || view == RangeView::OptimizerState;
    int picked = 0;
    for (const LayerStepCell& cell : layer_step_ranges(*t, view)) {
      const auto pick = largest_tensor_of_cell(*t, view, cell.layer, cell.step);
      if (!cell.absmax) {
        EXPECT_FALSE(pick) << key << " " << cell.layer << " step " << cell.step;
        continue;
      }
      ASSERT_TRUE(pick) << key << " " << cell.layer << " step " << cell.step;
      ++picked;
      const std::string where = " where t.id = " + std::to_string(pick->tensor_id);
      const auto scale = view == RangeView::GradientsUnscaled
                             ? sql_value(path, "select coalesce(min(scale_before), 1) from loss_scale where step = " +
                                                   std::to_string(cell.step))
                             : std::optional<double>(1.0);
      EXPECT_EQ(*pick->absmax / *scale, *cell.absmax) << key << " " << cell.layer << " step " << cell.step;
      EXPECT_EQ(sql_value(path, "select t.absmax from tensors t" + where), pick->absmax);
      EXPECT_EQ(sql_value(path, "select t.kernel_id from tensors t" + where), pick->kernel_id);
      EXPECT_EQ(sql_value(path, "select k.step from tensors t join kernels k on k.id = t.kernel_id" + where), cell.step);
      const std::string row_sql = by_tensor ? "select count(*) from tensors t join strings s on s.id = t.name_id" + where +
                                                  " and s.value = '" + cell.layer + "'"
                                            : "select count(*) from tensors t join kernels k on k.id = t.kernel_id "
                                              "join strings s on s.id = k.layer_id" + where + " and s.value = '" +
                                                  cell.layer + "'";
      EXPECT_EQ(sql_value(path, row_sql), 1.0) << key << " " << cell.layer;
    }
    if (!by_tensor) EXPECT_GT(picked, 0) << key;
  }
  EXPECT_FALSE(largest_tensor_of_cell(*t, RangeView::Activations, "no-such-layer", 0));
}

// The HTML report's structure as a browser lays it out: long values wrap inside the page, every
// plotted series has a legend entry below its plot (not text placed inside the SVG where labels
// collide), and the heat maps say which tensors they show.
TEST(Analysis, HtmlReportWrapsLongValuesAndLegendsEverySeries) {
  const auto path = make_trace("html", nan_run());
  auto t = Trace::open(path);
  std::ostringstream out;
  export_html(*t, out);
  const std::string html = out.str();
  EXPECT_NE(html.find("<table class=\"kv\">"), std::string::npos);
  EXPECT_NE(html.find("table.kv{width:100%;table-layout:fixed}"), std::string::npos);
  EXPECT_NE(html.find("td{overflow-wrap:break-word}"), std::string::npos);
  const auto memory_plot = html.find("Live memory by category");
  ASSERT_NE(memory_plot, std::string::npos);
  const auto legend = html.find("<div class=\"legend\">", memory_plot);
  ASSERT_NE(legend, std::string::npos);
  const std::string entries = html.substr(legend, html.find("</div>", legend) - legend);
  const MemoryReport m = memory(*t);
  for (const auto& c : m.by_category) {
    if (c.at_peak > 0) EXPECT_NE(entries.find("</i>" + c.category + "</span>"), std::string::npos) << c.category;
  }
  EXPECT_NE(entries.find("</i>total</span>"), std::string::npos);
  EXPECT_EQ(html.find("class=\"ax\">weight<"), std::string::npos) << "a series label inside the SVG";
  EXPECT_NE(html.find(range_view_info(RangeView::Activations).title), std::string::npos);
  EXPECT_NE(html.find(range_view_info(RangeView::GradientsScaled).title), std::string::npos);

  // The heat maps draw in the shared palette: a cell that held NaN/Inf in its colour, and a key
  // whose swatches name exponents on the same scale.
  const auto heat = html.find(range_view_info(RangeView::GradientsScaled).title);
  const std::string heat_svg = html.substr(heat, html.find("</svg>", heat) - heat);
  EXPECT_NE(heat_svg.find("fill=\"" + palette::hex(palette::kNaN) + "\""), std::string::npos);
  const auto key = html.find("<div class=\"legend\">", heat);
  ASSERT_NE(key, std::string::npos);
  const std::string key_text = html.substr(key, html.find("</div>", key) - key);
  EXPECT_NE(key_text.find(palette::hex(palette::kNaN) + "\"></b>NaN/Inf"), std::string::npos) << key_text;
  EXPECT_NE(key_text.find("></b>2^"), std::string::npos) << key_text;
}

// One palette for every front end: categories by name in the contract's order, the exponent
// ramp from its dark end to its bright end, and a colour per name that never changes.
TEST(Palette, MeaningfulColoursAreSharedAndStable) {
  for (int c = 0; c < contract::kMemoryCategoryCount; ++c) {
    EXPECT_EQ(palette::category(contract::kMemoryCategoryNames[c]), palette::kCategories[c]) << c;
    EXPECT_EQ(palette::category(static_cast<contract::MemoryCategory>(c)), palette::kCategories[c]) << c;
  }
  EXPECT_EQ(palette::hex({255, 0, 16}), "#ff0010");
  auto luminance = [](palette::Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b; };
  double previous = -1;
  for (int i = 0; i <= 20; ++i) {
    const double now = luminance(palette::exponent_scale(i / 20.0));
    EXPECT_GT(now, previous) << "the ramp brightens monotonically, at " << i;
    previous = now;
  }
  EXPECT_EQ(palette::exponent_scale(-3), palette::exponent_scale(0));
  EXPECT_EQ(palette::exponent_scale(7), palette::exponent_scale(1));
  EXPECT_EQ(palette::exponent_scale(std::nan("")), palette::exponent_scale(0));
  EXPECT_DOUBLE_EQ(palette::scale_position(5, 0, 10), 0.5);
  EXPECT_DOUBLE_EQ(palette::scale_position(3, 3, 3), 0.5);
  EXPECT_EQ(palette::for_name("conv2d_forward"), palette::for_name("conv2d_forward"));
  EXPECT_NE(palette::for_name("conv2d_forward"), palette::for_name("conv2d_backward_data"));
  // An unknown category name falls back to the name's own colour.
  EXPECT_EQ(palette::category("no such category"), palette::for_name("no such category"));
  // Hue from the name; the brightest channel is the requested value.
  const palette::Rgb c = palette::for_name("relu_forward", 0.5, 0.8);
  EXPECT_EQ(std::max({c.r, c.g, c.b}), 204);
}

TEST(Analysis, ProgressCallbackCancels) {
  auto o = nan_run();
  o.finalize = false;
  const auto path = make_trace("cancel", o);
  OpenOptions options;
  options.progress = [](const LoadProgress& p) { return p.fraction < 0.05; };
  try {
    Trace::open(path, options);
    ADD_FAILURE() << "not cancelled";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.kind(), TraceErrorKind::Cancelled);
  }
}

TEST(Analysis, ChromeTraceNestsPerThread) {
  const auto path = make_trace("chrome", nan_run());
  auto t = Trace::open(path);
  std::ostringstream out;
  export_chrome_trace(*t, out);
  const auto doc = nlohmann::json::parse(out.str());
  std::map<int64_t, std::vector<std::pair<double, double>>> spans;  // tid -> (start, end) in us
  int counters = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") spans[e["tid"].get<int64_t>()].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_GT(counters, 0);
  size_t events = 0;
  for (auto& [tid, list] : spans) {
    std::sort(list.begin(), list.end(), [](auto& x, auto& y) { return x.first < y.first || (x.first == y.first && x.second > y.second); });
    std::vector<double> stack;  // ends of the open spans
    for (const auto& [start, end] : list) {
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      if (!stack.empty()) EXPECT_LE(end, stack.back() + 1e-6) << "span at " << start << " crosses its parent";
      stack.push_back(end);
      ++events;
    }
  }
  EXPECT_EQ(events, *sql_value(path, "select (select count(*) from kernels) + (select count(*) from nvtx_ranges)"));
}

TEST(Analysis, AdviceKeepsOverflowingOpsInFp32) {
  auto o = nan_run();
  o.nan_at_step.reset();
  o.precision = "fp32";
  o.loss_scale = "none";
  o.activation_scale = 4000;  // fc1 (20) and fc2 (30) reach 80000 and 120000: beyond fp16's 65504
  const auto path = make_trace("advise", o);
  auto t = Trace::open(path);
  const Advice a = advise(*t);
  std::map<std::string, OpAdvice> by;
  for (const auto& op : a.ops) by[op.op] = op;
  EXPECT_EQ(by["linear"].placement, OpPlacement::Fp32);
  EXPECT_EQ(by["max_pool2d"].placement, OpPlacement::LowPrecision);  // 3 * 4000 fits with room
  EXPECT_EQ(by["conv2d"].placement, OpPlacement::Fp32);  // 12 * 4000 fits, but within 2^1 of 65504
  EXPECT_TRUE(a.loss_scale.needed);  // gradients' smallest magnitudes lie below 2^-24
  EXPECT_NE(fp32_ops_file_text(a).find("\nlinear\n"), std::string::npos);
}

}  // namespace

// A layer moved when its largest forward output grew or shrank by the move ratio (2 by default),
// not when it crossed a power of two: 1.5x larger activations move no layer however many exponents
// change, 3x larger ones move every layer.
TEST(Analysis, CompareCallsALayerMovedByItsRatioNotItsExponent) {
  fpscope::synthetic::Options o;
  o.steps = 3;
  const auto base = make_trace("move_base", o);
  o.activation_scale = 1.5;
  const auto larger = make_trace("move_1_5", o);
  o.activation_scale = 3.0;
  const auto much_larger = make_trace("move_3", o);
  auto a = Trace::open(base);
  int crossed = 0;
  for (const auto& [path, scale] : {std::pair{larger, 1.5}, std::pair{much_larger, 3.0}}) {
    auto b = Trace::open(path);
    const Comparison c = compare(*a, *b);
    EXPECT_EQ(c.move_ratio, 2.0);
    ASSERT_FALSE(c.layers.empty());
    for (const LayerShift& l : c.layers) {
      ASSERT_TRUE(l.ratio) << l.layer;
      EXPECT_EQ(*l.ratio, *l.b_absmax / *l.a_absmax) << l.layer;
      EXPECT_NEAR(*l.ratio, scale, 1e-6) << l.layer;
      EXPECT_EQ(l.moved, scale > 2) << l.layer;
      if (scale < 2 && *l.shift != 0) ++crossed;
    }
    CompareOptions strict;
    strict.move_ratio = 1.25;
    for (const LayerShift& l : compare(*a, *b, strict).layers) EXPECT_TRUE(l.moved) << l.layer;
  }
  EXPECT_GT(crossed, 0);  // the case the ratio is for: exponents changed, no layer moved
}
