// The analyzer on traces of real training runs: mptrain under `fpscope run` (the injector preloaded
// into it) on a small FashionMNIST subset. Values are checked against direct SQL on the same file;
// the fp16 run's memory against the fp32 run's; and `advise` must turn a run that goes non-finite
// into one that stays finite; `why` must find the cause chains the trace's rows show. The fp8 and
// learning reports are real_run_numerics_test.cpp's.
#include "fpscope/analysis.h"
#include "fpscope/contract/embedded_sql.h"
#include "fpscope/export.h"
#include "fpscope/units.h"
#include "real_run.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

using namespace fpscope::analysis;
using fpscope::test::kCommon;
using fpscope::test::RealRun;
using fpscope::test::sql_value;
using fpscope::test::traced;

namespace {

// The collector shares the summaries out between two connections and keeps the memory, tensor, step, rank and count
// summaries as the rows arrive; one connection running trace_finalize.sql on a copy of the trace writes the
// same tables, row for row.
TEST_F(RealRun, SummariesEqualOneConnectionRunningTheScript) {
  for (const char* args : {"", "--precision amp-fp16 --loss-scale dynamic --scale-interval 3 --fault nan@conv2:4:7"}) {
    const auto path = traced("summaries", args);
    const std::string copy = fpscope::test::temp_dir() + "/summaries-one-connection.sqlite";
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    fpscope::test::sql_exec(copy, std::string("BEGIN;") + fpscope::embedded::kTraceFinalizeSql + "; COMMIT;");
    const auto shared = fpscope::test::table_rows(path, "summary_"), alone = fpscope::test::table_rows(copy, "summary_");
    ASSERT_GT(shared.size(), 100u) << args;
    ASSERT_EQ(shared.size(), alone.size()) << args;
    for (size_t i = 0; i < shared.size(); ++i) ASSERT_EQ(shared[i], alone[i]) << "row " << i << " of " << args;
    EXPECT_EQ(*fpscope::test::sql_text(path, "select value from meta where key = 'finalize_status'"), "ok");
    // The memory, tensor, step, rank and count summaries were kept as the rows arrived (an mptrain trace
    // never relabels, and its format counts come with their tensors), declared as their statements
    // declare them.
    EXPECT_EQ(*fpscope::test::sql_text(path, "select value from meta where key = 'summaries_rolled_up'"),
              "summary_ranges,summary_layer_steps,summary_steps,summary_memory_peak,summary_memory_by_rank,"
              "summary_memory,summary_allocations,summary_ranks,summary_counts");
    EXPECT_EQ(*fpscope::test::sql_text(path, "select value from meta where key = 'summaries_not_rolled_up'"), "");
    const std::string declared =
        "select group_concat(sql, ';') from (select sql from sqlite_master where name like 'summary_%' order by name)";
    EXPECT_EQ(*fpscope::test::sql_text(path, declared), *fpscope::test::sql_text(copy, declared)) << args;
    // Which ones the second connection made depends on who was free first (possibly none).
    EXPECT_EQ(fpscope::test::sql_value(path, "select count(*) from meta where key = 'summaries_beside'"), 1);
  }
}

TEST_F(RealRun, ReportMatchesSql) {
  const auto path = traced("real_amp", "--precision amp-fp16 --loss-scale dynamic --scale-interval 3");
  auto t = Trace::open(path);
  EXPECT_TRUE(t->summaries_precomputed());  // the collector ran trace_finalize.sql
  const RunSummary s = summary(*t);
  EXPECT_EQ(s.kernels, *sql_value(path, "select count(*) from kernels"));
  EXPECT_EQ(s.tensors, *sql_value(path, "select count(*) from tensors"));
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.state, RunEnd::ExitedOk);
  EXPECT_EQ(*s.test_accuracy, *sql_value(path, "select value from scalars where name_id = (select id from strings where value = 'test_accuracy')"));
  const MemoryReport m = memory(*t);
  EXPECT_EQ(m.peak_bytes, *sql_value(path, "select peak_total_bytes from v_memory_peak limit 1"));
  for (int c = 0; c < kCategoryCount; ++c) {
    EXPECT_EQ(m.by_category[c].at_peak,
              *sql_value(path, std::string("select bytes from v_memory_peak where category = '") + kCategoryNames[c] + "'"));
  }
  // The dataset the trainer holds is data memory: 28x28 bytes per image and one per label.
  const auto data_bytes = [&](const char* name) {
    return sql_value(path, std::string("select sum(m.bytes) from memory_events m join strings s on s.id = m.name_id "
                                       "where m.kind = 'alloc' and m.category = 6 and s.value = '") + name + "'");
  };
  EXPECT_EQ(data_bytes("dataset.train.images"), 320.0 * 28 * 28);  // --train-subset 320
  EXPECT_EQ(data_bytes("dataset.train.labels"), 320.0);
  EXPECT_EQ(data_bytes("dataset.test.images"), 100.0 * 28 * 28);    // --test-subset 100
  EXPECT_EQ(data_bytes("dataset.test.labels"), 100.0);
  const LossScaleReport ls = loss_scale(*t);
  EXPECT_EQ(ls.growths, *sql_value(path, "select count(*) from loss_scale where event = 'growth'"));
  EXPECT_EQ(*ls.final_scale, *sql_value(path, "select scale_after from loss_scale order by t_ns desc limit 1"));
  // By default a forward kernel's side outputs (group_norm_forward's mean and rstd, the pooling's
  // argmax: slots after the first) are not the layer's range; on request they are.
  int side_output_rows = 0;
  for (const SideOutputs side : {SideOutputs::Apart, SideOutputs::Included}) {
    for (const auto& r : ranges(*t, RangeGrouping::LayerKernel, RoleFilter::Outputs, side)) {
      std::string where = "from tensors t join kernels k on k.id = t.kernel_id join strings s on s.id = k.name_id "
                          "left join strings l on l.id = k.layer_id left join strings p on p.id = k.phase_id "
                          "where t.role = 'out' and s.value = '" + r.kernel + "' and l.value " +
                          (r.layer ? "= '" + *r.layer + "'" : "is null");
      if (side == SideOutputs::Apart) {
        side_output_rows +=
            sql_value(path, "select count(*) " + where + " and t.slot > 0 and p.value in ('forward', 'eval')").value_or(0) > 0;
        where += " and not (t.slot > 0 and p.value in ('forward', 'eval'))";
      }
      EXPECT_EQ(r.absmax, sql_value(path, "select max(t.absmax) " + where)) << r.kernel;
      EXPECT_EQ(r.min_nonzero, sql_value(path, "select min(t.min_nonzero) " + where)) << r.kernel;
      EXPECT_EQ(r.elements, *sql_value(path, "select sum(t.count) " + where)) << r.kernel;
    }
  }
  EXPECT_EQ(side_output_rows, 1);  // group_norm_forward's (the pooling's argmax is integer: not measured)
  // The activations view takes a layer's main outputs: the group norm's y, not its rstd.
  const std::string norm = "from tensors t join kernels k on k.id = t.kernel_id join strings l on l.id = k.layer_id "
                           "join strings p on p.id = k.phase_id where t.role = 'out' and l.value = 'norm' "
                           "and p.value = 'forward'";
  ASSERT_GT(*sql_value(path, "select max(t.absmax) " + norm + " and t.slot > 0"),
            *sql_value(path, "select max(t.absmax) " + norm + " and t.slot = 0"));
  bool seen = false;
  for (const ViewRangeRow& row : view_ranges(*t, RangeView::Activations)) {
    if (row.row != "norm") continue;
    seen = true;
    EXPECT_EQ(row.absmax, sql_value(path, "select max(t.absmax) " + norm + " and t.slot = 0"));
    EXPECT_EQ(row.min_nonzero, sql_value(path, "select min(t.min_nonzero) " + norm + " and t.slot = 0"));
  }
  EXPECT_TRUE(seen);
  const auto cell = largest_tensor_of_cell(*t, RangeView::Activations, "norm", 1);
  ASSERT_TRUE(cell);
  EXPECT_EQ(*sql_value(path, "select slot from tensors where id = " + std::to_string(cell->tensor_id)), 0);
}

