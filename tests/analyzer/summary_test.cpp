// The run summary of libfpscope_analysis on synthetic traces: every figure against direct SQL on
// the same file or the meta it comes from (the tracer's own cost, how the run ended, the final
// loss), and the lines every front end shows from it.
#include "fpscope/common/process_identity.h"
#include "fpscope/analysis.h"
#include "fpscope/export.h"
#include "fpscope/units.h"
#include "processes.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

using namespace fpscope::analysis;
namespace contract = fpscope::contract;
namespace common = fpscope::common;
using fpscope::test::make_trace;
using fpscope::test::nan_run;
using fpscope::test::sql_exec;
using fpscope::test::sql_value;

namespace {

TEST(Analysis, SummaryMatchesSql) {
  const auto path = make_trace("summary", nan_run());
  auto t = Trace::open(path);
  EXPECT_TRUE(t->summaries_precomputed());
  const RunSummary s = summary(*t);
  EXPECT_EQ(s.kernels, *sql_value(path, "select count(*) from kernels"));
  EXPECT_EQ(s.tensors, *sql_value(path, "select count(*) from tensors"));
  EXPECT_EQ(s.nonfinite_tensors, *sql_value(path, "select count(*) from nonfinite"));
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(s.precision, "amp-fp16");
  EXPECT_EQ(*s.final_loss, *sql_value(path, "select value from scalars where name_id = (select id from strings "
                                            "where value='loss') and value is not null order by step desc limit 1"));
  EXPECT_EQ(*s.test_accuracy, *sql_value(path, "select value from scalars where name_id = (select id from strings "
                                               "where value='test_accuracy')"));
  EXPECT_EQ(s.state, RunEnd::ExitedOk);
}

// The injector's own time: the busiest process's, from meta; absent or malformed values give none.
TEST(Analysis, TracingOwnTimeIsThatOfTheBusiestProcess) {
  const auto path = make_trace("own_time", nan_run());
  EXPECT_FALSE(summary(*Trace::open(path)).tracing_own_ms);
  sql_exec(path, "INSERT INTO meta(key, value) VALUES ('injector.own_time_ms', '12.500'), "
                 "('injector.own_time_ms.process1', '40.250'), ('injector.own_time_ms.process2', 'n/a')");
  EXPECT_EQ(summary(*Trace::open(path)).tracing_own_ms, 40.25);
  sql_exec(path, "DELETE FROM meta WHERE key = 'injector.own_time_ms.process1'");
  EXPECT_EQ(summary(*Trace::open(path)).tracing_own_ms, 12.5);
  sql_exec(path, "UPDATE meta SET value = '-3' WHERE key = 'injector.own_time_ms'");
  EXPECT_FALSE(summary(*Trace::open(path)).tracing_own_ms);
}

// The collector's CPU time, from meta (the writer that made the trace wrote one); absent or
// malformed values give none.
TEST(Analysis, CollectorCpuTimeComesFromMeta) {
  const auto path = make_trace("collector_cpu", nan_run());
  const auto written = sql_value(path, "select cast(value as real) from meta where key = 'collector_cpu_ms'");
  ASSERT_TRUE(written);
  EXPECT_EQ(summary(*Trace::open(path)).collector_cpu_ms, *written);
  sql_exec(path, "UPDATE meta SET value = '1234.5' WHERE key = 'collector_cpu_ms'");
  EXPECT_EQ(summary(*Trace::open(path)).collector_cpu_ms, 1234.5);
  sql_exec(path, "UPDATE meta SET value = '12 ms' WHERE key = 'collector_cpu_ms'");
  EXPECT_FALSE(summary(*Trace::open(path)).collector_cpu_ms);
  sql_exec(path, "DELETE FROM meta WHERE key = 'collector_cpu_ms'");
  EXPECT_FALSE(summary(*Trace::open(path)).collector_cpu_ms);
}

// The tracing cost lines every front end shows: one per figure the trace has, the injector's with
// its share of the duration, the same words in the HTML report as in the text one.
TEST(Analysis, TracingCostLinesShowEachFigureWithItsShareOfTheDuration) {
  const auto path = make_trace("cost", nan_run());
  sql_exec(path, "DELETE FROM meta WHERE key = 'collector_cpu_ms'");
  EXPECT_TRUE(tracing_cost(summary(*Trace::open(path))).empty());
  sql_exec(path, "INSERT INTO meta(key, value) VALUES ('injector.own_time_ms', '0.5'), ('collector_cpu_ms', '4000')");
  const RunSummary s = summary(*Trace::open(path));
  ASSERT_TRUE(s.start_ns && s.end_ns);
  ASSERT_GT(*s.end_ns - *s.start_ns, 500000);
  const std::vector<TracingCost> lines = tracing_cost(s);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].label, "tracing's own time");
  EXPECT_EQ(lines[0].ms, 0.5);
  EXPECT_EQ(lines[0].text, fmt::format("0.5 ms on the program's threads around launches ({:.1f}% of the duration)",
                                       100.0 * 0.5 * 1e6 / static_cast<double>(*s.end_ns - *s.start_ns)));
  EXPECT_EQ(lines[1].label, "collector's CPU time");
  EXPECT_EQ(lines[1].ms, 4000.0);
  EXPECT_EQ(lines[1].text, "4000.0 ms in fpscope run's own process (draining, storing, summarising)");
  std::ostringstream html;
  export_html(*Trace::open(path), html);
  // The report escapes < > & and quotes; these lines have none of them but apostrophes.
  for (const TracingCost& line : lines)
    EXPECT_NE(html.str().find("<tr><th>" + line.label + "</th><td>" + line.text + "</td></tr>"), std::string::npos)
        << line.label;
}

