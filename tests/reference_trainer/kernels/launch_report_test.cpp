// The launch report (mpt_launch_report, abi.h): the counts of a narrowing store against the same
// kernel run with an f32 output and rounded by the tests' own rounding, and an optimizer's update
// counts and sums against the parameter before and after the step, recomputed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_util.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::launch_reported;
using mpt_test::Scalars;

struct StoreCounts {
  uint64_t results = 0, flushed = 0, subnormal = 0, overflowed = 0;
};

// What rounding each fp32 result to `dtype` does, by the tests' rounding (not the library's).
StoreCounts expected_store(const HostTensor& f32_result, int dtype) {
  const double smallest_normal = dtype == MPT_DTYPE_F16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
  StoreCounts c;
  for (int64_t i = 0; i < f32_result.numel(); ++i) {
    const double x = f32_result.value(i);
    if (!std::isfinite(x) || x == 0) continue;
    const double r = mpt_test::reference_round(x, dtype);
    ++c.results;
    c.flushed += r == 0 ? 1 : 0;
    c.subnormal += r != 0 && std::fabs(r) < smallest_normal ? 1 : 0;
    c.overflowed += std::isinf(r) ? 1 : 0;
  }
  return c;
}

void expect_store(const mpt_store_counts& got, const StoreCounts& want, const char* what) {
  EXPECT_EQ(got.narrowed, 1u) << what;
  EXPECT_EQ(got.results, want.results) << what;
  EXPECT_EQ(got.flushed, want.flushed) << what;
  EXPECT_EQ(got.subnormal, want.subnormal) << what;
  EXPECT_EQ(got.overflowed, want.overflowed) << what;
}

// x's rows span 2^-44 .. 2^20 in magnitude, so y = x w^T + b has values that flush, land
// subnormal, and overflow in fp16; 128 x 1024 outputs are stored in parallel chunks.
TEST(LaunchReport, NarrowingStoreCountsEqualTheRoundingOfTheFp32Result) {
  const int64_t n = 128, in = 4, out = 1024;
  std::vector<double> xs = mpt_test::random_values(static_cast<size_t>(n * in), -1.0, 1.0, 11);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < in; ++k) xs[static_cast<size_t>(i * in + k)] *= std::ldexp(1.0, static_cast<int>(i % 65) - 44);
  auto x = HostTensor::from_values({n, in}, xs, MPT_DTYPE_F32, "x");
  auto w = HostTensor::from_values({out, in}, mpt_test::random_values(static_cast<size_t>(out * in), -1.0, 1.0, 12),
                                   MPT_DTYPE_F32, "w");
  auto b = HostTensor::from_values({out}, std::vector<double>(out, 0.0), MPT_DTYPE_F32, "b");
  HostTensor exact({n, out}, MPT_DTYPE_F32, "y32");
  mpt_launch_report report{};
  ASSERT_EQ(launch_reported("linear_forward", {&x, &w, &b}, {&exact}, {}, &report), MPT_OK) << mpt_last_error();
  EXPECT_EQ(report.filled & MPT_REPORTED_STORES, MPT_REPORTED_STORES);
  EXPECT_EQ(report.stores[0].narrowed, 0u) << "an f32 output is not narrowed";
  EXPECT_EQ(report.stores[0].results, 0u);

  for (int dtype : {MPT_DTYPE_F16, MPT_DTYPE_BF16}) {
    HostTensor y({n, out}, dtype, "y");
    report = mpt_launch_report{};
    ASSERT_EQ(launch_reported("linear_forward", {&x, &w, &b}, {&y}, {}, &report), MPT_OK) << mpt_last_error();
    const StoreCounts want = expected_store(exact, dtype);
    expect_store(report.stores[0], want, dtype == MPT_DTYPE_F16 ? "f16" : "bf16");
    if (dtype == MPT_DTYPE_F16) {  // the inputs were chosen so that every kind occurs
      EXPECT_GT(want.flushed, 1000u);
      EXPECT_GT(want.subnormal, 1000u);
      EXPECT_GT(want.overflowed, 1000u);
    }
    // The stored values are the rounding of the f32 result: the counts describe this very store.
    for (int64_t i = 0; i < y.numel(); i += 97)
      ASSERT_EQ(y.value(i), mpt_test::reference_round(exact.value(i), dtype)) << i;
  }
}

// bf16's own extremes, through the cast kernel: fp32 values above bf16's largest finite value
// overflow, and fp32 normals below 2^-126 become bf16 subnormals or zero.
TEST(LaunchReport, CastToBf16CountsOverflowAndSubnormals) {
  std::vector<double> v{3.4e38, -3.397e38, 1e-39, 1e-45, 2e-38, 0.0, 1.0, -1e-30};
  auto x = HostTensor::from_values({static_cast<int64_t>(v.size())}, v, MPT_DTYPE_F32, "x");
  HostTensor y({static_cast<int64_t>(v.size())}, MPT_DTYPE_BF16, "y");
  mpt_launch_report report{};
  ASSERT_EQ(launch_reported("cast", {&x}, {&y}, {}, &report), MPT_OK) << mpt_last_error();
  expect_store(report.stores[0], expected_store(x, MPT_DTYPE_BF16), "cast");
  EXPECT_EQ(report.stores[0].results, 7u);
  EXPECT_EQ(report.stores[0].overflowed, 2u);
}

