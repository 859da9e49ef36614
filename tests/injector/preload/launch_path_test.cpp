// Tests of record assembly: fake kernels go through the session's launch path, which writes into
// a real ring (the collector's RingProducer); the test reads the ring back with RingConsumer and
// checks every record against values worked out by hand.
#include <gtest/gtest.h>

#include "temp_path.h"
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fpscope/inject_api.h"
#include "launch_path_fixture.h"

namespace fpscope::inject {
namespace {

using wire::RecordType;

std::vector<std::pair<int32_t, uint64_t>> bins_of(const DecodedTrace& t, size_t which) {
  size_t seen = 0;
  for (const auto& r : t.records) {
    const auto* h = reinterpret_cast<const wire::TensorHistogramRecord*>(r.data());
    if (h->h.type != RecordType::TensorHistogram || seen++ != which) continue;
    std::vector<std::pair<int32_t, uint64_t>> bins;
    for (uint32_t i = 0; i < h->bins; ++i) {
      wire::HistogramBin b;
      std::memcpy(&b, r.data() + sizeof *h + i * sizeof b, sizeof b);
      bins.emplace_back(b.exponent, b.count);
    }
    return bins;
  }
  return {};
}

TEST_F(LaunchPath, SampledLaunchCarriesExactStatisticsAndAttribution) {
  start(Options{});
  float x[4] = {1, -2, 0, 4}, y[4] = {};
  enter(3, "forward", "fc1");
  ASSERT_EQ(launch("scale2", {tensor(x, MPT_DTYPE_F32, {2, 2}, "fc1.in", 11)},
                   {tensor(y, MPT_DTYPE_F32, {2, 2}, "fc1.out", 12)}, scale2),
            MPT_OK);
  leave();
  EXPECT_EQ(y[3], 8.0f);  // the real kernel ran
  const DecodedTrace& t = drain();

  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 1u);
  const auto& l = launches[0];
  EXPECT_EQ(l.seq, 1u);
  EXPECT_EQ(t.text(l.kernel), "scale2");
  EXPECT_EQ(t.text(l.layer), "fc1");
  EXPECT_EQ(t.text(l.phase), "forward");
  EXPECT_EQ(l.step, 3);
  EXPECT_EQ(l.sampled, 1);
  EXPECT_EQ(l.n_inputs, 1);
  EXPECT_EQ(l.n_outputs, 1);
  EXPECT_EQ(l.device, MPT_DEVICE_CPU);
  EXPECT_EQ(l.status, MPT_OK);
  EXPECT_LE(l.start_ns, l.end_ns);

  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 2u);
  const auto& in = stats[0];
  EXPECT_EQ(in.seq, 1u);
  EXPECT_EQ(in.role, wire::Role::Input);
  EXPECT_EQ(in.slot, 0);
  EXPECT_EQ(in.tensor_id, 11u);
  EXPECT_EQ(t.text(in.name), "fc1.in");
  EXPECT_EQ(in.ndim, 2);
  EXPECT_EQ(in.shape[0], 2);
  EXPECT_EQ(in.shape[1], 2);
  EXPECT_EQ(in.count, 4u);
  EXPECT_EQ(in.zero, 1u);
  EXPECT_EQ(in.nan + in.pos_inf + in.neg_inf + in.subnormal, 0u);
  EXPECT_EQ(in.min, -2.0);
  EXPECT_EQ(in.max, 4.0);
  EXPECT_EQ(in.absmax, 4.0);
  EXPECT_EQ(in.min_nonzero, 1.0);
  EXPECT_DOUBLE_EQ(in.mean, 0.75);
  EXPECT_DOUBLE_EQ(in.rms, std::sqrt(21.0 / 4));
  const auto& out = stats[1];
  EXPECT_EQ(out.role, wire::Role::Output);
  EXPECT_EQ(t.text(out.name), "fc1.out");
  EXPECT_EQ(out.tensor_id, 12u);
  EXPECT_EQ(out.min, -4.0);
  EXPECT_EQ(out.max, 8.0);
  EXPECT_EQ(out.min_nonzero, 2.0);
  EXPECT_DOUBLE_EQ(out.mean, 1.5);
  EXPECT_DOUBLE_EQ(out.rms, std::sqrt(21.0));

