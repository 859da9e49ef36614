// Tests of the device path: launches and front-end ops with device tensors go through the session,
// measured by a stand-in for libfpscope_gpu.so (device pointers are host memory), and the loss
// scaler's scalars read through it; records are read back from a real ring as in
// launch_path_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fpscope/inject_api.h"
#include "launch_path_fixture.h"

namespace fpscope::inject {
namespace {

using wire::RecordType;

// A stand-in for libfpscope_gpu.so: "device" pointers are host memory; each result is computed
// when it is submitted (as the stream would, in order) and handed out by the next poll.
// With `hold`, a poll that does not wait hands out nothing: the device is still busy.
struct FakeGpu {
  static inline std::vector<std::pair<uint64_t, TensorStats>> queue;
  static inline int polls_with_wait = 0;
  static inline int submits = 0;
  static inline bool hold = false;
  static inline bool lose = false;  // hands every result back without statistics, as a failed event
  static int submit(const void* data, int type, size_t n, int level, void*, uint64_t token) {
    ++submits;
    TensorStats s;
    compute_stats(data, static_cast<ElementType>(type), n, static_cast<StatsLevel>(level), &s);
    queue.emplace_back(token, s);
    return 0;
  }
  static void poll(int wait, void (*done)(uint64_t, const TensorStats*, void*), void* user) {
    polls_with_wait += wait != 0;
    if (hold && wait == 0) return;
    auto ready = std::move(queue);
    queue.clear();
    for (auto& [token, stats] : ready) done(token, lose ? nullptr : &stats, user);
  }
  static const char* last_error() { return ""; }
  static inline int reads = 0;
  static int read(void* host, const void* data, size_t bytes, void*) {
    ++reads;
    if (bytes > 0) std::memcpy(host, data, bytes);  // 0 bytes: a wait for the stream only
    return 0;
  }
  static constexpr fpscope_gpu_api api{FPSCOPE_GPU_API_VERSION, submit, poll, last_error, read};
};

mpt_tensor device_tensor(void* data, std::vector<int64_t> shape, const char* name, int32_t dtype = MPT_DTYPE_F32) {
  mpt_tensor t = tensor(data, dtype, std::move(shape), name);
  t.device = MPT_DEVICE_CUDA;
  return t;
}

/* The loss scaler on the device: its scalars are read through the GPU library, whether the launch
 * is measured (the device path) or not (--ops selects nothing). */
class DeviceLossScale : public LaunchPath {
 protected:
  // amp_update_scale on device tensors (host memory the launch calls device memory).
  void update_scale_on_device(float* scale, int32_t* tracker, float* found_inf) {
    launch("amp_update_scale",
           {device_tensor(scale, {1}, "scale"), device_tensor(tracker, {1}, "growth_tracker", MPT_DTYPE_I32),
            device_tensor(found_inf, {1}, "found_inf")},
           {device_tensor(scale, {1}, "scale"), device_tensor(tracker, {1}, "growth_tracker", MPT_DTYPE_I32)},
           update_scale);
  }
  void run(bool measured) {
    Options o;
    if (!measured) o.ops = {"nothing-matches"};
    start(o);
    session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
    float scale = 1024, found_inf = 0;
    int32_t tracker = 1;
    auto update = [&] { update_scale_on_device(&scale, &tracker, &found_inf); };
    const int reads_before = FakeGpu::reads;
    enter(0, "optimizer", "scaler");
    update();  // the second clean step of the interval: growth to 2048
    leave();
    found_inf = 1;
    enter(1, "optimizer", "scaler");
    update();  // backoff to 1024
    leave();
    session_->poll_device(true);
    EXPECT_EQ(FakeGpu::reads - reads_before, 8) << "scale and found_inf before, scale and tracker after";
    const DecodedTrace& t = drain();
    auto ls = t.all<wire::LossScaleRecord>(RecordType::LossScale);
    ASSERT_EQ(ls.size(), 2u);
    expect_scale_event(ls[0], wire::ScaleEvent::Growth, 1024, 2048, 0, 0);
    EXPECT_EQ(ls[0].growth_tracker, 0);
    expect_scale_event(ls[1], wire::ScaleEvent::Backoff, 2048, 1024, 1, 1);
    auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
    ASSERT_EQ(launches.size(), 2u);
    EXPECT_EQ(launches[0].device, MPT_DEVICE_CUDA);
    EXPECT_EQ(launches[0].sampled, measured ? 1 : 0);
  }
};

TEST_F(DeviceLossScale, MeasuredLaunchesReadTheirScalarsThroughTheGpuLibrary) { run(true); }
TEST_F(DeviceLossScale, UnselectedLaunchesReadTheirScalarsThroughTheGpuLibrary) { run(false); }

/* A device read that fails (a CUDA error) leaves the update without its event, nothing else. */
TEST_F(DeviceLossScale, AFailedReadLeavesOutTheEventOnly) {
  start(Options{});
  static constexpr fpscope_gpu_api failing{FPSCOPE_GPU_API_VERSION, FakeGpu::submit, FakeGpu::poll,
                                           [] { return "cudaErrorIllegalAddress"; },
                                           [](void*, const void*, size_t, void*) { return 1; }};
  session_->set_gpu_loader([](std::string*) { return &failing; });
  float scale = 1024, found_inf = 0;
  int32_t tracker = 0;
  update_scale_on_device(&scale, &tracker, &found_inf);
  session_->poll_device(true);
  const DecodedTrace& t = drain();
  EXPECT_EQ(t.count(RecordType::Launch), 1u);
  EXPECT_EQ(t.count(RecordType::LossScale), 0u);
  EXPECT_EQ(t.count(RecordType::TensorStats), 3u);  // the float tensors were still measured
}

/* Without the GPU library the device scaler's launches are still recorded, without events. */
TEST_F(DeviceLossScale, WithoutTheGpuLibraryTheEventsAreLeftOut) {
  start(Options{});
  session_->set_gpu_loader([](std::string* why) -> const fpscope_gpu_api* {
    *why = "no usable CUDA device";
    return nullptr;
  });
  float scale = 1024, found_inf = 0;
  int32_t tracker = 0;
  update_scale_on_device(&scale, &tracker, &found_inf);
  const DecodedTrace& t = drain();
  EXPECT_EQ(t.count(RecordType::Launch), 1u);
  EXPECT_EQ(t.count(RecordType::LossScale), 0u);
}

/* A front end's op on device tensors (PyTorch on CUDA) is measured through the GPU library too:
 * its inputs queued before the op (an in-place op changes them), its outputs after; and
 * GradScaler's update is read off as the loss-scale event. */
TEST_F(LaunchPath, FrontEndOpsOnDeviceTensorsAreMeasuredThroughTheGpuLibrary) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[4] = {1, 2, 3, 4};
  enter(0, "forward", "fc1");
  const mpt_tensor in = device_tensor(x, {4}, "x");
  const uint8_t written = 1;
  auto* op = session_->begin_op("mul_", &in, 1, &written, true);
  for (float& v : x) v *= -2;  // the op
  std::string trapped;
  EXPECT_EQ(session_->end_op(op, &in, 1, 0, &trapped), 0);
  leave();
  float scale = 1024, found_inf = 1;
  int32_t tracker = 7;
  enter(0, "optimizer", "scaler");
  const mpt_tensor scaler_in[3] = {device_tensor(&scale, {1}, "scale"),
                                   device_tensor(&tracker, {1}, "growth_tracker", MPT_DTYPE_I32),
                                   device_tensor(&found_inf, {1}, "found_inf")};
  const uint8_t scaler_written[3] = {1, 1, 0};
  op = session_->begin_op("_amp_update_scale_", scaler_in, 3, scaler_written, true);
  scale = 512;  // the op: backoff
  tracker = 0;
  EXPECT_EQ(session_->end_op(op, scaler_in, 2, 0, &trapped), 0);
  leave();
  session_->poll_device(true);
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].device, MPT_DEVICE_CUDA);
  EXPECT_EQ(launches[0].sampled, 1);
  std::vector<wire::TensorStatsRecord> xs;
  for (const auto& r : t.all<wire::TensorStatsRecord>(RecordType::TensorStats))
    if (t.text(r.name) == "x") xs.push_back(r);
  ASSERT_EQ(xs.size(), 2u);
  EXPECT_EQ(xs[0].role, wire::Role::Input);
  EXPECT_EQ(xs[0].max, 4.0);
  EXPECT_EQ(xs[1].role, wire::Role::Output);
  EXPECT_EQ(xs[1].max, -2.0);
  EXPECT_EQ(xs[1].min, -8.0);
  auto ls = t.all<wire::LossScaleRecord>(RecordType::LossScale);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0].event, wire::ScaleEvent::Backoff);
  EXPECT_EQ(ls[0].scale_before, 1024.0);
  EXPECT_EQ(ls[0].scale_after, 512.0);
  EXPECT_EQ(ls[0].found_inf, 1);
  EXPECT_EQ(ls[0].growth_tracker, 0);
}