// Without the flag nothing is written into a report, and a version 1 descriptor cannot ask.
TEST(LaunchReport, OnlyAVersion2DescriptorWithTheFlagAsks) {
  auto x = HostTensor::from_values({2}, {1.0, 2.0}, MPT_DTYPE_F32, "x");
  HostTensor y({2}, MPT_DTYPE_F16, "y");
  mpt_tensor in = x.view(), out = y.view();
  mpt_launch_report report{};
  report.filled = 77;
  mpt_launch_desc d{};
  d.abi_version = MPT_ABI_VERSION;
  d.kernel = "cast";
  d.inputs = &in;
  d.n_inputs = 1;
  d.outputs = &out;
  d.n_outputs = 1;
  d.report = &report;
  ASSERT_EQ(mpt_launch(&d), MPT_OK) << mpt_last_error();
  EXPECT_EQ(report.filled, 77u) << "no flag, no report";
  d.abi_version = 1;
  ASSERT_EQ(mpt_launch(&d), MPT_OK) << "version 1 descriptors are still taken: " << mpt_last_error();
  d.flags = MPT_LAUNCH_REPORT;
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("abi_version 2"), std::string::npos) << mpt_last_error();
  d.abi_version = MPT_ABI_VERSION;
  d.report = nullptr;
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_BAD_ARGUMENTS);
  d.report = &report;
  d.flags = 4;
  EXPECT_EQ(mpt_launch(&d), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("unknown flags"), std::string::npos) << mpt_last_error();
  EXPECT_EQ(mpt_abi_version(), MPT_ABI_VERSION);
}

float f32(double v) { return static_cast<float>(v); }

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

struct UpdateSums {
  uint64_t nonzero = 0, changed = 0, lost = 0;
  double computed_abs = 0, computed_sq = 0, applied_abs = 0, applied_sq = 0, weight_sq = 0;
};

// The counts and sums from the parameter before and after the step and the computed update u.
UpdateSums recount(const std::vector<double>& before, const HostTensor& after, const std::vector<double>& u) {
  UpdateSums s;
  for (size_t i = 0; i < before.size(); ++i) {
    const float p = f32(before[i]), q = f32(after.value(static_cast<int64_t>(i)));
    const bool changed = bits_of(p) != bits_of(q);
    s.nonzero += u[i] != 0 ? 1 : 0;
    s.changed += changed ? 1 : 0;
    s.lost += u[i] != 0 && !changed ? 1 : 0;
    const double applied = static_cast<double>(q) - static_cast<double>(p);
    s.computed_abs += std::fabs(u[i]);
    s.computed_sq += u[i] * u[i];
    s.applied_abs += std::fabs(applied);
    s.applied_sq += applied * applied;
    s.weight_sq += static_cast<double>(p) * p;
  }
  return s;
}

void expect_update(const mpt_launch_report& r, size_t elements, const UpdateSums& want) {
  ASSERT_EQ(r.filled & MPT_REPORTED_UPDATE, MPT_REPORTED_UPDATE);
  const mpt_update_counts& u = r.update;
  EXPECT_EQ(u.elements, elements);
  EXPECT_EQ(u.nonzero, want.nonzero);
  EXPECT_EQ(u.changed, want.changed);
  EXPECT_EQ(u.lost, want.lost);
  // Sums of the same doubles in another order: equal to a few ulps of the sum.
  EXPECT_NEAR(u.computed_abs_sum, want.computed_abs, 1e-12 * want.computed_abs);
  EXPECT_NEAR(u.computed_sq_sum, want.computed_sq, 1e-12 * want.computed_sq);
  EXPECT_NEAR(u.applied_abs_sum, want.applied_abs, 1e-12 * want.applied_abs + 1e-300);
  EXPECT_NEAR(u.applied_sq_sum, want.applied_sq, 1e-12 * want.applied_sq + 1e-300);
  EXPECT_NEAR(u.weight_sq_sum, want.weight_sq, 1e-12 * want.weight_sq);
}