  auto formats = t.all<wire::TensorFormatsRecord>(RecordType::TensorFormats);
  ASSERT_EQ(formats.size(), 2u);
  EXPECT_EQ(formats[0].role_slot, 0x00);
  EXPECT_EQ(formats[1].role_slot, 0x80);
  // 8 is far from every format's limits except e4m3 (max 448): nothing overflows or underflows.
  for (const auto& f : formats)
    for (const auto& c : f.formats) EXPECT_EQ(c.overflow + c.underflow + c.subnormal, 0u);
  using Bins = std::vector<std::pair<int32_t, uint64_t>>;
  EXPECT_EQ(bins_of(t, 0), (Bins{{0, 1}, {1, 1}, {2, 1}}));  // |1|, |-2|, |4|
  EXPECT_EQ(bins_of(t, 1), (Bins{{1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(t.count(RecordType::Nonfinite), 0u);
}

TEST_F(LaunchPath, RecordsComeInOrderAfterTheirStrings) {
  start(Options{});
  float x[2] = {1, 2}, y[2];
  launch("scale2", {tensor(x, MPT_DTYPE_F32, {2}, "x")}, {tensor(y, MPT_DTYPE_F32, {2}, "y")}, scale2);
  launch("scale2", {tensor(x, MPT_DTYPE_F32, {2}, "x")}, {tensor(y, MPT_DTYPE_F32, {2}, "y")}, scale2);
  const DecodedTrace& t = drain();
  std::vector<RecordType> kinds;
  for (const auto& r : t.records) kinds.push_back(reinterpret_cast<const wire::RecordHeader*>(r.data())->type);
  const std::vector<RecordType> first_launch = {
      RecordType::String, RecordType::Launch,          RecordType::String,         RecordType::TensorStats,
      RecordType::TensorFormats, RecordType::TensorHistogram, RecordType::String, RecordType::TensorStats,
      RecordType::TensorFormats, RecordType::TensorHistogram};
  ASSERT_GE(kinds.size(), first_launch.size());
  EXPECT_EQ(std::vector<RecordType>(kinds.begin(), kinds.begin() + first_launch.size()), first_launch);
  EXPECT_EQ(t.count(RecordType::String), 3u);  // "scale2", "x", "y" once each
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[1].seq, 2u);
  EXPECT_EQ(launches[0].kernel, launches[1].kernel);
  EXPECT_EQ(launches[0].step, -1);
  EXPECT_EQ(launches[0].layer, 0u);
}

// A launch's span is its kernel's alone: measuring its tensors and writing its records happen
// outside [start_ns, end_ns] and are counted as the injector's own time instead. Exact inequalities
// of clock readings, whatever the machine's speed: the kernel notes when it ran, the test when the
// call began and returned.
int64_t g_kernel_entered = 0, g_kernel_left = 0;
int timed_scale2(const mpt_launch_desc* d) {
  g_kernel_entered = monotonic_ns();
  const int status = scale2(d);
  g_kernel_left = monotonic_ns();
  return status;
}

// The launch record `l` of a call that began at `called` and returned at `returned`: its span
// holds [kernel_entered, kernel_left] and lies in the call, and the injector's own time in the
// call (`own`) fits beside the span.
void expect_span_in_call(const wire::LaunchRecord& l, int64_t called, int64_t kernel_entered, int64_t kernel_left,
                         int64_t returned, uint64_t own) {
  EXPECT_LE(called, l.start_ns);
  EXPECT_LE(l.start_ns, kernel_entered);
  EXPECT_LE(kernel_left, l.end_ns);
  EXPECT_LE(l.end_ns, returned);
  EXPECT_GT(own, 0u);
  EXPECT_LE(own + static_cast<uint64_t>(l.end_ns - l.start_ns), static_cast<uint64_t>(returned - called));
}

TEST_F(LaunchPath, TheLaunchsSpanHoldsTheKernelAndTheRestIsTheInjectorsOwnTime) {
  start(Options{});
  std::vector<float> x(1 << 20, 0.5f), y(x.size());  // a scan of a million elements before and after
  uint64_t own_before = session_->own_ns();
  const int64_t called = monotonic_ns();
  ASSERT_EQ(launch("scale2", {tensor(x.data(), MPT_DTYPE_F32, {int64_t(x.size())}, "x")},
                   {tensor(y.data(), MPT_DTYPE_F32, {int64_t(y.size())}, "y")}, timed_scale2),
            MPT_OK);
  const int64_t returned = monotonic_ns();
  const uint64_t own = session_->own_ns() - own_before;
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 1u);
  expect_span_in_call(launches[0], called, g_kernel_entered, g_kernel_left, returned, own);
  EXPECT_EQ(t.count(RecordType::TensorStats), 2u);

  // A front end's op: its span runs from begin_op's return to end_op's call.
  own_before = session_->own_ns();
  const int64_t begun = monotonic_ns();
  const mpt_tensor in = tensor(x.data(), MPT_DTYPE_F32, {int64_t(x.size())}, "x");
  Session::ForeignOp* op = session_->begin_op("scale2", &in, 1, nullptr, true);
  const int64_t op_runs = monotonic_ns();
  const int64_t op_done = monotonic_ns();
  const mpt_tensor out = tensor(y.data(), MPT_DTYPE_F32, {int64_t(y.size())}, "y");
  ASSERT_EQ(session_->end_op(op, &out, 1, MPT_OK, nullptr), 0);
  const int64_t ended = monotonic_ns();
  const uint64_t op_own = session_->own_ns() - own_before;
  launches = drain().all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  expect_span_in_call(launches[1], begun, op_runs, op_done, ended, op_own);
}

// A front end's ranges belong to the program: an op begun on a thread working for it (the autograd
// engine's device thread in backward) takes the step, phase and layer open now, a range that thread
// opens joins the same stack, and every range is recorded as the first opener's.
TEST_F(LaunchPath, AFrontEndsOpOnAnotherThreadTakesTheFrontEndsRanges) {
  start(Options{});
  RangeEvent step{"step 4", kStepCategory};
  step.payload_kind = 1;
  step.payload_i = 4;
  EXPECT_EQ(session_->front_end_range_push(&trainer_, step), 0);
  EXPECT_EQ(session_->front_end_range_push(&trainer_, RangeEvent{"backward", kPhaseCategory}), 1);
  std::vector<float> x{1, 2}, y(2);
  std::thread helper([&] {
    EXPECT_EQ(session_->front_end_range_push(&trainer_, RangeEvent{"conv1", kLayerCategory}), 2);
    const mpt_tensor in = tensor(x.data(), MPT_DTYPE_F32, {2}, "x");
    Session::ForeignOp* op = session_->begin_op("convolution_backward", &in, 1, nullptr, true);
    const mpt_tensor out = tensor(y.data(), MPT_DTYPE_F32, {2}, "y");
    EXPECT_EQ(session_->end_op(op, &out, 1, MPT_OK, nullptr), 0);
  });
  helper.join();
  // The program's thread closes what the helper opened.
  EXPECT_EQ(session_->front_end_range_pop(&trainer_), 2);
  EXPECT_EQ(session_->front_end_range_pop(&trainer_), 1);
  EXPECT_EQ(session_->front_end_range_pop(&trainer_), 0);
  EXPECT_EQ(session_->front_end_range_pop(&trainer_), -1);
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].step, 4);
  EXPECT_EQ(t.text(launches[0].phase), "backward");
  EXPECT_EQ(t.text(launches[0].layer), "conv1");
  auto pushes = t.all<wire::NvtxPushRecord>(RecordType::NvtxPush);
  auto pops = t.all<wire::NvtxPopRecord>(RecordType::NvtxPop);
  ASSERT_EQ(pushes.size(), 3u);
  ASSERT_EQ(pops.size(), 3u);
  for (const auto& p : pushes) EXPECT_EQ(p.h.thread, pushes[0].h.thread);
  for (const auto& p : pops) EXPECT_EQ(p.h.thread, pushes[0].h.thread);
  EXPECT_NE(launches[0].h.thread, pushes[0].h.thread);  // the op is the helper's
}