/* An op with no device input but device outputs (torch.full(..., device="cuda"), a copy to the
 * device) has its outputs measured through the GPU library and is recorded as a device launch. */
TEST_F(LaunchPath, FrontEndOpsWithDeviceOutputsOnlyAreMeasuredOnTheDevice) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float host[3] = {1, 2, 3}, y[4];
  enter(0, "forward", "fc1");
  const mpt_tensor no_inputs{};
  auto* op = session_->begin_op("full", &no_inputs, 0, nullptr, true);
  for (float& v : y) v = 0.5f;
  const mpt_tensor out = device_tensor(y, {4}, "y");
  std::string trapped;
  EXPECT_EQ(session_->end_op(op, &out, 1, 0, &trapped), 0);
  const mpt_tensor in = tensor(host, MPT_DTYPE_F32, {3}, "h");
  op = session_->begin_op("_to_copy", &in, 1, nullptr, true);  // host to device
  const mpt_tensor copied = device_tensor(host, {3}, "d");
  EXPECT_EQ(session_->end_op(op, &copied, 1, 0, &trapped), 0);
  leave();
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].device, MPT_DEVICE_CUDA);
  EXPECT_EQ(launches[1].device, MPT_DEVICE_CUDA);
  // Host statistics are written at once, device ones when their results arrive.
  std::map<std::string, wire::TensorStatsRecord> by_name;
  for (const auto& r : t.all<wire::TensorStatsRecord>(RecordType::TensorStats)) by_name[t.text(r.name)] = r;
  ASSERT_EQ(by_name.size(), 3u);
  EXPECT_EQ(by_name["y"].seq, launches[0].seq);
  EXPECT_EQ(by_name["y"].count, 4u);
  EXPECT_EQ(by_name["y"].max, 0.5);
  EXPECT_EQ(by_name["h"].seq, launches[1].seq);
  EXPECT_EQ(by_name["h"].role, wire::Role::Input);
  EXPECT_EQ(by_name["d"].seq, launches[1].seq);
  EXPECT_EQ(by_name["d"].role, wire::Role::Output);
  EXPECT_EQ(by_name["d"].max, 3.0);
}