TEST_F(RealRun, FaultOriginFound) {
  const auto path = traced("real_fault", "--precision fp32 --fault nan@fc1:3");
  auto t = Trace::open(path);
  const NonfiniteReport r = nonfinite(*t);
  ASSERT_TRUE(r.first_origin);
  EXPECT_EQ(r.first_origin->kernel_id, *sql_value(path, "select kernel_id from v_first_nonfinite"));
  EXPECT_EQ(r.first_origin->layer, "fc1");
  EXPECT_EQ(r.first_origin->step, 3);
  EXPECT_FALSE(r.propagation.empty());
  EXPECT_EQ(r.nan + r.pos_inf + r.neg_inf,
            *sql_value(path, "select sum(nan + pos_inf + neg_inf) from tensors where role = 'out'"));
  // The loss is NaN from the planted step on: the summary says so rather than show step 2's loss
  // as the run's last word.
  const RunSummary s = summary(*t);
  const std::string losses = "from scalars where name_id = (select id from strings where value = 'loss')";
  EXPECT_EQ(s.final_loss_step, 2);
  EXPECT_EQ(s.first_nonfinite_loss_step, 3);
  EXPECT_EQ(s.nonfinite_loss_steps, *sql_value(path, "select count(*) " + losses + " and value is null"));
  EXPECT_EQ(s.nonfinite_loss_steps, 7);
  EXPECT_EQ(final_loss_text(s), human_number(*s.final_loss) + " (step 2), then NaN/Inf from step 3 on (7 steps)");
  std::ostringstream html;
  export_html(*t, html);
  EXPECT_NE(html.str().find("<th>final loss</th><td class=\"bad\">" + final_loss_text(s) + "</td>"), std::string::npos);
  EXPECT_NE(html.str().find("The loss was NaN/Inf from step 3 on (7 steps), which the plot leaves out."),
            std::string::npos);
}