// A front end's ops one after another, nested, failed and given up: each launch has its own
// kernel, tensors and device, and nothing of an op before it (finished ops are kept for the next
// ones on their thread).
TEST_F(LaunchPath, FrontEndOpsInTurnNestedAndGivenUpEachRecordOnlyTheirOwnTensors) {
  start(Options{});
  std::vector<float> x{1, 2, 3}, w{-4, 5}, y(3), z{0.5f}, u(1);
  const mpt_tensor tx = tensor(x.data(), MPT_DTYPE_F32, {3}, "x");
  const mpt_tensor tw = tensor(w.data(), MPT_DTYPE_F32, {2}, "w");
  const mpt_tensor ty = tensor(y.data(), MPT_DTYPE_F32, {3}, "y");
  const mpt_tensor tz = tensor(z.data(), MPT_DTYPE_F32, {1}, "z");
  const mpt_tensor tu = tensor(u.data(), MPT_DTYPE_F32, {1}, "u");
  const mpt_tensor two[] = {tx, tw};
  // addmm: two inputs, one output.
  EXPECT_EQ(session_->end_op(session_->begin_op("addmm", two, 2, nullptr, true), &ty, 1, MPT_OK, nullptr), 0);
  // outer(inner): the inner op begins and ends inside the outer one.
  Session::ForeignOp* outer = session_->begin_op("outer", &tz, 1, nullptr, true);
  EXPECT_EQ(session_->end_op(session_->begin_op("inner", &tx, 1, nullptr, true), &tu, 1, MPT_OK, nullptr), 0);
  EXPECT_EQ(session_->end_op(outer, &ty, 1, MPT_OK, nullptr), 0);
  // An op given up, then one that failed without outputs, then one with nothing measured.
  Session::discard_op(session_->begin_op("given_up", two, 2, nullptr, true));
  EXPECT_EQ(session_->end_op(session_->begin_op("failed", &tw, 1, nullptr, true), nullptr, 0, 1, nullptr), 0);
  // Counted, not measured: one on device tensors, then one whose tensors the front end did not give.
  mpt_tensor on_device[] = {tx, tw};
  for (mpt_tensor& t : on_device) t.device = MPT_DEVICE_CUDA;
  EXPECT_EQ(session_->end_op(session_->begin_op("on_device", on_device, 2, nullptr, false), &tu, 1, MPT_OK, nullptr),
            0);
  EXPECT_EQ(session_->end_op(session_->begin_op("bare", nullptr, 2, nullptr, false), nullptr, 1, MPT_OK, nullptr), 0);

  const DecodedTrace& t = drain();
  const auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  std::vector<std::string> kernels;
  for (const auto& l : launches) kernels.push_back(t.text(l.kernel));
  EXPECT_EQ(kernels, (std::vector<std::string>{"addmm", "inner", "outer", "failed", "on_device", "bare"}));
  // Each launch's tensors, as "kernel role slot name count".
  std::vector<std::string> tensors;
  for (const auto& r : t.all<wire::TensorStatsRecord>(RecordType::TensorStats)) {
    std::string kernel = "?";
    for (const auto& l : launches)
      if (l.seq == r.seq) kernel = t.text(l.kernel);
    tensors.push_back(kernel + (r.role == wire::Role::Input ? " in " : " out ") + std::to_string(r.slot) + " " +
                      t.text(r.name) + " " + std::to_string(r.count));
  }
  EXPECT_EQ(tensors, (std::vector<std::string>{"addmm in 0 x 3", "addmm in 1 w 2", "addmm out 0 y 3",
                                               "inner in 0 x 3", "inner out 0 u 1", "outer in 0 z 1",
                                               "outer out 0 y 3", "failed in 0 w 2"}));
  const wire::LaunchRecord& device_op = launches[4];
  const wire::LaunchRecord& bare = launches[5];
  EXPECT_EQ(device_op.device, MPT_DEVICE_CUDA);
  EXPECT_EQ(bare.device, MPT_DEVICE_CPU);
  EXPECT_EQ(bare.n_inputs, 2);
  EXPECT_EQ(bare.n_outputs, 1);
  EXPECT_EQ(device_op.sampled, 0);
  EXPECT_EQ(bare.sampled, 0);
}

