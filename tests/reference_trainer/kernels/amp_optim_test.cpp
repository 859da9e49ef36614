// The loss scaler as a state machine (a written-out sequence of found_inf flags against the
// exact scales, trackers and skip decisions PyTorch's GradScaler gives), unscaling, and one or
// two optimizer steps of SGD and AdamW against values worked out by hand or by an independent
// double formula, with fp32, fp16 and stochastically rounded state.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::Scalars;

struct ScalerState {
  HostTensor scale = HostTensor::from_values({1}, {65536.0}, MPT_DTYPE_F32, "loss_scale");
  HostTensor tracker = HostTensor::i32({1}, {0}, "growth_tracker");
  HostTensor found = HostTensor::from_values({1}, {0.0}, MPT_DTYPE_F32, "found_inf");
};

// One training step's scaler work: unscale two gradients (one with a planted fault when asked),
// then update the scale. Returns whether the step is skipped.
bool scaler_step(ScalerState& s, bool plant_inf) {
  auto g1 = HostTensor::from_values({3}, {1024.0, -2048.0, 4096.0}, MPT_DTYPE_F32, "g1");
  auto g2 = HostTensor::from_values({2}, {512.0, 8.0}, MPT_DTYPE_F16, "g2");
  if (plant_inf) {
    EXPECT_EQ(launch("inject_fault", {&g2}, {&g2}, {{"index", 1}, {"kind", 1}}), MPT_OK);
  }
  EXPECT_EQ(launch("amp_unscale_check", {&s.scale, &g1, &g2}, {&s.found, &g1, &g2}), MPT_OK) << mpt_last_error();
  if (!plant_inf) {
    double inv = static_cast<float>(1.0 / s.scale.value(0));
    EXPECT_EQ(g1.value(1), static_cast<float>(-2048.0 * inv));
    EXPECT_EQ(g2.value(0), mpt_test::reference_round_f16(static_cast<float>(512.0 * inv)));
  }
  Scalars factors{{"growth_factor", 2.0}, {"backoff_factor", 0.5}, {"growth_interval", 3}};
  EXPECT_EQ(launch("amp_update_scale", {&s.scale, &s.tracker, &s.found}, {&s.scale, &s.tracker}, factors), MPT_OK)
      << mpt_last_error();
  return s.found.value(0) != 0.0;
}

TEST(LossScaler, FollowsGradScalerStateMachine) {
  struct Expected { bool inf; double scale; int tracker; };
  // growth_interval 3, growth 2, backoff 0.5, start at 65536 with tracker 0.
  const Expected sequence[] = {
      {false, 65536, 1}, {false, 65536, 2}, {false, 131072, 0},  // grows after 3 clean steps
      {true, 65536, 0},                                          // backoff on inf, step skipped
      {false, 65536, 1}, {true, 32768, 0},                       // inf resets a partly grown tracker
      {true, 16384, 0}, {false, 16384, 1}, {false, 16384, 2}, {false, 32768, 0}, {false, 32768, 1}};
  ScalerState s;
  int step = 0;
  for (const Expected& e : sequence) {
    bool skipped = scaler_step(s, e.inf);
    EXPECT_EQ(skipped, e.inf) << "step " << step;
    EXPECT_EQ(s.scale.value(0), e.scale) << "step " << step;
    EXPECT_EQ(s.tracker.i32_at(0), e.tracker) << "step " << step;
    ++step;
  }
}

TEST(LossScaler, GrowthThatWouldOverflowKeepsTheScale) {
  ScalerState s;
  s.scale.set(0, 3.0e38);
  s.tracker = HostTensor::i32({1}, {2}, "growth_tracker");
  Scalars factors{{"growth_factor", 2.0}, {"backoff_factor", 0.5}, {"growth_interval", 3}};
  ASSERT_EQ(launch("amp_update_scale", {&s.scale, &s.tracker, &s.found}, {&s.scale, &s.tracker}, factors), MPT_OK);
  EXPECT_EQ(s.scale.value(0), static_cast<float>(3.0e38));
  EXPECT_EQ(s.tracker.i32_at(0), 0);
}