TEST_F(RealRun, Fp16HalvesWeightsAndFloatActivations) {
  const auto a = traced("real_fp32", "--precision fp32");
  const auto b = traced("real_fp16", "--precision fp16");
  auto ta = Trace::open(a);
  auto tb = Trace::open(b);
  const Comparison c = compare(*ta, *tb);
  std::map<std::string, MemoryDelta> by;
  for (const auto& d : c.memory) by[d.category] = d;
  EXPECT_DOUBLE_EQ(*by["weight"].reduction_pct, 50.0);
  EXPECT_DOUBLE_EQ(*by["gradient"].reduction_pct, 50.0);
  EXPECT_GT(*by["activation"].reduction_pct, 25.0);  // int argmax and fp32 norm statistics do not shrink
  EXPECT_LE(*by["activation"].reduction_pct, 50.0);
  EXPECT_GT(*by["peak"].reduction_pct, 0.0);
  EXPECT_EQ(c.loss_curve.size(), 10u);
  // Each floating activation allocation is half as large in the fp16 run: compare by name.
  auto sizes = [](const std::string& path) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "select distinct s.value, m.bytes from memory_events m join strings s on s.id = m.name_id "
                           "where m.kind = 'alloc' and m.category = 3", -1, &st, nullptr);
    std::map<std::string, int64_t> out;
    while (sqlite3_step(st) == SQLITE_ROW) out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  };
  const auto sa = sizes(a), sb = sizes(b);
  int halved = 0;
  for (const auto& [name, bytes] : sb) {
    if (!sa.count(name) || name.find("argmax") != std::string::npos) continue;
    if (sa.at(name) == 2 * bytes) ++halved;
  }
  EXPECT_GE(halved, static_cast<int>(sb.size()) / 2) << "most activations should halve";
}

TEST_F(RealRun, AdviceKeepsATooHighStaticScaleRunFinite) {
  const auto hot = traced("real_hot", "--precision amp-fp16 --loss-scale static:1073741824");
  auto t = Trace::open(hot);
  ASSERT_GT(nonfinite(*t).tensors, 0) << "the run with scale 2^30 should overflow fp16";
  const Advice advice = advise(*t);
  ASSERT_TRUE(advice.loss_scale.needed);
  ASSERT_TRUE(advice.loss_scale.initial_scale);
  EXPECT_LT(*advice.loss_scale.initial_scale, 1073741824.0);
  const std::string dir = fpscope::test::temp_dir() + "/real_advice";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/fp32_ops.txt") << fp32_ops_file_text(advice);
  std::ofstream(dir + "/bf16_ops.txt") << low_precision_ops_file_text(advice);
  std::string flags;
  for (const auto& f : advice.mptrain_flags) flags += " " + (f.find("_ops.txt") != std::string::npos ? dir + "/" + f : f);
  const auto fixed = traced("real_fixed", flags);
  auto tf = Trace::open(fixed);
  EXPECT_EQ(nonfinite(*tf).tensors, 0) << "flags:" << flags;
  EXPECT_EQ(*sql_value(fixed, "select count(*) from nonfinite"), 0);
}

}  // namespace