TEST_F(LaunchPath, UnselectedLaunchIsRecordedUnsampled) {
  Options o;
  o.ops = {"conv*"};
  start(o);
  float x[2] = {1, 2}, y[2];
  launch("scale2", {tensor(x, MPT_DTYPE_F32, {2}, "x")}, {tensor(y, MPT_DTYPE_F32, {2}, "y")}, scale2);
  EXPECT_EQ(y[1], 4.0f);
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].sampled, 0);
  EXPECT_EQ(t.count(RecordType::TensorStats), 0u);
}

TEST_F(LaunchPath, NonfiniteOriginTellsMakingFromPassingOn) {
  start(Options{});
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8];
  launch("copy_with_nan", {tensor(x, MPT_DTYPE_F32, {8}, "x")}, {tensor(y, MPT_DTYPE_F32, {8}, "y")},
         copy_with_nan, {{"index", 5}});
  // The next kernel receives the NaN: it passes it on (and makes one of its own at 2).
  launch("copy_with_nan", {tensor(y, MPT_DTYPE_F32, {8}, "y")}, {tensor(z, MPT_DTYPE_F32, {8}, "z")},
         copy_with_nan, {{"index", 2}});
  const DecodedTrace& t = drain();
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].seq, 1u);
  EXPECT_EQ(nf[0].origin, 1);
  EXPECT_EQ(nf[0].first_index, 5u);
  EXPECT_EQ(nf[0].first_bits, 0x7fc00000u);
  EXPECT_EQ(nf[0].kind, wire::NonfiniteKind::NaN);
  EXPECT_EQ(nf[0].role_slot, 0x80);
  EXPECT_EQ(nf[0].dtype, MPT_DTYPE_F32);
  EXPECT_EQ(nf[1].seq, 2u);
  EXPECT_EQ(nf[1].origin, 0);
  EXPECT_EQ(nf[1].first_index, 2u);
}

