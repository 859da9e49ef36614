// Unit tests of fpscope-gui's window-free parts: tick placement (plots and the heat maps' step
// axis), number formatting and the timeline's time index with its levels of detail (checked
// against brute force).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "timeline_index.h"
#include "ui/plot.h"

namespace fpscope::gui {
namespace {

TEST(NiceTicks, StepsAreOneTwoOrFiveTimesAPowerOfTen) {
  for (auto [lo, hi] : {std::pair{0.0, 1.0}, {0.13, 0.87}, {-37.0, 1234.0}, {1e-7, 3e-7}, {5e9, 7.3e9}}) {
    for (int max_ticks : {2, 5, 10}) {
      double step = 0;
      const auto ticks = plot::nice_ticks(lo, hi, max_ticks, &step);
      ASSERT_FALSE(ticks.empty()) << lo << " " << hi;
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
      EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9)
          << step;
      EXPECT_LE(static_cast<int>(ticks.size()), max_ticks + 1);
      for (double t : ticks) {
        EXPECT_GE(t, lo - step * 1e-6);
        EXPECT_LE(t, hi + step * 1e-6);
        EXPECT_NEAR(std::remainder(t, step), 0.0, step * 1e-6);
      }
      EXPECT_LT(ticks.front() - lo, step + step * 1e-9);  // no tick missing at either end
      EXPECT_LT(hi - ticks.back(), step + step * 1e-9);
    }
  }
}

TEST(NiceTicks, ExactValuesForAUnitRange) {
  double step = 0;
  const auto ticks = plot::nice_ticks(0, 1, 5, &step);
  EXPECT_DOUBLE_EQ(step, 0.2);
  ASSERT_EQ(ticks.size(), 6u);
  EXPECT_DOUBLE_EQ(ticks[0], 0.0);
  EXPECT_NEAR(ticks[5], 1.0, 1e-12);
}

TEST(NiceTicks, EmptyOrInvalidRangesGiveNoTicks) {
  EXPECT_TRUE(plot::nice_ticks(1, 1, 5).empty());
  EXPECT_TRUE(plot::nice_ticks(2, 1, 5).empty());
  EXPECT_TRUE(plot::nice_ticks(0, INFINITY, 5).empty());
  EXPECT_TRUE(plot::nice_ticks(NAN, 1, 5).empty());
}

TEST(Log2Ticks, IntegerExponentsThinnedByPowersOfTwo) {
  const auto ticks = plot::log2_ticks(-24.5, 16.2, 10);
  ASSERT_FALSE(ticks.empty());
  EXPECT_LE(ticks.size(), 11u);
  const double stride = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  EXPECT_EQ(std::exp2(std::round(std::log2(stride))), stride);
  for (double t : ticks) {
    EXPECT_EQ(t, std::round(t));
    EXPECT_GE(t, -24.5);
    EXPECT_LE(t, 16.2);
  }
}

TEST(TickLabel, DecimalsFollowTheStep) {
  EXPECT_EQ(plot::tick_label(0.2, 0.2), "0.2");
  EXPECT_EQ(plot::tick_label(1500, 500), "1500");
  EXPECT_EQ(plot::tick_label(0.05, 0.05), "0.05");
  EXPECT_EQ(plot::tick_label(0, 0.5), "0.0");
}

// Labels measured at 7 pixels a character, as a fixed-width font would be.
float seven_per_char(const std::string& text) { return 7.0f * static_cast<float>(text.size()); }

TEST(StepAxis, TicksSitOnTheirStepsColumnsAndTheTitleClearsTheFirstLabel) {
  std::vector<int64_t> steps;
  for (int64_t s = 0; s < 188; ++s) steps.push_back(s);
  const plot::StepAxisLayout layout = plot::step_axis_layout(steps, 100, 476, seven_per_char);
  // 376 pixels, 2 a column: ticks at steps 0, 50, 100 and 150, each at its column's centre.
  ASSERT_EQ(layout.ticks.size(), 4u);
  const char* labels[] = {"0", "50", "100", "150"};
  for (size_t i = 0; i < layout.ticks.size(); ++i) {
    EXPECT_EQ(layout.ticks[i].label, labels[i]);
    EXPECT_FLOAT_EQ(layout.ticks[i].x, 100 + 2.0f * (50.0f * static_cast<float>(i) + 0.5f));
  }
  // "0" would stick out left of the map centred on its column: it starts at the map's edge, and
  // the title ends kFirstLabelGap before it.
  EXPECT_FLOAT_EQ(layout.ticks[0].left, 100);
  EXPECT_FLOAT_EQ(layout.ticks[1].left, 201 - 7);  // "50" centred on step 50's column
  EXPECT_FLOAT_EQ(layout.title_left + seven_per_char("step") + plot::kFirstLabelGap, layout.ticks[0].left);
  for (size_t i = 1; i < layout.ticks.size(); ++i)
    EXPECT_LT(layout.ticks[i - 1].left + seven_per_char(layout.ticks[i - 1].label), layout.ticks[i].left);
}

TEST(StepAxis, LabelsStayInsideTheMapAndStepsWithGapsTakeTheNextColumn) {
  // Every tenth step measured (a sampled run), the last at 990: its label would pass the right edge.
  std::vector<int64_t> steps;
  for (int64_t s = 0; s <= 990; s += 10) steps.push_back(s);
  const plot::StepAxisLayout layout = plot::step_axis_layout(steps, 0, 200, seven_per_char);
  ASSERT_FALSE(layout.ticks.empty());
  for (const plot::StepTick& tick : layout.ticks) {
    EXPECT_GE(tick.left, 0);
    EXPECT_LE(tick.left + seven_per_char(tick.label), 200);
    // The tick stands at the column of the first step at or after its value.
    const int64_t value = std::stoll(tick.label);
    const auto column = std::lower_bound(steps.begin(), steps.end(), value) - steps.begin();
    EXPECT_FLOAT_EQ(tick.x, 2.0f * (static_cast<float>(column) + 0.5f));
  }
  EXPECT_FLOAT_EQ(layout.title_left, 0 - seven_per_char("step") - plot::kFirstLabelGap);
  // No step, no tick; the title still has its place left of the map.
  EXPECT_TRUE(plot::step_axis_layout({}, 0, 200, seven_per_char).ticks.empty());
}

// A trace-like window: steps of `per_step` kernels, 100 ns each with 50 ns gaps, one step range
// per step, on thread 1.
analysis::TimelineWindow make_window(int steps, int per_step) {
  analysis::TimelineWindow w;
  int64_t t = 1000;
  int64_t id = 1;
  for (int s = 0; s < steps; ++s) {
    analysis::RangeSpan r;
    r.id = s + 1;
    r.start_ns = t;
    r.thread = 1;
    r.depth = 0;
    r.kind = "step";
    r.name = "step";
    r.step = s;
    for (int k = 0; k < per_step; ++k) {
      analysis::KernelSpan span;
      span.id = id++;
      span.start_ns = t;
      span.end_ns = t + 100;
      span.kernel = k % 3 == 0 ? "conv2d_forward" : "relu_forward";
      span.step = s;
      span.thread = 1;
      span.nonfinite = s == 3 && k == 5;
      w.kernels.push_back(span);
      t += 150;
    }
    r.end_ns = t;
    w.ranges.push_back(r);
    t += 10000;  // a pause between steps
  }
  w.t0 = 0;
  w.t1 = t;
  return w;
}

TEST(TimelineIndex, WindowsAcceptEachSpanOnce) {
  const auto w = make_window(5, 40);
  TimelineIndex index;
  const int64_t cut = w.kernels[77].start_ns;
  index.add(w, 0, cut);  // the same window twice, split at a kernel's start
  index.add(w, cut, w.t1);
  index.finish();
  EXPECT_EQ(index.kernel_count(), w.kernels.size());
  size_t ranges = 0;
  for (const auto& lane : index.lanes) {
    if (lane.kind == TimeLane::Kind::kRanges) ranges += lane.spans.size();
  }
  EXPECT_EQ(ranges, w.ranges.size());
  const auto loc = index.find_kernel(78);
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(index.lanes[loc->lane].spans[loc->index].id, 78);
  EXPECT_FALSE(index.find_kernel(999999).has_value());
}

TEST(TimelineIndex, LevelsCoverEverySpanOnceAndKeepWideSpansWhole) {
  const auto w = make_window(30, 500);
  TimelineIndex index;
  index.add(w, w.t0, w.t1);
  index.finish();
  for (const auto& lane : index.lanes) {
    ASSERT_EQ(lane.lod.size(), lane.level_gap.size());
    if (lane.kind == TimeLane::Kind::kKernels) ASSERT_GT(lane.lod.size(), 1u);  // 15000 kernels need coarser levels
    for (size_t l = 0; l < lane.lod.size(); ++l) {
      const auto& blocks = lane.lod[l];
      const int64_t gap = lane.level_gap[l];
      uint32_t next = 0;
      bool nonfinite = false;
      for (size_t b = 0; b < blocks.size(); ++b) {
        ASSERT_EQ(blocks[b].first, next) << "level " << l;  // consecutive, no span lost or doubled
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (uint32_t i = blocks[b].first; i < blocks[b].first + blocks[b].count; ++i) {
          lo = std::min(lo, lane.spans[i].start);
          hi = std::max(hi, lane.spans[i].end);
          nonfinite |= (lane.spans[i].flags & TimeSpan::kNonfinite) != 0;
          if (blocks[b].count > 1) EXPECT_LT(lane.spans[i].end - lane.spans[i].start, gap);  // only narrow spans merge
        }
        EXPECT_EQ(blocks[b].start, lo);
        EXPECT_EQ(blocks[b].end, hi);
        if (b > 0) EXPECT_GE(blocks[b].start, blocks[b - 1].start);
        next += blocks[b].count;
      }
      EXPECT_EQ(next, lane.spans.size());
      // The non-finite flag survives merging.
      if (lane.kind == TimeLane::Kind::kKernels) {
        bool flagged = false;
        for (const auto& b : blocks) flagged |= (b.flags & TimeSpan::kNonfinite) != 0;
        EXPECT_EQ(flagged, nonfinite);
        EXPECT_TRUE(flagged);
      }
    }
  }
}

TEST(TimelineIndex, FirstVisibleMatchesBruteForce) {
  const auto w = make_window(4, 100);
  TimelineIndex index;
  index.add(w, w.t0, w.t1);
  index.finish();
  std::mt19937_64 rng(7);
  for (const auto& lane : index.lanes) {
    for (int trial = 0; trial < 500; ++trial) {
      const int64_t t = static_cast<int64_t>(rng() % static_cast<uint64_t>(w.t1 + 2000)) - 1000;
      size_t expect = 0;
      while (expect < lane.spans.size() && lane.spans[expect].end <= t) ++expect;
      EXPECT_EQ(lane.first_visible(t), expect) << t;
    }
  }
}

TEST(TimelineIndex, LevelForPicksTheCoarsestGapWithinAPixel) {
  const auto w = make_window(30, 500);
  TimelineIndex index;
  index.add(w, w.t0, w.t1);
  index.finish();
  const TimeLane& lane = index.lanes.back();
  EXPECT_EQ(lane.level_for(0.5), 0u);
  for (size_t l = 1; l < lane.level_gap.size(); ++l) {
    const double px = static_cast<double>(lane.level_gap[l]);
    EXPECT_EQ(lane.level_for(px), l);
    if (l + 1 < lane.level_gap.size()) EXPECT_EQ(lane.level_for(px * 1.5), l);
  }
}

}  // namespace
}  // namespace fpscope::gui