/* A copy from the device to the host (.cpu()): the host output is measured on the host, and a NaN
 * it holds came in through the device input (origin 0) or was made here (origin 1). */
TEST_F(LaunchPath, HostOutputsOfDeviceLaunchesAreMeasuredOnTheHost) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float x[4] = {1, nan, 3, 4}, y[4], z[4] = {1, 2, 3, 4}, w[4];
  launch("copy", {device_tensor(x, {4}, "x")}, {tensor(y, MPT_DTYPE_F32, {4}, "y")}, copy_with_nan, {{"index", 1}});
  launch("copy", {device_tensor(z, {4}, "z")}, {tensor(w, MPT_DTYPE_F32, {4}, "w")}, copy_with_nan, {{"index", 3}});
  session_->poll_device(true);
  const DecodedTrace& t = drain();
  std::map<std::string, wire::TensorStatsRecord> by_name;
  for (const auto& r : t.all<wire::TensorStatsRecord>(RecordType::TensorStats)) by_name[t.text(r.name)] = r;
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name["y"].role, wire::Role::Output);
  EXPECT_EQ(by_name["y"].nan, 1u);
  EXPECT_EQ(by_name["y"].max, 4.0);
  EXPECT_EQ(by_name["w"].nan, 1u);
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  std::map<uint64_t, int> origin_by_seq;
  for (const auto& r : t.all<wire::NonfiniteRecord>(RecordType::Nonfinite)) origin_by_seq[r.seq] = r.origin;
  ASSERT_EQ(origin_by_seq.size(), 2u);
  EXPECT_EQ(origin_by_seq[launches[0].seq], 0) << "the NaN came from the device input";
  EXPECT_EQ(origin_by_seq[launches[1].seq], 1) << "the device input was finite";
}