TEST_F(LaunchPath, OutputsOnlyStillJudgesOriginAcrossInPlaceUpdates) {
  Options o;
  o.tensors = TensorRoles::Outputs;
  start(o);
  float x[3] = {1e30f, 1, 2}, s = 1e10f;  // 1e40 overflows fp32: made here, from finite inputs
  launch("scale_in_place", {tensor(x, MPT_DTYPE_F32, {3}, "x"), tensor(&s, MPT_DTYPE_F32, {1}, "s")},
         {tensor(x, MPT_DTYPE_F32, {3}, "x")}, scale_in_place);
  float w[2] = {std::numeric_limits<float>::quiet_NaN(), 1}, one = 1;  // NaN before: passed on
  launch("scale_in_place", {tensor(w, MPT_DTYPE_F32, {2}, "w"), tensor(&one, MPT_DTYPE_F32, {1}, "s")},
         {tensor(w, MPT_DTYPE_F32, {2}, "w")}, scale_in_place);
  float v[2] = {1, 2}, inf = std::numeric_limits<float>::infinity();  // an infinite scalar input
  launch("scale_in_place", {tensor(v, MPT_DTYPE_F32, {2}, "v"), tensor(&inf, MPT_DTYPE_F32, {1}, "s")},
         {tensor(v, MPT_DTYPE_F32, {2}, "v")}, scale_in_place);
  const DecodedTrace& t = drain();
  for (const auto& st : t.all<wire::TensorStatsRecord>(RecordType::TensorStats))
    EXPECT_EQ(st.role, wire::Role::Output);
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 3u);
  EXPECT_EQ(nf[0].origin, 1);
  EXPECT_EQ(nf[0].kind, wire::NonfiniteKind::PosInf);
  EXPECT_EQ(nf[0].first_index, 0u);
  EXPECT_EQ(nf[0].first_bits, 0x7f800000u);
  EXPECT_EQ(nf[1].origin, 0);
  EXPECT_EQ(nf[2].origin, 0);
}

TEST_F(LaunchPath, SixteenBitNonfiniteBitsAreZeroExtended) {
  start(Options{});
  uint16_t h[3] = {0x3c00, 0xfc00, 0x7e00};  // 1, -inf, nan (fp16)
  uint16_t b[2] = {0x3f80, 0x7f80};          // 1, +inf (bf16)
  auto passthrough = [](const mpt_launch_desc*) { return 0; };
  launch("made_here", {}, {tensor(h, MPT_DTYPE_F16, {3}, "h"), tensor(b, MPT_DTYPE_BF16, {2}, "b")},
         passthrough);
  const DecodedTrace& t = drain();
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].kind, wire::NonfiniteKind::NegInf);
  EXPECT_EQ(nf[0].first_bits, 0xfc00u);
  EXPECT_EQ(nf[0].first_index, 1u);
  EXPECT_EQ(nf[0].dtype, MPT_DTYPE_F16);
  EXPECT_EQ(nf[0].origin, 1);  // no inputs at all: every input was finite
  EXPECT_EQ(nf[1].kind, wire::NonfiniteKind::PosInf);
  EXPECT_EQ(nf[1].first_bits, 0x7f80u);
  EXPECT_EQ(nf[1].role_slot, 0x81);
  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].nan, 1u);
  EXPECT_EQ(stats[0].neg_inf, 1u);
  EXPECT_EQ(stats[0].max, 1.0);
}

TEST_F(LaunchPath, BasicStatisticsLeaveOutFormatsAndHistogram) {
  Options o;
  o.stats = StatsLevel::Basic;
  start(o);
  float x[2] = {1, 2}, y[2];
  launch("scale2", {tensor(x, MPT_DTYPE_F32, {2}, "x")}, {tensor(y, MPT_DTYPE_F32, {2}, "y")}, scale2);
  const DecodedTrace& t = drain();
  EXPECT_EQ(t.count(RecordType::TensorStats), 2u);
  EXPECT_EQ(t.count(RecordType::TensorFormats), 0u);
  EXPECT_EQ(t.count(RecordType::TensorHistogram), 0u);
}

