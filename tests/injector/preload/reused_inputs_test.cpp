// The injector's reuse of an earlier output's statistics (output_memo.h) through the launch path:
// mptrain's launches and a front end's operations (fpscope/inject_api.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "launch_path_fixture.h"

namespace fpscope::inject {
namespace {

using wire::RecordType;

// [SECTION] Inputs that take an earlier output's statistics (output_memo.h) -----------------------
//
// Each test writes a tensor in ways the memo must notice and checks that every input record holds
// the statistics of the bytes as they were when the launch read them: the largest value tells
// which version was measured.

class ReusedInputs : public LaunchPath {
 protected:
  // The input records' largest values, in launch order.
  std::vector<double> input_maxima() {
    std::vector<double> maxima;
    for (const auto& s : drain().all<wire::TensorStatsRecord>(RecordType::TensorStats))
      if (s.role == wire::Role::Input) maxima.push_back(s.max);
    return maxima;
  }
  mpt_tensor f32(float* data, int64_t n, const char* name, uint64_t id = 0) {
    return tensor(data, MPT_DTYPE_F32, {n}, name, id);
  }
  // a_ as an allocation (id 1) that a measured launch filled with zeros: remembered.
  void zeros_into_a() {
    session_->allocated(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a", 1);
    launch("scale2", {f32(b_, 8, "b")}, {f32(a_, 8, "a", 1)}, scale2);
  }
  // A launch that reads `in` (8 elements) as its input.
  void read(const mpt_tensor& in) { launch("scale2", {in}, {f32(y_, 8, "y")}, scale2); }
  alignas(64) float a_[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(64) float b_[8] = {};
  float y_[8] = {};
};

TEST_F(ReusedInputs, AChainAndAnInPlaceUpdateReadEachVersionOnce) {
  start(Options{});
  session_->allocated(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a", 1);
  session_->allocated(b_, sizeof b_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "b", 2);
  float half = 0.5f;  // not allocated: always scanned
  launch("scale2", {f32(a_, 8, "a", 1)}, {f32(b_, 8, "b", 2)}, scale2);  // a never written: scanned
  launch("scale2", {f32(b_, 8, "b", 2)}, {f32(a_, 8, "a", 1)}, scale2);  // b as scale2 wrote it
  launch("scale_in_place", {f32(a_, 8, "a", 1), f32(&half, 1, "s")}, {f32(a_, 8, "a", 1)}, scale_in_place);
  launch("scale2", {f32(a_, 8, "a", 1)}, {f32(b_, 8, "b", 2)}, scale2);  // a after the in-place update
  EXPECT_EQ(input_maxima(), (std::vector<double>{8, 16, 32, 0.5, 16}));
  EXPECT_EQ(session_->reused_inputs(), 3u);  // b, a before and a after the update
}

TEST_F(ReusedInputs, AKernelWritingAViewForgetsTheWholeTensor) {
  start(Options{});
  session_->allocated(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a", 1);
  float x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  launch("scale2", {f32(x, 8, "x")}, {f32(a_, 8, "a", 1)}, scale2);          // a = 2 everywhere
  float big[4] = {50, 50, 50, 50};
  launch("scale2", {f32(big, 4, "big")}, {f32(a_ + 4, 4, "a.tail", 1)}, scale2);  // a[4:] = 100
  read(f32(a_, 8, "a", 1));
  EXPECT_EQ(input_maxima(), (std::vector<double>{1, 50, 100}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(ReusedInputs, ALaunchLeftUnmeasuredStillCounts) {
  Options o;
  o.ops = {"measured*"};
  start(o);
  session_->allocated(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a", 1);
  float y[8] = {};
  launch("measured_scale", {f32(b_, 8, "b")}, {f32(a_, 8, "a", 1)}, scale2);  // a = 0
  float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  launch("hidden_scale", {f32(ones, 8, "ones")}, {f32(a_, 8, "a", 1)}, scale2);  // a = 2, unmeasured
  launch("measured_read", {f32(a_, 8, "a", 1)}, {f32(y, 8, "y")}, scale2);
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 2}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(ReusedInputs, ADeclaredHostWriteIsSeen) {
  start(Options{});
  zeros_into_a();  // a = 0, remembered
  a_[3] = 100;
  session_->host_written(a_ + 3, sizeof(float));
  read(f32(a_, 8, "a", 1));
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 100}));
}

TEST_F(ReusedInputs, FreedAndAllocatedAgainIsNew) {
  start(Options{});
  zeros_into_a();  // a = 0, remembered
  session_->freed(a_);
  session_->allocated(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a2", 3);
  a_[0] = 7;  // the new owner's first values need no declaration
  read(f32(a_, 8, "a2", 3));
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 7}));
}

TEST_F(ReusedInputs, FreedMemoryIsNeverAnswered) {
  start(Options{});
  zeros_into_a();  // a = 0, remembered
  session_->freed(a_);
  a_[6] = 5;  // no longer the program's allocation: nothing to declare
  read(f32(a_, 8, "stack"));
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 5}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(ReusedInputs, RescanInputsSeesEvenAnUndeclaredHostWrite) {
  Options o;
  o.rescan_inputs = true;
  start(o);
  zeros_into_a();  // a = 0, not remembered under --rescan-inputs
  a_[5] = -9;  // behind the ABI's back
  read(f32(a_, 8, "a", 1));
  const std::vector<double> maxima = input_maxima();
  ASSERT_EQ(maxima.size(), 2u);
  const auto inputs = trace_.all<wire::TensorStatsRecord>(RecordType::TensorStats);
  EXPECT_EQ(inputs[2].min, -9.0);  // the second launch's input: the write is in its numbers
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

// A front end's op (begin_op/end_op) that makes `out` from `in`; `write` runs as the op.
class FrontEndOps : public ReusedInputs {
 protected:
  void op(const char* name, mpt_tensor in, mpt_tensor out, uint8_t written = 0,
          const std::function<void()>& write = {}) {
    auto* begun = session_->begin_op(name, &in, 1, &written, true);
    if (write) write();
    std::string trapped;
    session_->end_op(begun, &out, 1, 0, &trapped);
  }
  void start(const Options& o) {
    ReusedInputs::start(o);
    session_->front_end_reports_writes();
  }
  // a_ seen by the front end as `category`, then filled with zeros by an op: remembered unless data.
  void zeros_into_a(int32_t category = MPT_CAT_ACTIVATION) {
    id_ = session_->allocation_seen(a_, sizeof a_, MPT_DEVICE_CPU, category, "a");
    op("zero_", f32(b_, 8, "b"), a(), 0, [this] { std::fill(a_, a_ + 8, 0.0f); });
  }
  mpt_tensor a() { return f32(a_, 8, "a", id_); }
  // An op that reads a_ (and writes y_).
  void read_a() { op("relu", a(), f32(y_, 8, "y")); }
  uint64_t id_ = 0;
};

TEST_F(FrontEndOps, AnOutputReadLaterIsNotScannedAgain) {
  start(Options{});
  zeros_into_a();
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 0}));
  EXPECT_EQ(session_->reused_inputs(), 1u);
}

TEST_F(FrontEndOps, AnInPlaceOpIsRemeasuredAfterItWrites) {
  start(Options{});
  zeros_into_a();
  op("add_", a(), a(), 1, [this] { a_[2] = 3; });  // its input: the zeros, remembered
  read_a();                                      // the op's own output, remembered
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 0, 3}));
  EXPECT_EQ(session_->reused_inputs(), 2u);
}