/* A device launch's host outputs are judged as a host launch's: allow rules, and the trap. */
TEST_F(LaunchPath, HostOutputsOfDeviceLaunchesFollowAllowRulesAndTheTrap) {
  ASSERT_NO_FATAL_FAILURE(start_trapping_with_mask_rule());
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8];
  EXPECT_EXIT(
      {
        // An intended -inf copied to the host: recorded as allowed, no trap.
        launch("mask_fill", {device_tensor(x, {8}, "x")}, {tensor(y, MPT_DTYPE_F32, {8}, "mask")}, copy_with_neg_inf,
               {{"index", 4}});
        // A NaN a device launch makes in a host output: the trap.
        launch("copy_with_nan", {device_tensor(x, {8}, "x")}, {tensor(z, MPT_DTYPE_F32, {8}, "z")}, copy_with_nan,
               {{"index", 2}});
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTRAP), "first NaN made by copy_with_nan in z at index 2");
  const DecodedTrace& t = drain();
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].allowed, 1);
  EXPECT_EQ(nf[0].origin, 1);
  EXPECT_EQ(nf[1].allowed, 0);
  EXPECT_EQ(nf[1].origin, 1);
}

/* With --trap, a front end's op on device tensors waits for its results, and end_op hands the
 * trap back, so that the front end raises in the program at this op. */
TEST_F(LaunchPath, FrontEndDeviceTrapComesBackFromEndOp) {
  Options o;
  o.trap = TrapKind::Nonfinite;
  start(o);
  consumer_->mark_collector_gone();
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[4] = {1, 2, 3, 4};
  const mpt_tensor in = device_tensor(x, {4}, "x");
  enter(3, "forward", "attn");
  auto* op = session_->begin_op("div", &in, 1, nullptr, true);
  float y[4] = {1, 2, std::numeric_limits<float>::quiet_NaN(), 4};
  const mpt_tensor out = device_tensor(y, {4}, "scores");
  std::string trapped;
  EXPECT_EQ(session_->end_op(op, &out, 1, 0, &trapped), FPSCOPE_TRAPPED);
  EXPECT_NE(trapped.find("first NaN made by div (layer attn, step 3, phase forward) in scores at index 2"),
            std::string::npos) << trapped;
  leave();
}

TEST_F(LaunchPath, DeviceTensorsAreMeasuredThroughTheGpuLibrary) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8];
  enter(5, "forward", "fc1");
  launch("copy_with_nan", {device_tensor(x, {8}, "x")}, {device_tensor(y, {8}, "y")}, copy_with_nan, {{"index", 3}});
  launch("copy_with_nan", {device_tensor(y, {8}, "y")}, {device_tensor(z, {8}, "z")}, copy_with_nan, {{"index", 1}});
  // The second launch collected what the first had queued; its own results are still queued.
  EXPECT_EQ(drain().count(RecordType::TensorStats), 2u);
  const int waits_before = FakeGpu::polls_with_wait;
  leave();  // the end of the phase collects them
  EXPECT_GT(FakeGpu::polls_with_wait, waits_before);
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].device, MPT_DEVICE_CUDA);
  EXPECT_EQ(launches[0].sampled, 1);
  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(t.text(stats[1].name), "y");
  EXPECT_EQ(stats[1].role, wire::Role::Output);
  EXPECT_EQ(stats[1].nan, 1u);
  EXPECT_EQ(stats[1].max, 8.0);
  EXPECT_EQ(t.count(RecordType::TensorHistogram), 4u);
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].seq, 1u);
  EXPECT_EQ(nf[0].origin, 1);
  EXPECT_EQ(nf[0].first_index, 3u);
  EXPECT_EQ(nf[1].seq, 2u);
  EXPECT_EQ(nf[1].origin, 0);
  EXPECT_EQ(nf[1].first_index, 1u);
}

