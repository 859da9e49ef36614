// The event list (fpscope/analysis/events.h) against direct SQL on the same trace: every kind,
// pages, filters, and the forecasts placed among them.
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

// The event list against direct SQL: one event per non-finite row, per tensor with an fp16/bf16
// overflow or underflow, per skipped step, backoff and growth; in time order; pages that add up
// to the whole list; filters by kind and step.
TEST(Analysis, EventsMatchSqlPageAndFilter) {
  auto o = nan_run();
  o.activation_scale = 10000;  // fp32 outputs beyond fp16's range: overflow events
  o.scale_init = 1;            // small unscaled gradients: fp16 underflow events
  const auto path = make_trace("events", o);
  // A trap at the first origin, as the collector records one (meta trap.*).
  const int64_t trapped = static_cast<int64_t>(*sql_value(path, "select kernel_id from v_first_nonfinite"));
  sql_exec(path, fmt::format("insert or replace into meta values ('trap.kernel_id', '{0}'), ('trap.t_ns', "
                             "(select start_ns from kernels where id = {0})), ('trap.message', "
                             "'fpscope: trap: first NaN made by the test')", trapped));
  auto t = Trace::open(path);
  const EventPage all = events(*t);
  EXPECT_FALSE(all.more);
  std::array<int64_t, kEventKindCount> count{};
  for (size_t i = 0; i < all.events.size(); ++i) {
    ++count[static_cast<size_t>(all.events[i].kind)];
    if (i) EXPECT_LE(all.events[i - 1].t_ns, all.events[i].t_ns);
  }
  auto sql_count = [&](const std::string& q) { return static_cast<int64_t>(*sql_value(path, q)); };
  EXPECT_EQ(count[static_cast<size_t>(EventKind::NaN)], sql_count("select count(*) from nonfinite where kind = 'nan'"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::Inf)], sql_count("select count(*) from nonfinite where kind <> 'nan'"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::Overflow)],
            sql_count("select count(*) from tensors where role = 'out' and (f16_overflow > 0 or bf16_overflow > 0)"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::Underflow)],
            sql_count("select count(*) from tensors where role = 'out' and (f16_underflow > 0 or bf16_underflow > 0)"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::SkippedStep)], sql_count("select count(*) from loss_scale where skipped = 1"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::ScaleBackoff)], sql_count("select count(*) from loss_scale where event = 'backoff'"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::ScaleGrowth)], sql_count("select count(*) from loss_scale where event = 'growth'"));
  EXPECT_EQ(count[static_cast<size_t>(EventKind::Trap)], 1);
  EXPECT_EQ(count[static_cast<size_t>(EventKind::Forecast)], static_cast<int64_t>(forecast(*t).size()));
  for (size_t k = 0; k < count.size(); ++k)  // forecasts have a test of their own
    if (static_cast<EventKind>(k) != EventKind::Forecast) EXPECT_GT(count[k], 0) << "every kind should occur in this run";
  for (const Event& e : all.events) {
    if (e.kind != EventKind::Trap) continue;
    EXPECT_EQ(e.kernel_id, trapped);
    EXPECT_EQ(e.step, sql_value(path, fmt::format("select step from kernels where id = {}", trapped)));
    EXPECT_EQ(e.detail, "--trap stopped the program: first NaN made by the test");
  }

  // Pages of 7 put together are the whole list, in the same order.
  std::vector<Event> paged;
  for (EventQuery q{.offset = 0, .limit = 7};; q.offset += q.limit) {
    EventPage page = events(*t, q);
    paged.insert(paged.end(), page.events.begin(), page.events.end());
    EXPECT_EQ(page.more, paged.size() < all.events.size()) << "page at " << q.offset;
    if (!page.more) break;
  }
  ASSERT_EQ(paged.size(), all.events.size());
  for (size_t i = 0; i < paged.size(); ++i) {
    EXPECT_EQ(paged[i].kind, all.events[i].kind) << i;
    EXPECT_EQ(paged[i].t_ns, all.events[i].t_ns) << i;
    EXPECT_EQ(paged[i].tensor_id, all.events[i].tensor_id) << i;
    EXPECT_EQ(paged[i].detail, all.events[i].detail) << i;
  }

  // Filters give exactly the matching part of the whole list.
  EventQuery nan_at_4;
  nan_at_4.kinds.fill(false);
  nan_at_4.kinds[static_cast<size_t>(EventKind::NaN)] = true;
  nan_at_4.kinds[static_cast<size_t>(EventKind::SkippedStep)] = true;
  nan_at_4.step = 4;
  std::vector<const Event*> expected;
  for (const Event& e : all.events) {
    if ((e.kind == EventKind::NaN || e.kind == EventKind::SkippedStep) && e.step == 4) expected.push_back(&e);
  }
  const EventPage filtered = events(*t, nan_at_4);
  ASSERT_EQ(filtered.events.size(), expected.size());
  ASSERT_FALSE(expected.empty());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(filtered.events[i].kind, expected[i]->kind);
    EXPECT_EQ(filtered.events[i].kernel_id, expected[i]->kernel_id);
  }
  EXPECT_STREQ(event_kind_name(EventKind::ScaleBackoff), "scale backoff");
}

// A range heading for fp16's edge is an event: one per forecast, at the last step fitted, on the
// launch that wrote the row's largest tensor then.
TEST(Analysis, ForecastsAreEventsAtTheirLastFittedStep) {
  fpscope::synthetic::Options o;
  o.steps = 30;
  o.activation_growth = 1.25;  // every forward output grows a quarter a step
  const auto path = make_trace("forecast_events", o);
  auto t = Trace::open(path);
  const std::vector<RangeForecast> forecasts = forecast(*t);
  ASSERT_FALSE(forecasts.empty());
  EventQuery only;
  only.kinds.fill(false);
  only.kinds[static_cast<size_t>(EventKind::Forecast)] = true;
  const EventPage page = events(*t, only);
  ASSERT_EQ(page.events.size(), forecasts.size());
  for (const RangeForecast& f : forecasts) {
    SCOPED_TRACE(f.row);
    const auto e = std::find_if(page.events.begin(), page.events.end(), [&](const Event& e) { return e.detail == f.summary; });
    ASSERT_NE(e, page.events.end());
    EXPECT_EQ(e->step, f.last_step);
    ASSERT_TRUE(e->tensor_id);
    if (f.view != RangeView::Activations) continue;
    EXPECT_EQ(e->layer, f.row);
    // The event's tensor is the largest forward output of that layer in that step, by SQL.
    EXPECT_EQ(sql_value(path, fmt::format("select absmax from tensors where id = {}", *e->tensor_id)),
              sql_value(path, fmt::format("select max(t.absmax) from v_tensors t join v_kernels k on k.id = t.kernel_id"
                                          " where k.layer = '{}' and k.phase = 'forward' and k.step = {} and t.role = 'out'",
                                          f.row, f.last_step)));
    EXPECT_EQ(sql_value(path, fmt::format("select end_ns from kernels where id = {}", e->kernel_id)),
              static_cast<double>(e->t_ns));
  }
  // Asked for one step, only the forecasts fitted up to it.
  only.step = forecasts.front().last_step;
  for (const Event& e : events(*t, only).events) EXPECT_EQ(e.step, only.step);
}

}  // namespace
