// The launch path's test fixture, shared by launch_path_test.cpp and reused_inputs_test.cpp: fake
// kernels go through the session's launch path, which writes into a real ring (the collector's
// RingProducer); the tests read the ring back with RingConsumer.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/common/allow_rules.h"
#include "fpscope/collector/ring.h"
#include "memory_sink.h"
#include "ring_sink.h"
#include "session.h"
#include "temp_path.h"

namespace fpscope::inject {

using testing::DecodedTrace;

inline mpt_tensor tensor(void* data, int32_t dtype, std::vector<int64_t> shape, const char* name, uint64_t id = 0) {
  mpt_tensor t{};
  t.data = data;
  t.id = id;
  t.name = name;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.dtype = dtype;
  t.device = MPT_DEVICE_CPU;
  return t;
}

inline int64_t count_of(const mpt_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// y = 2x (f32).
inline int scale2(const mpt_launch_desc* d) {
  const auto* x = static_cast<const float*>(d->inputs[0].data);
  auto* y = static_cast<float*>(d->outputs[0].data);
  for (int64_t i = 0; i < count_of(d->outputs[0]); ++i) y[i] = 2 * x[i];
  return MPT_OK;
}

// y = x, then -inf at index scalars[0] (f32): a mask filled on purpose.
inline int copy_with_neg_inf(const mpt_launch_desc* d) {
  std::memcpy(d->outputs[0].data, d->inputs[0].data, 4 * count_of(d->outputs[0]));
  static_cast<float*>(d->outputs[0].data)[static_cast<int64_t>(d->scalars[0].value)] =
      -std::numeric_limits<float>::infinity();
  return MPT_OK;
}

// y = x, then a quiet NaN at index scalars[0] (f32).
inline int copy_with_nan(const mpt_launch_desc* d) {
  std::memcpy(d->outputs[0].data, d->inputs[0].data, 4 * count_of(d->outputs[0]));
  static_cast<float*>(d->outputs[0].data)[static_cast<int64_t>(d->scalars[0].value)] =
      std::numeric_limits<float>::quiet_NaN();
  return MPT_OK;
}

// x *= s[0] in place: inputs x, s; outputs x.
inline int scale_in_place(const mpt_launch_desc* d) {
  auto* x = static_cast<float*>(d->inputs[0].data);
  const float s = *static_cast<const float*>(d->inputs[1].data);
  for (int64_t i = 0; i < count_of(d->inputs[0]); ++i) x[i] *= s;
  return MPT_OK;
}

// The loss scaler's update, as docs/kernels.md describes it (growth interval 2).
inline int update_scale(const mpt_launch_desc* d) {
  auto* scale = static_cast<float*>(d->inputs[0].data);
  auto* tracker = static_cast<int32_t*>(d->inputs[1].data);
  const float found_inf = *static_cast<const float*>(d->inputs[2].data);
  if (found_inf != 0) {
    *scale *= 0.5f;
    *tracker = 0;
  } else if (++*tracker == 2) {
    *scale *= 2;
    *tracker = 0;
  }
  return MPT_OK;
}

class LaunchPath : public ::testing::Test {
 protected:
  void start(Options options, uint64_t ring_slots = 1 << 14) {
    const std::string name = fpscope::test::unique_shm_name("fpscope-inject-test");
    std::string error;
    consumer_ = RingConsumer::create(name, ring_slots, &error);
    ASSERT_TRUE(consumer_) << error;
    auto producer = RingProducer::attach(name.c_str(), &error);
    ASSERT_TRUE(producer) << error;
    ASSERT_TRUE(producer->claim());
    session_ = std::make_unique<Session>(std::move(options), std::make_unique<RingSink>(std::move(producer)));
  }
  const DecodedTrace& drain() {
    consumer_->drain([this](const wire::RecordHeader* h) { trace_.add(h); });
    return trace_;
  }
  // Opens step / phase / layer ranges of the trainer's domain on this thread.
  void enter(int64_t step, const char* phase, const char* layer) {
    RangeEvent e;
    e.message = "step";
    e.category = kStepCategory;
    e.payload_kind = 1;
    e.payload_i = step;
    session_->range_push(&trainer_, e);
    session_->range_push(&trainer_, RangeEvent{phase, kPhaseCategory});
    session_->range_push(&trainer_, RangeEvent{layer, kLayerCategory});
  }
  void leave() {
    for (int i = 0; i < 3; ++i) session_->range_pop(&trainer_);
  }
  // A session that traps at the first NaN/Inf a launch makes, where -inf from kernels or layers
  // named mask_* is intended; its ring's reader is marked gone, for tests that die by the trap.
  void start_trapping_with_mask_rule() {
    Options o;
    o.trap = TrapKind::Nonfinite;
    std::string error;
    ASSERT_TRUE(common::parse_allow_rules("mask_*:-inf", &o.allow, &error)) << error;
    start(o);
    consumer_->mark_collector_gone();
  }
  int launch(const char* kernel, std::vector<mpt_tensor> in, std::vector<mpt_tensor> out, LaunchFn fn,
             std::vector<mpt_scalar> scalars = {}) {
    mpt_launch_desc d{};
    d.abi_version = MPT_ABI_VERSION;
    d.kernel = kernel;
    d.inputs = in.data();
    d.n_inputs = static_cast<int32_t>(in.size());
    d.outputs = out.data();
    d.n_outputs = static_cast<int32_t>(out.size());
    d.scalars = scalars.data();
    d.n_scalars = static_cast<int32_t>(scalars.size());
    return session_->launch(&d, fn);
  }

  NvtxDomainInfo trainer_{"mptrain", true};
  std::unique_ptr<RingConsumer> consumer_;
  std::unique_ptr<Session> session_;
  DecodedTrace trace_;
};

// The records of a mask_fill launch whose -inf an allow rule covers, followed by a launch that
// reads it and makes a NaN of its own: the -inf flagged intended, the NaN this launch's origin.
inline void expect_intended_mask_then_own_nan(const DecodedTrace& t) {
  auto nf = t.all<wire::NonfiniteRecord>(wire::RecordType::Nonfinite);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].seq, 1u);
  EXPECT_EQ(nf[0].kind, wire::NonfiniteKind::NegInf);
  EXPECT_EQ(nf[0].origin, 1);
  EXPECT_EQ(nf[0].allowed, 1);
  EXPECT_EQ(nf[1].seq, 2u);
  EXPECT_EQ(nf[1].origin, 1);  // its only non-finite input was intended
  EXPECT_EQ(nf[1].allowed, 0);
}

// A LossScale record's event, its scale before and after, whether it found an Inf, and its step.
inline void expect_scale_event(const wire::LossScaleRecord& r, wire::ScaleEvent event, double before, double after,
                               int found_inf, int64_t step) {
  EXPECT_EQ(r.event, event);
  EXPECT_EQ(r.scale_before, before);
  EXPECT_EQ(r.scale_after, after);
  EXPECT_EQ(r.found_inf, found_inf);
  EXPECT_EQ(r.step, step);
}

}  // namespace fpscope::inject