// SGD without momentum at lr 1e-4 on weights near 1: in bf16 (spacing 2^-7 there) almost every
// update is lost, in f32 almost none; the computed update is -(lr * g) in fp32.
TEST(LaunchReport, SgdReportsTheUpdatesRoundingLost) {
  const int64_t n = 100000;
  const double lr = 1e-4;
  const std::vector<double> w0 = mpt_test::random_values(static_cast<size_t>(n), 0.5, 2.0, 21);
  std::vector<double> g = mpt_test::random_values(static_cast<size_t>(n), -3.0, 3.0, 22);
  for (int64_t i = 0; i < n; i += 10) g[static_cast<size_t>(i)] = 0.0;  // a tenth get no update
  auto grad = HostTensor::from_values({n}, g, MPT_DTYPE_F32, "g");
  for (int dtype : {MPT_DTYPE_BF16, MPT_DTYPE_F16, MPT_DTYPE_F32}) {
    auto p = HostTensor::from_values({n}, w0, dtype, "p");
    const std::vector<double> before = p.values();
    HostTensor buf({n}, MPT_DTYPE_F32, "momentum");
    std::vector<double> u(static_cast<size_t>(n));
    for (size_t i = 0; i < u.size(); ++i) u[i] = -static_cast<double>(f32(lr) * f32(g[i]));
    mpt_launch_report report{};
    Scalars s{{"lr", lr}, {"step", 1}};
    ASSERT_EQ(launch_reported("sgd_step", {&p, &grad, &buf}, {&p, &buf}, s, &report), MPT_OK) << mpt_last_error();
    const UpdateSums want = recount(before, p, u);
    SCOPED_TRACE(dtype == MPT_DTYPE_BF16 ? "bf16" : dtype == MPT_DTYPE_F16 ? "f16" : "f32");
    expect_update(report, static_cast<size_t>(n), want);
    EXPECT_EQ(want.nonzero, static_cast<uint64_t>(n - n / 10));
    if (dtype == MPT_DTYPE_BF16) {
      EXPECT_GT(want.lost, want.nonzero * 9 / 10);
    }
    if (dtype == MPT_DTYPE_F32) {
      EXPECT_LT(want.lost, want.nonzero / 100);
    } else {
      EXPECT_EQ(report.stores[0].narrowed, 1u) << "the parameter's store is counted";
    }
  }
}

// Stochastic rounding keeps the expected change: the applied magnitude is the computed one to
// within the draws' spread (about 0.5% here; the bound is 2%), although most elements stay put.
TEST(LaunchReport, StochasticRoundingAppliesTheComputedMagnitude) {
  const int64_t n = 100000;
  auto p = HostTensor::from_values({n}, mpt_test::random_values(static_cast<size_t>(n), 0.5, 2.0, 31), MPT_DTYPE_BF16, "p");
  auto grad = HostTensor::from_values({n}, mpt_test::random_values(static_cast<size_t>(n), -3.0, 3.0, 32), MPT_DTYPE_F32, "g");
  HostTensor buf({n}, MPT_DTYPE_F32, "momentum");
  mpt_launch_report report{};
  Scalars s{{"lr", 1e-4}, {"step", 1}, {"stochastic_rounding", 1}, {"seed", 3}};
  ASSERT_EQ(launch_reported("sgd_step", {&p, &grad, &buf}, {&p, &buf}, s, &report), MPT_OK) << mpt_last_error();
  const mpt_update_counts& u = report.update;
  EXPECT_GT(u.lost, u.nonzero / 2) << "most elements do not move";
  EXPECT_NEAR(u.applied_abs_sum / u.computed_abs_sum, 1.0, 0.02);
}

// AdamW on a bf16 parameter: every element has a nonzero computed update (nonzero gradient), so
// the lost ones are exactly those whose bits did not change.
TEST(LaunchReport, AdamWReportsItsUpdatesOnABf16Parameter) {
  const int64_t n = 50000;
  const std::vector<double> w0 = mpt_test::random_values(static_cast<size_t>(n), -2.0, 2.0, 41);
  auto p = HostTensor::from_values({n}, w0, MPT_DTYPE_BF16, "p");
  const std::vector<double> before = p.values();
  auto grad = HostTensor::from_values({n}, mpt_test::random_values(static_cast<size_t>(n), 0.1, 1.0, 42), MPT_DTYPE_F32, "g");
  HostTensor m({n}, MPT_DTYPE_F32, "exp_avg"), v({n}, MPT_DTYPE_F32, "exp_avg_sq");
  mpt_launch_report report{};
  Scalars s{{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}, {"step", 1}};
  ASSERT_EQ(launch_reported("adamw_step", {&p, &grad, &m, &v}, {&p, &m, &v}, s, &report), MPT_OK) << mpt_last_error();
  // The first step's update is about -lr * sign(g) - lr * wd * p: the sums need the kernel's
  // terms, so only the counts that before and after decide are recomputed.
  const UpdateSums seen = recount(before, p, std::vector<double>(static_cast<size_t>(n), 1.0));
  const mpt_update_counts& u = report.update;
  EXPECT_EQ(u.nonzero, static_cast<uint64_t>(n));
  EXPECT_EQ(u.changed, seen.changed);
  EXPECT_EQ(u.lost, static_cast<uint64_t>(n) - seen.changed);
  EXPECT_GT(u.lost, 0u);
  EXPECT_NEAR(u.applied_sq_sum, seen.applied_sq, 1e-12 * seen.applied_sq);
  EXPECT_NEAR(u.weight_sq_sum, seen.weight_sq, 1e-12 * seen.weight_sq);
  // Each computed update is within 1% of lr (1 + wd |p|), as Adam's first step normalises g away.
  EXPECT_NEAR(u.computed_abs_sum / static_cast<double>(n), 1e-3, 1e-3 * 0.03);
}

}  // namespace