// out = in + 1, element by element (in place too).
int add_one(const mpt_launch_desc* d) {
  const auto* in = static_cast<const float*>(d->inputs[0].data);
  auto* out = static_cast<float*>(d->outputs[0].data);
  for (int64_t i = 0; i < count_of(d->outputs[0]); ++i) out[i] = in[i] + 1.0f;
  return MPT_OK;
}

/* A device input holding the bytes an earlier launch's output left, unwritten since, takes that
 * output's result instead of a scan of its own: followed while the result is on its way (an
 * in-place launch's input included: it is queued before the launch's write), remembered once it
 * came back. A declared write in between, or memory outside every allocation, is scanned. Every
 * input's numbers equal a scan of its bytes as the launch read them. */
TEST_F(LaunchPath, DeviceInputsThatEarlierOutputsLeftAreNotScannedAgain) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  FakeGpu::queue.clear();
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8], w[8];
  session_->allocated(y, sizeof y, MPT_DEVICE_CUDA, MPT_CAT_ACTIVATION, "y", 1);
  session_->allocated(z, sizeof z, MPT_DEVICE_CUDA, MPT_CAT_ACTIVATION, "z", 2);
  session_->allocated(w, sizeof w, MPT_DEVICE_CUDA, MPT_CAT_ACTIVATION, "w", 3);
  // The statistics of each launch's input as it read it, by launch.
  std::vector<TensorStats> read(1);
  auto run = [&](const char* kernel, float* in, float* out, LaunchFn fn, std::vector<mpt_scalar> scalars = {}) {
    compute_stats(in, ElementType::F32, 8, StatsLevel::Full, &read.emplace_back());
    launch(kernel, {device_tensor(in, {8}, "in")}, {device_tensor(out, {8}, "out")}, fn, std::move(scalars));
  };
  const int submits = FakeGpu::submits;
  FakeGpu::hold = true;
  enter(0, "forward", "fc1");
  run("copy_with_nan", x, y, copy_with_nan, {{"index", 3}});  // x scanned (not allocated), y
  run("copy_with_nan", y, z, copy_with_nan, {{"index", 1}});  // y follows; z
  run("add_one", z, w, add_one);                              // z follows; w
  run("add_one", y, y, add_one);                              // y follows the first; y again
  run("add_one", y, z, add_one);                              // y follows the fourth; z
  EXPECT_EQ(FakeGpu::submits - submits, 6) << "ten tensors, four of them inputs an output left";
  EXPECT_EQ(drain().count(RecordType::TensorStats), 0u) << "no result has come back: the inputs followed";
  EXPECT_EQ(session_->reused_inputs(), 4u);
  FakeGpu::hold = false;
  session_->poll_device(true);
  run("add_one", z, w, add_one);  // z remembered; w
  session_->host_written(w, sizeof w);
  run("add_one", w, z, add_one);  // w written since: scanned; z
  run("add_one", x, y, add_one);  // x outside every allocation: scanned; y
  leave();
  EXPECT_EQ(FakeGpu::submits - submits, 6 + 1 + 2 + 2);
  EXPECT_EQ(session_->reused_inputs(), 5u);
  const DecodedTrace& t = drain();
  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 16u);
  int inputs = 0;
  for (const auto& r : stats) {
    if (r.role != wire::Role::Input) continue;
    ++inputs;
    ASSERT_LT(r.seq, read.size());
    const TensorStats& e = read[r.seq];
    SCOPED_TRACE("launch " + std::to_string(r.seq));
    EXPECT_EQ(r.count, e.count);
    EXPECT_EQ(r.nan, e.nan);
    EXPECT_EQ(r.zero, e.zero);
    EXPECT_EQ(r.min, e.min);
    EXPECT_EQ(r.max, e.max);
    EXPECT_EQ(r.mean, e.mean);
    EXPECT_EQ(r.rms, e.rms);
  }
  EXPECT_EQ(inputs, 8);
  EXPECT_EQ(read[2].nan, 1u);  // y as the second launch read it: the first one's NaN
  EXPECT_EQ(read[5].nan, 1u);  // y after the in-place update: the NaN stays, the rest moved by one
  EXPECT_EQ(read[5].max, 9.0);
  EXPECT_EQ(t.count(RecordType::TensorHistogram), 16u);
}