TEST_F(FrontEndOps, AnInPlaceOpThatFailsStillForgets) {
  start(Options{});
  zeros_into_a();
  mpt_tensor in = a();
  const uint8_t written = 1;
  auto* begun = session_->begin_op("add_", &in, 1, &written, true);
  a_[2] = 3;  // it wrote part of its input, then raised: no outputs reach end_op
  std::string trapped;
  session_->end_op(begun, nullptr, 0, 1, &trapped);
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 0, 3}));
}

TEST_F(FrontEndOps, AFreshOutputWhereStaleNumbersWereRememberedForgetsThem) {
  start(Options{});
  id_ = session_->allocation_seen(a_, sizeof a_, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION, "a");
  const mpt_tensor head = f32(a_, 4, "a.head", id_);
  op("zero_", f32(b_, 4, "b"), head, 0, [this] { std::fill(a_, a_ + 4, 0.0f); });  // a[:4], remembered
  // Another storage now at a's address (the front end never saw a go) is an op's fresh output.
  op("ones", f32(b_, 8, "b"), a(), 0, [this] { std::fill(a_, a_ + 8, 1.0f); });
  op("relu", head, f32(y_, 4, "y"));
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 0, 1}));
}

TEST_F(FrontEndOps, DataIsNeverRemembered) {
  start(Options{});
  zeros_into_a(MPT_CAT_DATA);
  a_[2] = 3;  // numpy's view of the batch, written behind the front end's back
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 3}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(FrontEndOps, ReportedWritesAreForgotten) {
  start(Options{});
  zeros_into_a();
  a_[2] = 3;  // an op counted without its tensors wrote it, and the front end says so
  session_->host_written(a_ + 2, sizeof(float));
  read_a();
  a_[3] = 4;  // ops the front end did not watch may have written anything
  session_->written_anywhere();
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 3, 4}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(FrontEndOps, StoppedReuseScansEveryInput) {
  start(Options{});
  EXPECT_TRUE(session_->reuses_statistics());
  zeros_into_a();
  session_->stop_reuse();  // a collective library may write from its own threads
  EXPECT_FALSE(session_->reuses_statistics());
  a_[2] = 3;
  read_a();
  zeros_into_a();
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 3, 0, 0}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

TEST_F(FrontEndOps, AFrontEndThatDoesNotReportWritesGetsNoReuse) {
  ReusedInputs::start(Options{});  // no front_end_reports_writes()
  zeros_into_a();
  a_[2] = 3;  // an op the front end could not describe wrote it, and it says nothing
  read_a();
  EXPECT_EQ(input_maxima(), (std::vector<double>{0, 3}));
  EXPECT_EQ(session_->reused_inputs(), 0u);
  EXPECT_FALSE(session_->reuses_statistics());
}

TEST_F(FrontEndOps, RescanInputsTurnsReuseOff) {
  Options o;
  o.rescan_inputs = true;
  start(o);
  EXPECT_FALSE(session_->reuses_statistics());
  zeros_into_a();
  read_a();
  EXPECT_EQ(session_->reused_inputs(), 0u);
}

}  // namespace
}  // namespace fpscope::inject