// A process whose tracing stopped after a failure inside the injector says so in the summary.
TEST(Analysis, TracingFailureIsReported) {
  const auto path = make_trace("failure", nan_run());
  EXPECT_EQ(summary(*Trace::open(path)).tracing_failure, "");
  sql_exec(path, "INSERT INTO meta(key, value) VALUES ('injector.failure.process1', 'mpt_launch: std::bad_alloc')");
  EXPECT_EQ(summary(*Trace::open(path)).tracing_failure, "mpt_launch: std::bad_alloc");
}

// A loss that turned +-Inf (stored as itself, unlike a NaN) ends the run's finite losses too.
TEST(Analysis, AnInfiniteLossIsNotTheFinalLoss) {
  auto o = nan_run();
  o.nan_at_step.reset();
  const auto path = make_trace("inf_loss", o);
  sql_exec(path, "UPDATE scalars SET value = CASE WHEN step = 6 THEN -9e999 ELSE 9e999 END "
                 "WHERE step >= 5 AND name_id = (SELECT id FROM strings WHERE value = 'loss')");
  const RunSummary s = summary(*Trace::open(path));
  EXPECT_EQ(s.final_loss_step, 4);
  EXPECT_EQ(*s.final_loss, *sql_value(path, "select value from scalars where step = 4 and name_id = "
                                            "(select id from strings where value = 'loss')"));
  EXPECT_EQ(s.first_nonfinite_loss_step, 5);
  EXPECT_EQ(s.nonfinite_loss_steps, 3);
  EXPECT_EQ(final_loss_text(s), human_number(*s.final_loss) + " (step 4), then NaN/Inf from step 5 on (3 steps)");
}

TEST(Analysis, RunningTraceOpensAndSaysSo) {
  auto o = nan_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto path = make_trace("running", o);
  auto t = Trace::open(path);
  EXPECT_EQ(t->state(), RunEnd::Running);  // a synthetic trace names no collector: it may still run
  EXPECT_TRUE(t->unfinished());
  EXPECT_EQ(summary(*t).kernels, *sql_value(path, "select count(*) from kernels"));
}

void set_meta(const std::string& path, const std::string& key, const std::string& value) {
  sql_exec(path, "insert or replace into meta(key, value) values ('" + key + "', '" + value + "')");
}

TEST(Analysis, EveryRunEndingReadsFromTheContract) {
  const auto path = make_trace("endings", nan_run());
  struct Case {
    const char* end_reason;
    const char* exit_code;  // "" leaves meta exit_code out
    RunEnd expected;
  };
  for (const Case& c : {Case{"exited", "0", RunEnd::ExitedOk}, Case{"exited", "3", RunEnd::ExitedError},
                        Case{"signaled", "", RunEnd::Signaled}, Case{"trapped", "", RunEnd::Trapped},
                        Case{"collector_interrupted", "", RunEnd::Interrupted}, Case{"no such ending", "", RunEnd::Unknown}}) {
    set_meta(path, "end_reason", c.end_reason);
    sql_exec(path, "delete from meta where key = 'exit_code'");
    if (*c.exit_code) set_meta(path, "exit_code", c.exit_code);
    const RunSummary s = summary(*Trace::open(path));
    EXPECT_EQ(s.state, c.expected) << c.end_reason << " " << c.exit_code;
    EXPECT_NE(ending_text(s).find(contract::label(c.expected)), std::string::npos) << ending_text(s);
  }
  // The failures a user must not read as success: a trap, a signal, an error status.
  EXPECT_TRUE(contract::is_failure(RunEnd::Trapped));
  EXPECT_TRUE(contract::is_failure(RunEnd::Signaled));
  EXPECT_TRUE(contract::is_failure(RunEnd::ExitedError));
  EXPECT_TRUE(contract::is_failure(RunEnd::CollectorLost));
  EXPECT_FALSE(contract::is_failure(RunEnd::ExitedOk));
}

TEST(Analysis, RunningTraceWhoseCollectorDiedIsCollectorLost) {
  auto o = nan_run();
  o.end_reason = "running";
  o.finalize = false;
  const auto path = make_trace("lost", o);
  const common::ProcessIdentity me = common::self_identity();
  set_meta(path, "collector_boot_id", me.boot_id);
  // Named collector alive (this test process): still being written.
  set_meta(path, "collector_pid", std::to_string(me.pid));
  set_meta(path, "collector_start_ticks", std::to_string(me.start_ticks));
  EXPECT_EQ(Trace::open(path)->state(), RunEnd::Running);
  // Same pid, another start time: a later process reusing the pid. The collector is gone.
  set_meta(path, "collector_start_ticks", std::to_string(me.start_ticks + 1));
  EXPECT_EQ(Trace::open(path)->state(), RunEnd::CollectorLost);
  // A pid no process has.
  set_meta(path, "collector_pid", std::to_string(fpscope::test::reaped_pid()));
  set_meta(path, "collector_start_ticks", std::to_string(me.start_ticks));
  auto t = Trace::open(path);
  EXPECT_EQ(t->state(), RunEnd::CollectorLost);
  EXPECT_TRUE(t->unfinished());
  EXPECT_NE(ending_text(summary(*t)).find("collector lost"), std::string::npos);
  // Another boot: whatever the pid, that process is gone.
  set_meta(path, "collector_pid", std::to_string(me.pid));
  set_meta(path, "collector_boot_id", "00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(Trace::open(path)->state(), RunEnd::CollectorLost);
}

}  // namespace