/* A result the device could not give comes back without statistics: the output and the inputs
 * that followed it go unmeasured, and nothing waits for them any longer. */
TEST_F(LaunchPath, ALostResultLeavesItsFollowersUnmeasuredAndWaitsForNothing) {
  start(Options{});
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  FakeGpu::queue.clear();
  float x[4] = {1, 2, 3, 4}, y[4], z[4];
  session_->allocated(y, sizeof y, MPT_DEVICE_CUDA, MPT_CAT_ACTIVATION, "y", 1);
  session_->allocated(z, sizeof z, MPT_DEVICE_CUDA, MPT_CAT_ACTIVATION, "z", 2);
  FakeGpu::hold = true;
  launch("add_one", {device_tensor(x, {4}, "x")}, {device_tensor(y, {4}, "y")}, add_one);
  launch("add_one", {device_tensor(y, {4}, "y")}, {device_tensor(z, {4}, "z")}, add_one);  // y follows
  EXPECT_EQ(session_->reused_inputs(), 1u);
  FakeGpu::lose = true;
  session_->poll_device(true);
  FakeGpu::lose = false;
  FakeGpu::hold = false;
  const auto started = std::chrono::steady_clock::now();
  session_->device_results_at_exit(std::chrono::seconds(30));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << "a follower is still awaited";
  const DecodedTrace& t = drain();
  EXPECT_EQ(t.count(RecordType::Launch), 2u);
  EXPECT_EQ(t.count(RecordType::TensorStats), 0u);
  // The memo kept nothing of the lost output: the next reader of y is scanned.
  const int submits = FakeGpu::submits;
  launch("add_one", {device_tensor(y, {4}, "y")}, {device_tensor(z, {4}, "z")}, add_one);
  EXPECT_EQ(FakeGpu::submits - submits, 2);
  session_->poll_device(true);
  EXPECT_EQ(drain().count(RecordType::TensorStats), 2u);
}

/* Results still in flight when the program exits (its last launches, after the last phase ended)
 * are waited for and written by the exit handler; a NaN among them is recorded, and traps nothing. */
TEST_F(LaunchPath, DeviceResultsInFlightAtExitAreWritten) {
  Options o;
  o.trap = TrapKind::NaN;
  start(o);
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[4] = {1, 2, 3, 4}, y[4];
  launch("copy_with_nan", {device_tensor(x, {4}, "x")}, {device_tensor(y, {4}, "y")}, copy_with_nan, {{"index", 2}});
  EXPECT_EQ(drain().count(RecordType::TensorStats), 0u) << "nothing has come back yet";
  const int waits_before = FakeGpu::polls_with_wait;
  session_->device_results_at_exit();
  EXPECT_EQ(FakeGpu::polls_with_wait, waits_before) << "it polls; it never waits on the device";
  const DecodedTrace& t = drain();
  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(t.text(stats[1].name), "y");
  EXPECT_EQ(stats[1].nan, 1u);
  EXPECT_EQ(t.count(RecordType::Nonfinite), 1u);
  EXPECT_EQ(t.count(RecordType::Trap), 0u);
}

/* A device that never hands back its results (a stream stuck in a collective whose peer is gone)
 * does not keep the program from exiting: the handler gives up at its deadline. */