TEST(LossScaler, UnscaleFindsNanAndStillUnscales) {
  auto scale = HostTensor::from_values({1}, {4.0}, MPT_DTYPE_F32, "scale");
  auto g = HostTensor::from_values({3}, {8.0, NAN, -2.0}, MPT_DTYPE_BF16, "g");
  HostTensor found({1}, MPT_DTYPE_F32, "found_inf");
  ASSERT_EQ(launch("amp_unscale_check", {&scale, &g}, {&found, &g}), MPT_OK) << mpt_last_error();
  EXPECT_EQ(found.value(0), 1.0);
  EXPECT_EQ(g.value(0), 2.0);
  EXPECT_EQ(g.value(2), -0.5);
  auto clean = HostTensor::from_values({2}, {1.0, 2.0}, MPT_DTYPE_F32, "clean");
  ASSERT_EQ(launch("amp_unscale_check", {&scale, &clean}, {&found, &clean}), MPT_OK);
  EXPECT_EQ(found.value(0), 0.0) << "found_inf is overwritten, not accumulated";
}

TEST(Optimizers, SgdTwoStepsByHand) {
  // p=1, g=0.5, lr=0.1, momentum=0.9, weight_decay=0.01.
  // step 1: d = 0.5 + 0.01*1 = 0.51; buf = 0.51; p = 1 - 0.051 = 0.949
  // step 2: d = 0.5 + 0.01*0.949 = 0.50949; buf = 0.9*0.51 + 0.50949 = 0.96849; p = 0.949 - 0.096849 = 0.852151
  for (int state_type : {MPT_DTYPE_F32, MPT_DTYPE_F16}) {
    auto p = HostTensor::from_values({2}, {1.0, 1.0}, MPT_DTYPE_F32, "p");
    auto g = HostTensor::from_values({2}, {0.5, 0.5}, MPT_DTYPE_F32, "g");
    // Whatever the buffer holds before step 1 is ignored: PyTorch creates it from the first d.
    auto buf = HostTensor::from_values({2}, {5.0, -7.0}, state_type, "momentum");
    Scalars s{{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"step", 1}};
    ASSERT_EQ(launch("sgd_step", {&p, &g, &buf}, {&p, &buf}, s), MPT_OK) << mpt_last_error();
    double tol = state_type == MPT_DTYPE_F32 ? 1e-6 : 1e-3;
    EXPECT_NEAR(p.value(0), 0.949, tol);
    EXPECT_NEAR(buf.value(0), 0.51, tol);
    if (state_type == MPT_DTYPE_F16) {
      EXPECT_EQ(buf.value(0), mpt_test::reference_round_f16(0.51f));
    }
    s[3].second = 2;
    ASSERT_EQ(launch("sgd_step", {&p, &g, &buf}, {&p, &buf}, s), MPT_OK);
    EXPECT_NEAR(p.value(1), 0.852151, tol);
    EXPECT_NEAR(buf.value(1), 0.96849, tol);
  }
}

// AdamW after `steps` equal gradients g, from PyTorch's formulas, in double; the moments are
// rounded to the state's dtype after each step as stored state is.
double adamw_reference(double p, double g, double lr, double b1, double b2, double eps, double wd, int steps,
                       int state_type) {
  double m = 0, v = 0;
  for (int t = 1; t <= steps; ++t) {
    p *= 1 - lr * wd;
    m = mpt_test::reference_round(b1 * m + (1 - b1) * g, state_type);
    v = mpt_test::reference_round(b2 * v + (1 - b2) * g * g, state_type);
    double denom = std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps;
    p -= lr / (1 - std::pow(b1, t)) * m / denom;
  }
  return p;
}

