// Traces of older schemas read as this build's schema: the reader adds what they lack (temporary
// views with the values the older writer implied) and this build's views over them.
#include "fpscope/analysis.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

using namespace fpscope::analysis;
namespace contract = fpscope::contract;
using fpscope::test::make_trace;
using fpscope::test::nan_run;
using fpscope::test::sql_exec;
using fpscope::test::sql_text;
using fpscope::test::sql_value;

namespace {

// A trace written before the memory timeline's views existed: the reader adds them (as temporary
// views), and an unfinished one's summaries, rebuilt from them, give the memory report of a
// trace that has them.
TEST(Analysis, OlderTraceGetsTheMemoryViewsItLacks) {
  auto o = nan_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto current = make_trace("views-current", o);
  const auto older = make_trace("views-older", o);
  sql_exec(older, "drop view v_memory_peak; drop view v_memory_peak_moment; drop view v_memory_timeline; "
                  "drop view v_memory_live; drop view v_memory_deltas");
  ASSERT_FALSE(sql_value(older, "select count(*) from sqlite_master where name = 'v_memory_timeline'").value_or(1));
  auto a = Trace::open(current);
  auto b = Trace::open(older);
  const MemoryReport ma = memory(*a), mb = memory(*b);
  ASSERT_GT(ma.events, 0);
  EXPECT_EQ(mb.peak_bytes, ma.peak_bytes);
  EXPECT_EQ(mb.peak_ns, ma.peak_ns);
  EXPECT_EQ(mb.peak_step, ma.peak_step);
  for (int c = 0; c < kCategoryCount; ++c) {
    EXPECT_EQ(mb.by_category[c].at_peak, ma.by_category[c].at_peak) << c;
    EXPECT_EQ(mb.by_category[c].max_live, ma.by_category[c].max_live) << c;
  }
  const QueryResult q = b->query("select count(*) from v_memory_timeline");
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(q.rows[0][0]), ma.events);
  // The file itself is not changed: the views live only in the reader's connection.
  EXPECT_FALSE(sql_value(older, "select count(*) from sqlite_master where name = 'v_memory_timeline'").value_or(1));
}

// A trace of this schema written by an earlier build, with an earlier definition of a view (here
// v_memory_peak without peak_step, which the summaries now read): unfinished, its summaries are
// built over this build's views, and read as a current trace's.
TEST(Analysis, EarlierDefinitionOfAViewIsShadowedByThisBuilds) {
  auto o = nan_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto current = make_trace("view-def-current", o);
  const auto earlier = make_trace("view-def-earlier", o);
  sql_exec(earlier,
           "drop view v_memory_peak; create view v_memory_peak as select c.name as category, 0 as bytes, "
           "null as peak_t_ns, null as peak_total_bytes, null as rank from categories c");
  auto a = Trace::open(current);
  auto b = Trace::open(earlier);
  const MemoryReport ma = memory(*a), mb = memory(*b);
  ASSERT_GT(ma.peak_bytes, 0);
  EXPECT_EQ(mb.peak_bytes, ma.peak_bytes);
  EXPECT_EQ(mb.peak_step, ma.peak_step);
  const QueryResult q = b->query("select peak_step from v_memory_peak limit 1");
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(q.rows[0][0], a->query("select peak_step from v_memory_peak limit 1").rows[0][0]);
}

// A trace of schema 1 has no nonfinite.allowed: it reads as nothing allowed, finished or not (the
// summaries of an unfinished one are built by this build's SQL, which reads the column).
TEST(Analysis, SchemaOneTraceReadsAsNothingAllowed) {
  for (const bool finished : {true, false}) {
    auto o = nan_run();
    if (!finished) {
      o.end_reason = "running";
      o.finalize = false;
    }
    const auto current = make_trace(finished ? "schema2-done" : "schema2-running", o);
    const auto older = make_trace(finished ? "schema1-done" : "schema1-running", o);
    std::string old_view = *sql_text(older, "select sql from sqlite_master where name = 'v_first_nonfinite'");
    const std::string filter = " AND n.allowed = 0";
    ASSERT_NE(old_view.find(filter), std::string::npos);
    old_view.erase(old_view.find(filter), filter.size());
    // The views that read the column go first (this build's, which the reader shadows in any case).
    sql_exec(older, "create table nonfinite_v1 as select id, tensor_id, kernel_id, kind, first_index, first_bits, "
                    "origin from nonfinite; drop view v_first_nonfinite; drop view v_tensors; "
                    "drop view v_step_summary; drop view v_op_ranges; drop table nonfinite; "
                    "alter table nonfinite_v1 rename to nonfinite; " + old_view +
                        "; update meta set value = '1' where key = 'schema_version'; pragma user_version = 1");
    ASSERT_FALSE(sql_value(older, "select count(*) from pragma_table_info('nonfinite') where name = 'allowed'")
                     .value_or(1));
    auto a = Trace::open(current);
    auto b = Trace::open(older);
    EXPECT_EQ(b->schema_version(), 1);
    const NonfiniteReport na = nonfinite(*a), nb = nonfinite(*b);
    ASSERT_TRUE(na.first_origin);
    ASSERT_TRUE(nb.first_origin);
    EXPECT_EQ(nb.first_origin->kernel_id, na.first_origin->kernel_id);
    EXPECT_EQ(nb.by_kernel.size(), na.by_kernel.size());
    EXPECT_EQ(summary(*b).nonfinite_tensors, summary(*a).nonfinite_tensors);
    EXPECT_EQ(summary(*b).allowed_nonfinite_tensors, 0);
    const QueryResult q = b->query("select count(*) from nonfinite where allowed = 0");
    EXPECT_EQ(std::get<int64_t>(q.rows[0][0]), *sql_value(older, "select count(*) from nonfinite"));
  }
}