TEST_F(LaunchPath, DeviceResultsThatNeverComeBackDoNotHoldTheExit) {
  start(Options{});
  static constexpr fpscope_gpu_api stuck{
      FPSCOPE_GPU_API_VERSION, [](const void*, int, size_t, int, void*, uint64_t) { return 0; },
      [](int, void (*)(uint64_t, const TensorStats*, void*), void*) {}, FakeGpu::last_error, FakeGpu::read};
  session_->set_gpu_loader([](std::string*) { return &stuck; });
  float x[4] = {1, 2, 3, 4}, y[4];
  launch("copy_with_nan", {device_tensor(x, {4}, "x")}, {device_tensor(y, {4}, "y")}, copy_with_nan, {{"index", 2}});
  const auto started = std::chrono::steady_clock::now();
  session_->device_results_at_exit(std::chrono::milliseconds(50));
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::seconds(30));
  const DecodedTrace& t = drain();
  EXPECT_EQ(t.count(RecordType::Launch), 1u);
  EXPECT_EQ(t.count(RecordType::TensorStats), 0u);
}

TEST_F(LaunchPath, DeviceOriginWithOutputsOnlyStillLooksAtInputs) {
  Options o;
  o.tensors = TensorRoles::Outputs;
  start(o);
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[4] = {std::numeric_limits<float>::infinity(), 0, 0, 0}, y[4];
  launch("copy_with_nan", {device_tensor(x, {4}, "x")}, {device_tensor(y, {4}, "y")}, copy_with_nan, {{"index", 2}});
  session_->poll_device(true);
  const DecodedTrace& t = drain();
  auto stats = t.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  ASSERT_EQ(stats.size(), 1u);  // the input was measured for the origin only
  EXPECT_EQ(stats[0].role, wire::Role::Output);
  auto nf = t.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 1u);
  EXPECT_EQ(nf[0].origin, 0);
  EXPECT_EQ(nf[0].first_index, 0u);  // the Inf copied over comes first
}

// Allow rules judge device results as they judge host ones: an intended -inf is flagged and kept
// from the trap, and passes through the next launch as intended, not as damage.
TEST_F(LaunchPath, AllowRulesJudgeDeviceResultsToo) {
  ASSERT_NO_FATAL_FAILURE(start_trapping_with_mask_rule());
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[8];
  EXPECT_EXIT(
      {
        enter(4, "forward", "attn");
        launch("mask_fill", {device_tensor(x, {8}, "x")}, {device_tensor(y, {8}, "scores")}, copy_with_neg_inf,
               {{"index", 4}});
        launch("copy_with_nan", {device_tensor(y, {8}, "scores")}, {device_tensor(z, {8}, "p")}, copy_with_nan,
               {{"index", 1}});
        leave();
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTRAP), "first NaN made by copy_with_nan \\(layer attn, step 4, phase forward\\) in p at index 1");
  expect_intended_mask_then_own_nan(drain());
}

TEST_F(LaunchPath, WithoutTheGpuLibraryDeviceLaunchesAreRecordedUnmeasured) {
  start(Options{});
  session_->set_gpu_loader([](std::string* why) -> const fpscope_gpu_api* {
    *why = "no usable CUDA device";
    return nullptr;
  });
  float x[2] = {1, 2}, y[2];
  launch("scale2", {device_tensor(x, {2}, "x")}, {device_tensor(y, {2}, "y")}, scale2);
  const DecodedTrace& t = drain();
  auto launches = t.all<wire::LaunchRecord>(RecordType::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].device, MPT_DEVICE_CUDA);
  EXPECT_EQ(launches[0].sampled, 0);
  EXPECT_EQ(t.count(RecordType::TensorStats), 0u);
}

TEST_F(LaunchPath, DeviceTrapFiresWhenTheResultArrives) {
  Options o;
  o.trap = TrapKind::Nonfinite;
  start(o);
  consumer_->mark_collector_gone();
  session_->set_gpu_loader([](std::string*) { return &FakeGpu::api; });
  float x[8] = {}, y[8];
  EXPECT_EXIT(
      {
        enter(2, "backward", "fc2");
        launch("copy_with_nan", {device_tensor(x, {8}, "x")}, {device_tensor(y, {8}, "fc2.out")}, copy_with_nan,
               {{"index", 6}});
        leave();
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTRAP),
      "fpscope: trap: first NaN made by copy_with_nan \\(layer fc2, step 2, phase backward\\) in fc2.out at index 6");
}

}  // namespace
}  // namespace fpscope::inject