TEST_F(LaunchPath, LossScaleEventsAreReadOffTheUpdateKernel) {
  Options o;
  o.ops = {"nothing-matches"};  // loss-scale events are recorded even for unsampled launches
  start(o);
  float scale = 1024, found_inf = 0;
  int32_t tracker = 0;
  auto update = [&] {
    launch("amp_update_scale",
           {tensor(&scale, MPT_DTYPE_F32, {1}, "scale"), tensor(&tracker, MPT_DTYPE_I32, {1}, "growth_tracker"),
            tensor(&found_inf, MPT_DTYPE_F32, {1}, "found_inf")},
           {tensor(&scale, MPT_DTYPE_F32, {1}, "scale"), tensor(&tracker, MPT_DTYPE_I32, {1}, "growth_tracker")},
           update_scale);
  };
  enter(0, "optimizer", "scaler");
  update();  // tracker 1: unchanged
  leave();
  enter(1, "optimizer", "scaler");
  update();  // tracker 2: growth to 2048
  leave();
  found_inf = 1;
  enter(2, "optimizer", "scaler");
  update();  // backoff to 1024, skipped
  leave();
  const DecodedTrace& t = drain();
  auto ls = t.all<wire::LossScaleRecord>(RecordType::LossScale);
  ASSERT_EQ(ls.size(), 3u);
  expect_scale_event(ls[0], wire::ScaleEvent::Unchanged, 1024, 1024, 0, 0);
  EXPECT_EQ(ls[0].growth_tracker, 1);
  EXPECT_EQ(ls[1].event, wire::ScaleEvent::Growth);
  EXPECT_EQ(ls[1].scale_after, 2048.0);
  EXPECT_EQ(ls[1].growth_tracker, 0);
  expect_scale_event(ls[2], wire::ScaleEvent::Backoff, 2048, 1024, 1, 2);
  EXPECT_EQ(ls[2].seq, 3u);
}

TEST_F(LaunchPath, DumpWritesMatchingTensorsOnly) {
  const fpscope::test::TempDir temp("fpscope-dump-test");
  const auto& dir = temp.path();
  Options o;
  o.every = 1000;  // nothing selected: the dump spec alone makes the launch measured
  o.dump.enabled = true;
  o.dump.op = "scale2";
  o.dump.steps = StepRange{4, 4};
  o.dump.tensor = "*.out";
  o.dump_dir = dir.string();
  start(o);
  float x[2] = {1, 2}, y[2];
  for (int64_t step : {3, 4}) {
    enter(step, "forward", "fc1");
    launch("scale2", {tensor(x, MPT_DTYPE_F32, {2}, "fc1.in")}, {tensor(y, MPT_DTYPE_F32, {2}, "fc1.out")}, scale2);
    leave();
  }
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].sampled, 0);
  EXPECT_EQ(launches[1].sampled, 1);
  auto dumps = t.all<wire::DumpRecord>(RecordType::Dump);
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(dumps[0].seq, 2u);
  EXPECT_EQ(dumps[0].role_slot, 0x80);
  const std::string file = t.text(dumps[0].path);
  EXPECT_EQ(file, "step4-launch00000002-scale2-out0-fc1.out.npy");
  EXPECT_EQ(std::filesystem::file_size(dir / file), 128u + 8u);  // 128-byte header, two floats
  std::filesystem::remove_all(dir);
}

TEST_F(LaunchPath, AllocationsAndLoggedValues) {
  start(Options{});
  int block;
  session_->allocated(&block, 4096, MPT_DEVICE_CPU, MPT_CAT_GRADIENT, "fc1.weight.grad", 7);
  session_->freed(&block);
  int stranger;
  session_->freed(&stranger);  // never seen: nothing recorded
  session_->log_scalar("loss", 2.5, 9);
  session_->log_text("precision", "amp-fp16");
  const DecodedTrace& t = drain();
  auto a = t.all<wire::AllocRecord>(RecordType::Alloc);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].id, 7u);
  EXPECT_EQ(a[0].bytes, 4096u);
  EXPECT_EQ(a[0].address, reinterpret_cast<uintptr_t>(&block));
  EXPECT_EQ(a[0].category, MPT_CAT_GRADIENT);
  EXPECT_EQ(t.text(a[0].name), "fc1.weight.grad");
  auto f = t.all<wire::FreeRecord>(RecordType::Free);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, 7u);
  EXPECT_EQ(f[0].bytes, 4096u);
  EXPECT_GE(f[0].t_ns, a[0].t_ns);
  auto s = t.all<wire::ScalarRecord>(RecordType::Scalar);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(t.text(s[0].name), "loss");
  EXPECT_EQ(s[0].value, 2.5);
  EXPECT_EQ(s[0].step, 9);
  auto x = t.all<wire::TextRecord>(RecordType::Text);
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(t.text(x[0].key), "precision");
  EXPECT_EQ(t.text(x[0].value), "amp-fp16");
}