// [SECTION] Why: the cause chains on real runs, checked against the trace's own rows --------------

namespace {

// The link of the chain whose writer is a launch of `kernel`, if any.
const CauseLink* link_written_by(const WhyReport& r, const std::string& kernel, const std::string& db) {
  for (const CauseLink& l : r.chain) {
    if (!l.writer_kernel_id) continue;
    const auto name = fpscope::test::sql_text(
        db, "select kernel from v_kernels where id = " + std::to_string(*l.writer_kernel_id));
    if (name == kernel) return &l;
  }
  return nullptr;
}

}  // namespace

// The seed tutorial's recipe: fp16 AdamW with fp16 optimizer state and a static scale of 1024.
TEST_F(RealRun, WhyNamesTheOptimizerStepAndTheFlushedSecondMoment) {
  const auto path = traced("why_seed", "--precision fp16 --optimizer adamw --lr 1e-3 --loss-scale static:1024 "
                                       "--optimizer-state fp16 --stochastic-rounding");
  auto t = Trace::open(path);
  const WhyReport r = why(*t);
  ASSERT_TRUE(r.origin);
  EXPECT_EQ(r.origin->kernel_id, *sql_value(path, "select kernel_id from v_first_nonfinite"));
  ASSERT_FALSE(r.causes.empty());
  const Cause& c = r.causes.front();
  EXPECT_EQ(c.kind, CauseKind::OptimizerStep);
  ASSERT_TRUE(c.kernel_id);
  const std::string launch = std::to_string(*c.kernel_id);
  EXPECT_EQ(fpscope::test::sql_text(path, "select kernel from v_kernels where id = " + launch), "adamw_step");
  // The parameter it names: the writer's output row, and the jump between its input and output rows.
  const CauseLink* l = link_written_by(r, "adamw_step", path);
  ASSERT_NE(l, nullptr);
  const std::string uid = std::to_string(*l->tensor_uid);
  EXPECT_EQ(l->absmax_before, sql_value(path, "select absmax from tensors where kernel_id = " + launch +
                                                  " and role = 'in' and tensor_uid = " + uid));
  EXPECT_EQ(l->absmax_after, sql_value(path, "select absmax from tensors where kernel_id = " + launch +
                                                 " and role = 'out' and tensor_uid = " + uid));
  EXPECT_GE(*l->jump_log2, 4.0);
  EXPECT_NE(c.summary.find(l->tensor), std::string::npos) << c.summary;
  // The second moment it wrote, with its zeros as the trace counts them.
  const auto zeros = sql_value(path, "select t.zero from tensors t join strings s on s.id = t.name_id where t.kernel_id = " +
                                         launch + " and t.role = 'out' and s.value like '%exp_avg_sq'");
  ASSERT_TRUE(zeros);
  EXPECT_GT(*zeros, 0);
  EXPECT_NE(c.summary.find("exp_avg_sq came out with " + std::to_string(static_cast<int64_t>(*zeros)) + " of"),
            std::string::npos) << c.summary;
  EXPECT_NE(c.advice.find("--optimizer-state fp32"), std::string::npos);
  // mptrain's AdamW epsilon (1e-08, meta config.optimizer) lies below fp16's smallest subnormal.
  EXPECT_NE(c.summary.find("the epsilon 1e-08 is below fp16's smallest subnormal 5.96e-08"), std::string::npos)
      << c.summary;
}