// A schema-2 trace (one process, no rank columns, no processes table) reads as rank 0 of one process,
// with the same numbers as the trace it was made from.
TEST(Analysis, SchemaTwoTraceReadsAsOneProcessOfRankZero) {
  auto o = nan_run();
  const auto current = make_trace("schema3", o);
  const auto older = make_trace("schema2", o);
  std::string drop;
  for (const char* view : {"v_param_updates", "v_tensor_stores", "v_tensor_recipes", "v_kernels", "v_tensors", "v_first_nonfinite", "v_step_summary", "v_step_loss",
                           "v_step_ranges", "v_op_ranges",
                           "v_loss_scale", "v_memory_peak", "v_memory_peak_moment", "v_memory_timeline",
                           "v_memory_live", "v_memory_deltas"})
    drop += std::string("drop view ") + view + "; ";
  drop += "drop index memory_events_by_rank_time; drop table processes; drop table tensor_recipes; drop table recipes; "
          "drop table param_updates; drop table tensor_stores; ";
  // The tables as schema 2 had them: every column but rank.
  for (const std::string table : {"nvtx_ranges", "kernels", "tensors", "nonfinite", "memory_events", "loss_scale",
                                  "scalars", "cuda_kernels", "cuda_memcpy", "cuda_memset", "cuda_memory"}) {
    const std::string columns =
        *sql_text(older, "select group_concat(name, ', ') from pragma_table_info('" + table + "') where name != 'rank'");
    drop += "create table " + table + "_v2 as select " + columns + " from " + table + "; drop table " + table +
            "; alter table " + table + "_v2 rename to " + table + "; ";
  }
  for (const char* table : {"summary_ranges", "summary_layer_steps", "summary_steps", "summary_nonfinite",
                            "summary_memory", "summary_allocations", "summary_counts", "summary_ranks"})
    drop += std::string("drop table ") + table + "; ";
  sql_exec(older, drop + "update meta set value = '2' where key = 'schema_version'; pragma user_version = 2");
  ASSERT_FALSE(sql_value(older, "select count(*) from pragma_table_info('kernels') where name = 'rank'").value_or(1));
  auto a = Trace::open(current);
  auto b = Trace::open(older);
  EXPECT_EQ(b->schema_version(), 2);
  EXPECT_EQ(summary(*b).ranks, 1);
  EXPECT_EQ(summary(*b).kernels, summary(*a).kernels);
  EXPECT_EQ(summary(*b).nonfinite_tensors, summary(*a).nonfinite_tensors);
  const NonfiniteReport na = nonfinite(*a), nb = nonfinite(*b);
  ASSERT_TRUE(nb.first_origin);
  EXPECT_EQ(nb.first_origin->kernel_id, na.first_origin->kernel_id);
  EXPECT_EQ(nb.first_origin->rank, 0);
  EXPECT_EQ(memory(*b).peak_bytes, memory(*a).peak_bytes);
  const RanksReport rb = ranks(*b);
  ASSERT_EQ(rb.ranks.size(), 1u);
  EXPECT_EQ(rb.ranks[0].rank, 0);
  EXPECT_EQ(rb.ranks[0].kernels, summary(*a).kernels);
  EXPECT_EQ(rb.first_origin_rank, 0);
  const QueryResult q = b->query("select count(*), min(rank), max(rank) from kernels");
  EXPECT_EQ(std::get<int64_t>(q.rows[0][0]), summary(*a).kernels);
  EXPECT_EQ(std::get<int64_t>(q.rows[0][1]), 0);
  EXPECT_EQ(std::get<int64_t>(b->query("select rank from v_first_nonfinite").rows[0][0]), 0);
  EXPECT_EQ(std::get<int64_t>(b->query("select count(*) from processes").rows[0][0]), 1);
  // Its one rank can be chosen; another cannot.
  OpenOptions only;
  only.rank = 0;
  EXPECT_EQ(summary(*Trace::open(older, only)).kernels, summary(*a).kernels);
  only.rank = 1;
  try {
    Trace::open(older, only);
    ADD_FAILURE() << "rank 1 of a one-process trace was accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.kind(), TraceErrorKind::NoSuchRank);
    EXPECT_NE(std::string(e.what()).find("no rank 1 in this trace (it holds rank 0)"), std::string::npos) << e.what();
  }
}

}  // namespace