TEST(Optimizers, AdamWMatchesIndependentFormula) {
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.05;
  std::vector<double> p0{1.0, -2.0, 0.5, 3.0}, g{0.3, -0.01, 2.0, 0.0};
  for (int state_type : {MPT_DTYPE_F32, MPT_DTYPE_F16}) {
    auto p = HostTensor::from_values({4}, p0, MPT_DTYPE_F32, "p");
    auto grad = HostTensor::from_values({4}, g, MPT_DTYPE_F32, "g");
    HostTensor m({4}, state_type, "exp_avg"), v({4}, state_type, "exp_avg_sq");
    for (int t = 1; t <= 3; ++t) {
      Scalars s{{"lr", lr}, {"beta1", b1}, {"beta2", b2}, {"eps", eps}, {"weight_decay", wd}, {"step", t}};
      ASSERT_EQ(launch("adamw_step", {&p, &grad, &m, &v}, {&p, &m, &v}, s), MPT_OK) << mpt_last_error();
    }
    // The kernel's fp32 arithmetic against double: within a few fp32 ulps of the parameters.
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(p.value(i), adamw_reference(p0[i], g[i], lr, b1, b2, eps, wd, 3, state_type), 2e-6) << "element " << i;
    // Element 1's second moment (~1e-7, 3e-7) lies in fp16's subnormal range: stored coarsely.
    double v_ref = 0;
    for (int t = 1; t <= 3; ++t) v_ref = mpt_test::reference_round(b2 * v_ref + (1 - b2) * g[1] * g[1], state_type);
    EXPECT_NEAR(v.value(1), v_ref, state_type == MPT_DTYPE_F32 ? 1e-13 : std::ldexp(1.0, -24));
    // After one step by hand: the update is lr * g / (|g| + eps) ~ lr in magnitude.
    EXPECT_NEAR(m.value(2), 2.0 * (1 - std::pow(0.9, 3)), state_type == MPT_DTYPE_F32 ? 1e-6 : 1e-3);
  }
}

TEST(Optimizers, Fp16ParameterWithStochasticRoundingIsUnbiased) {
  // 1.0 in fp16 with a decrement of 1e-4, a fifth of the gap 2^-11 below 1: rounding to nearest
  // leaves every element at 1; stochastic rounding moves a fifth of them down one gap, so the
  // mean moves by 1e-4 (5 standard errors of 20000 Bernoulli draws: 1.5e-5 in value).
  const int64_t n = 20000;
  for (bool stochastic : {false, true}) {
    auto p = HostTensor::from_values({n}, std::vector<double>(n, 1.0), MPT_DTYPE_F16, "p");
    auto g = HostTensor::from_values({n}, std::vector<double>(n, 1e-3), MPT_DTYPE_F32, "g");
    HostTensor buf({n}, MPT_DTYPE_F32, "momentum");
    Scalars s{{"lr", 0.1}, {"step", 1}, {"stochastic_rounding", stochastic ? 1 : 0}, {"seed", 5}};
    ASSERT_EQ(launch("sgd_step", {&p, &g, &buf}, {&p, &buf}, s), MPT_OK) << mpt_last_error();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = p.value(i);
      ASSERT_TRUE(v == 1.0 || v == 1.0 - std::ldexp(1.0, -11)) << v;
      sum += v;
    }
    double expected = stochastic ? 1.0 - 1e-4 : 1.0;
    EXPECT_NEAR(sum / n, expected, 1.5e-5) << (stochastic ? "stochastic" : "nearest");
    if (stochastic) {  // reproducible: the same seed and step give the same bits
      auto again = HostTensor::from_values({n}, std::vector<double>(n, 1.0), MPT_DTYPE_F16, "p");
      ASSERT_EQ(launch("sgd_step", {&again, &g, &buf}, {&again, &buf}, s), MPT_OK);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(again.bits16(i), p.bits16(i));
    }
  }
}

}  // namespace