TEST_F(LaunchPath, NvtxRangesAreRecorded) {
  start(Options{});
  enter(12, "backward", "conv2");
  RangeEvent user{"user range"};
  EXPECT_EQ(session_->range_push(nullptr, user), 3);
  EXPECT_EQ(session_->range_pop(nullptr), 3);
  leave();
  EXPECT_EQ(session_->range_pop(&trainer_), -1);  // unbalanced pops are refused, not recorded
  const DecodedTrace& t = drain();
  auto pushes = t.all<wire::NvtxPushRecord>(RecordType::NvtxPush);
  ASSERT_EQ(pushes.size(), 4u);
  EXPECT_EQ(t.text(pushes[0].message), "step");
  EXPECT_EQ(t.text(pushes[0].domain), "mptrain");
  EXPECT_EQ(pushes[0].category, kStepCategory);
  EXPECT_EQ(pushes[0].payload_kind, 1u);
  EXPECT_EQ(pushes[0].payload_i, 12);
  EXPECT_EQ(t.text(pushes[2].message), "conv2");
  EXPECT_EQ(pushes[2].category, kLayerCategory);
  EXPECT_EQ(pushes[3].domain, 0u);
  EXPECT_EQ(t.count(RecordType::NvtxPop), 4u);
}

TEST_F(LaunchPath, TrapStopsAtTheFirstOriginWithSigtrap) {
  Options o;
  o.trap = TrapKind::NaN;
  start(o);
  consumer_->mark_collector_gone();  // the forked child must not wait for a drain
  float x[20] = {}, y[20], z[20];
  float nan_in[2] = {std::numeric_limits<float>::quiet_NaN(), 0}, w[2];
  EXPECT_EXIT(
      {
        enter(12, "forward", "fc1");
        // A NaN passed on (the input held one already) does not trap.
        launch("copy_with_nan", {tensor(nan_in, MPT_DTYPE_F32, {2}, "w.in")}, {tensor(w, MPT_DTYPE_F32, {2}, "w")},
               copy_with_nan, {{"index", 1}});
        launch("copy_with_nan", {tensor(x, MPT_DTYPE_F32, {20}, "fc1.in")},
               {tensor(y, MPT_DTYPE_F32, {20}, "fc1.out")}, copy_with_nan, {{"index", 17}});
        launch("copy_with_nan", {tensor(y, MPT_DTYPE_F32, {20}, "fc1.out")},
               {tensor(z, MPT_DTYPE_F32, {20}, "z")}, copy_with_nan, {{"index", 3}});
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTRAP),
      "fpscope: trap: first NaN made by copy_with_nan \\(layer fc1, step 12, phase forward\\) in fc1.out "
      "at index 17");
  // The child wrote into the shared ring before it stopped.
  const DecodedTrace& t = drain();
  auto traps = t.all<wire::TrapRecord>(RecordType::Trap);
  ASSERT_EQ(traps.size(), 1u);
  EXPECT_EQ(traps[0].seq, 2u);
  EXPECT_EQ(t.text(traps[0].reason),
            "fpscope: trap: first NaN made by copy_with_nan (layer fc1, step 12, phase forward) in fc1.out at "
            "index 17");
  EXPECT_EQ(t.count(RecordType::Launch), 2u);  // nothing ran after the trap
}

TEST_F(LaunchPath, AllowedValuesAreFlaggedKeptFromTheTrapAndPassThroughAsIntended) {
  ASSERT_NO_FATAL_FAILURE(start_trapping_with_mask_rule());
  std::vector<contract::AllowRule> rules;  // the session's rules, for the checks at the end
  std::string error;
  ASSERT_TRUE(common::parse_allow_rules("mask_*:-inf", &rules, &error)) << error;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8], w[8];
  EXPECT_EXIT(
      {
        // The mask's -inf is intended: recorded, flagged, no trap.
        launch("mask_fill", {tensor(x, MPT_DTYPE_F32, {8}, "x")}, {tensor(y, MPT_DTYPE_F32, {8}, "scores")},
               copy_with_neg_inf, {{"index", 4}});
        // -inf of an allowed kind passes through; a NaN made next to it is this kernel's own.
        launch("copy_with_nan", {tensor(y, MPT_DTYPE_F32, {8}, "scores")}, {tensor(z, MPT_DTYPE_F32, {8}, "p")},
               copy_with_nan, {{"index", 1}});
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTRAP), "first NaN made by copy_with_nan in p at index 1");
  expect_intended_mask_then_own_nan(drain());
  // A rule covers only its kinds: a NaN from a masking kernel is not intended.
  EXPECT_FALSE(common::allowed_by(rules, "mask_fill", nullptr, contract::nonfinite_kinds(1, 0, 1)));
  EXPECT_TRUE(common::allowed_by(rules, "other", "mask_layer", contract::nonfinite_kinds(0, 0, 3)));
  (void)w;
}