TEST_F(RealRun, WhyBlamesALossScaleTooHighAndExplainsEverySkippedStep) {
  const auto path = traced("why_amp", "--precision amp-fp16 --loss-scale dynamic --scale-init 16777216");
  auto t = Trace::open(path);
  const WhyReport r = why(*t);
  ASSERT_FALSE(r.causes.empty());
  EXPECT_EQ(r.causes.front().kind, CauseKind::LossScale);
  EXPECT_NE(r.causes.front().summary.find("loss scale 2^24"), std::string::npos) << r.causes.front().summary;
  EXPECT_NE(r.causes.front().summary.find("would have kept it finite"), std::string::npos) << r.causes.front().summary;
  EXPECT_EQ(static_cast<double>(r.skipped_steps.size()), *sql_value(path, "select count(*) from loss_scale where skipped = 1"));
  for (const Cause& c : r.skipped_steps) {
    EXPECT_EQ(c.kind, CauseKind::SkippedStep);
    ASSERT_TRUE(c.kernel_id);
    EXPECT_EQ(fpscope::test::sql_text(path, "select phase from v_kernels where id = " + std::to_string(*c.kernel_id)),
              "backward");
  }
}

TEST_F(RealRun, WhyBlamesTheLearningRateForAnSgdBlowUp) {
  const auto path = traced("why_sgd", "--precision fp16 --lr 10");
  auto t = Trace::open(path);
  const WhyReport r = why(*t);
  ASSERT_FALSE(r.causes.empty());
  const Cause& c = r.causes.front();
  EXPECT_EQ(c.kind, CauseKind::OptimizerStep);
  ASSERT_TRUE(c.kernel_id);
  EXPECT_EQ(fpscope::test::sql_text(path, "select kernel from v_kernels where id = " + std::to_string(*c.kernel_id)),
            "sgd_step");
  EXPECT_NE(c.summary.find("learning rate 10 x gradient absmax"), std::string::npos) << c.summary;
  EXPECT_NE(c.advice.find("--lr"), std::string::npos);
}

TEST_F(RealRun, WhyInventsNoPrecursorForAPlantedNan) {
  const auto path = traced("why_fault", "--precision fp32 --fault nan@fc1:3");
  auto t = Trace::open(path);
  const WhyReport r = why(*t);
  ASSERT_EQ(r.causes.size(), 1u);
  EXPECT_EQ(r.causes[0].kind, CauseKind::OpFromOrdinaryInputs);
  EXPECT_EQ(r.causes[0].kernel_id, sql_value(path, "select kernel_id from v_first_nonfinite"));
  EXPECT_TRUE(r.chain.empty());
}

// The report's ending of a run --trap stopped carries the trap's message, once.
TEST_F(RealRun, ATrappedRunsEndingCarriesTheTrapsMessage) {
  const std::string path = fpscope::test::temp_dir() + "/trapped.sqlite";
  const std::string cmd = fpscope::test::traced_command(path, "--trap nan", "--fault nan@fc1:3");
  ASSERT_NE(std::system(cmd.c_str()), 0) << cmd;  // the program dies of SIGTRAP
  auto t = Trace::open(path);
  const RunSummary s = summary(*t);
  EXPECT_EQ(s.state, fpscope::contract::RunEnd::Trapped);
  const auto message = fpscope::test::sql_text(path, "select value from meta where key = 'trap.message'");
  ASSERT_TRUE(message);
  EXPECT_EQ(s.trap, *message);
  const std::string prefix = "fpscope: trap: ";
  ASSERT_EQ(message->rfind(prefix, 0), 0u) << *message;
  EXPECT_EQ(ending_text(s), std::string(fpscope::contract::label(s.state)) + " (signal SIGTRAP, 5): " +
                                message->substr(prefix.size()));
}

TEST_F(RealRun, WhyStopsWhereTheWriterWasNotMeasured) {
  // --every is fpscope's option, before the program.
  const std::string sampled = fpscope::test::temp_dir() + "/why_every2.sqlite";
  const std::string cmd = fpscope::test::traced_command(sampled, "--every 2", "--precision fp16 --lr 10");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto t = Trace::open(sampled);
  const WhyReport r = why(*t);
  ASSERT_TRUE(r.origin);
  EXPECT_EQ(*r.origin->step % 2, 0);
  ASSERT_FALSE(r.causes.empty());
  EXPECT_EQ(r.causes.front().kind, CauseKind::NotMeasured);
  int stops = 0;
  for (const CauseLink& l : r.chain) {
    if (l.writer_kernel_id) continue;  // a measured writer: an unusual range on the way down
    ++stops;
    EXPECT_NE(l.note.find("left unmeasured"), std::string::npos) << l.note;
  }
  EXPECT_GT(stops, 0);
}