TEST_F(LaunchPath, IntendedValuesPassedOnStayIntended) {
  Options o;
  std::string error;
  ASSERT_TRUE(common::parse_allow_rules("mask_*:-inf", &o.allow, &error)) << error;
  start(o);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, mask[8], passed[8], made[8], both[8], data[8], from_data[8];
  // Passing on follows what the injector knows of the memory's last write: allocations it saw.
  uint64_t id = 1;
  for (float* a : {mask, passed, made, both, from_data})
    session_->allocated(a, sizeof mask, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "t", id++);
  launch("mask_fill", {tensor(x, MPT_DTYPE_F32, {8}, "x")}, {tensor(mask, MPT_DTYPE_F32, {8}, "mask")},
         copy_with_neg_inf, {{"index", 4}});
  // A kernel no rule names holds only the -inf its input brought in: passed on, still intended.
  launch("add_mask", {tensor(mask, MPT_DTYPE_F32, {8}, "mask")}, {tensor(passed, MPT_DTYPE_F32, {8}, "scores")},
         copy_with_neg_inf, {{"index", 4}});
  // The same kernel making -inf from finite inputs is not.
  launch("add_mask", {tensor(x, MPT_DTYPE_F32, {8}, "x")}, {tensor(made, MPT_DTYPE_F32, {8}, "made")},
         copy_with_neg_inf, {{"index", 1}});
  // Nor is a NaN beside passed-on -inf: NaN is a kind no input brought in as intended.
  launch("add_nan", {tensor(passed, MPT_DTYPE_F32, {8}, "scores")}, {tensor(both, MPT_DTYPE_F32, {8}, "both")},
         copy_with_nan, {{"index", 0}});
  // Nor is -inf that came from memory no launch made intended (data the program filled): the
  // kernel that reads it is its first measured place, and no rule covers it.
  std::memcpy(data, x, sizeof x);
  data[3] = -std::numeric_limits<float>::infinity();
  launch("add_mask", {tensor(data, MPT_DTYPE_F32, {8}, "data")}, {tensor(from_data, MPT_DTYPE_F32, {8}, "scores")},
         copy_with_neg_inf, {{"index", 3}});
  const DecodedTrace& t = drain();
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 5u);
  EXPECT_EQ(nf[0].seq, 1u);
  EXPECT_EQ(nf[0].allowed, 1);
  EXPECT_EQ(nf[1].seq, 2u);
  EXPECT_EQ(nf[1].allowed, 1);
  EXPECT_EQ(nf[2].seq, 3u);
  EXPECT_EQ(nf[2].origin, 1);
  EXPECT_EQ(nf[2].allowed, 0);
  EXPECT_EQ(nf[3].seq, 4u);
  EXPECT_EQ(nf[3].allowed, 0);
  EXPECT_EQ(nf[4].seq, 5u);
  EXPECT_EQ(nf[4].allowed, 0);
}

TEST_F(LaunchPath, ConcurrentLaunchesKeepEachLaunchsRecordsTogether) {
  start(Options{}, 1 << 16);
  constexpr int kThreads = 4, kLaunches = 150;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this, i] {
      std::vector<float> x(64, static_cast<float>(i + 1)), y(64);
      const std::string in = "x" + std::to_string(i), out = "y" + std::to_string(i);
      for (int n = 0; n < kLaunches; ++n)
        launch("scale2", {tensor(x.data(), MPT_DTYPE_F32, {64}, in.c_str())},
               {tensor(y.data(), MPT_DTYPE_F32, {64}, out.c_str())}, scale2);
    });
  }
  for (auto& t : threads) t.join();
  const DecodedTrace& t = drain();
  std::set<uint64_t> seqs;
  uint64_t current = 0;
  uint32_t current_thread = 0;
  for (const auto& r : t.records) {
    const auto* h = reinterpret_cast<const wire::RecordHeader*>(r.data());
    if (h->type == RecordType::Launch) {
      wire::LaunchRecord l;
      std::memcpy(&l, r.data(), sizeof l);
      EXPECT_TRUE(seqs.insert(l.seq).second);
      current = l.seq;
      current_thread = h->thread;
    } else if (h->type == RecordType::TensorStats) {
      wire::TensorStatsRecord s;
      std::memcpy(&s, r.data(), sizeof s);
      ASSERT_EQ(s.seq, current);  // nothing of another launch in between
      ASSERT_EQ(h->thread, current_thread);
      // Each thread's tensors hold its own value: the name and the statistics agree.
      const int owner = std::stoi(t.text(s.name).substr(1));
      EXPECT_EQ(s.max, (s.role == wire::Role::Input ? 1.0 : 2.0) * (owner + 1));
    }
  }
  EXPECT_EQ(seqs.size(), size_t{kThreads * kLaunches});
  EXPECT_EQ(*seqs.rbegin(), uint64_t{kThreads * kLaunches});
  EXPECT_EQ(t.count(RecordType::TensorStats), size_t{2 * kThreads * kLaunches});
}

}  // namespace
}  // namespace fpscope::inject
