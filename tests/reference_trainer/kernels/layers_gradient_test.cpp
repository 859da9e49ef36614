// Every backward kernel against central finite differences of the independent double forward
// implementations (reference_layers.h). Each test takes L = sum(r * layer(inputs)) with random
// weights r, launches the backward kernel with dy = r and compares every gradient element with
// (L(v + h) - L(v - h)) / 2h. Tolerance: 2e-4 * (1 + |finite difference|), far above the fp32
// rounding of the kernels (~1e-6 here) and the O(h^2) truncation error, far below any real error
// (a wrong index or a missing term moves a gradient by O(1)).
#include <gtest/gtest.h>

#include <functional>

#include "kernel_test_util.h"
#include "reference_layers.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::Scalars;
namespace ref = mpt_test::ref;
using Vec = std::vector<double>;

constexpr double kTolerance = 2e-4;

double weighted_sum(const Vec& r, const Vec& y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
  return s;
}

// Compares kernel gradients with central differences of loss(v) around the values of `at`.
void expect_gradient(const HostTensor& gradient, const Vec& at, const std::function<double(const Vec&)>& loss, double h,
                     const char* what) {
  ASSERT_EQ(gradient.numel(), static_cast<int64_t>(at.size())) << what;
  for (size_t i = 0; i < at.size(); ++i) {
    Vec plus = at, minus = at;
    plus[i] += h;
    minus[i] -= h;
    double fd = (loss(plus) - loss(minus)) / (2 * h);
    ASSERT_NEAR(gradient.value(static_cast<int64_t>(i)), fd, kTolerance * (1 + std::fabs(fd))) << what << " element " << i;
  }
}

HostTensor random_tensor(std::vector<int64_t> shape, double lo, double hi, uint32_t seed, const char* name) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return HostTensor::from_values(shape, mpt_test::random_values(static_cast<size_t>(n), lo, hi, seed), MPT_DTYPE_F32, name);
}

TEST(Gradients, Conv2dDataWeightAndBias) {
  const ref::ConvShape cases[] = {{2, 2, 5, 6, 3, 3, 3, 1, 1}, {2, 3, 7, 7, 2, 3, 3, 2, 1}, {1, 2, 6, 5, 2, 2, 3, 1, 0}};
  uint32_t seed = 100;
  for (const auto& g : cases) {
    auto x = random_tensor({g.n, g.c, g.h, g.w}, -1, 1, seed++, "x");
    auto w = random_tensor({g.k, g.c, g.r, g.s}, -1, 1, seed++, "w");
    auto b = random_tensor({g.k}, -1, 1, seed++, "b");
    auto dy = random_tensor({g.n, g.k, g.p(), g.q()}, -1, 1, seed++, "dy");
    HostTensor dx({g.n, g.c, g.h, g.w}, MPT_DTYPE_F32, "dx"), dw({g.k, g.c, g.r, g.s}, MPT_DTYPE_F32, "dw");
    HostTensor db({g.k}, MPT_DTYPE_F32, "db");
    Scalars s{{"stride", g.stride}, {"padding", g.pad}, {"partials_fp16", 0}};
    ASSERT_EQ(launch("conv2d_backward_data", {&dy, &w}, {&dx}, s), MPT_OK) << mpt_last_error();
    ASSERT_EQ(launch("conv2d_backward_weight", {&dy, &x}, {&dw, &db}, s), MPT_OK) << mpt_last_error();
    Vec r = dy.values(), xv = x.values(), wv = w.values(), bv = b.values();
    expect_gradient(dx, xv, [&](const Vec& v) { return weighted_sum(r, ref::conv2d(g, v, wv, bv)); }, 1e-3, "conv dx");
    expect_gradient(dw, wv, [&](const Vec& v) { return weighted_sum(r, ref::conv2d(g, xv, v, bv)); }, 1e-3, "conv dw");
    expect_gradient(db, bv, [&](const Vec& v) { return weighted_sum(r, ref::conv2d(g, xv, wv, v)); }, 1e-3, "conv db");
  }
}

TEST(Gradients, LinearDataWeightAndBias) {
  const int64_t n = 4, in = 9, out = 5;
  auto x = random_tensor({n, in}, -1, 1, 200, "x"), w = random_tensor({out, in}, -1, 1, 201, "w");
  auto b = random_tensor({out}, -1, 1, 202, "b"), dy = random_tensor({n, out}, -1, 1, 203, "dy");
  HostTensor dx({n, in}, MPT_DTYPE_F32, "dx"), dw({out, in}, MPT_DTYPE_F32, "dw"), db({out}, MPT_DTYPE_F32, "db");
  ASSERT_EQ(launch("linear_backward_data", {&dy, &w}, {&dx}), MPT_OK) << mpt_last_error();
  ASSERT_EQ(launch("linear_backward_weight", {&dy, &x}, {&dw, &db}), MPT_OK) << mpt_last_error();
  Vec r = dy.values(), xv = x.values(), wv = w.values(), bv = b.values();
  expect_gradient(dx, xv, [&](const Vec& v) { return weighted_sum(r, ref::linear(n, in, out, v, wv, bv)); }, 1e-3, "linear dx");
  expect_gradient(dw, wv, [&](const Vec& v) { return weighted_sum(r, ref::linear(n, in, out, xv, v, bv)); }, 1e-3, "linear dw");
  expect_gradient(db, bv, [&](const Vec& v) { return weighted_sum(r, ref::linear(n, in, out, xv, wv, v)); }, 1e-3, "linear db");
}

TEST(Gradients, Relu) {
  auto values = mpt_test::random_values(60, -1, 1, 300);
  for (double& v : values) v += v < 0 ? -0.05 : 0.05;  // keep away from the kink at 0
  auto x = HostTensor::from_values({3, 20}, values, MPT_DTYPE_F32, "x");
  auto dy = random_tensor({3, 20}, -1, 1, 301, "dy");
  HostTensor y({3, 20}, MPT_DTYPE_F32, "y"), dx({3, 20}, MPT_DTYPE_F32, "dx");
  ASSERT_EQ(launch("relu_forward", {&x}, {&y}), MPT_OK);
  ASSERT_EQ(launch("relu_backward", {&dy, &y}, {&dx}), MPT_OK) << mpt_last_error();
  Vec r = dy.values();
  expect_gradient(dx, x.values(), [&](const Vec& v) { return weighted_sum(r, ref::relu(v)); }, 1e-3, "relu dx");
}

TEST(Gradients, MaxPoolIncludingOverlappingWindows) {
  struct Case { int64_t h, w, k, stride; };
  for (Case c : {Case{6, 6, 2, 2}, Case{7, 7, 3, 2}, Case{5, 4, 2, 1}}) {
    const int64_t planes = 2 * 3, p = (c.h - c.k) / c.stride + 1, q = (c.w - c.k) / c.stride + 1;
    auto x = random_tensor({2, 3, c.h, c.w}, -1, 1, 400 + static_cast<uint32_t>(c.h), "x");
    auto dy = random_tensor({2, 3, p, q}, -1, 1, 410, "dy");
    HostTensor y({2, 3, p, q}, MPT_DTYPE_F32, "y"), argmax({2, 3, p, q}, MPT_DTYPE_I32, "argmax");
    HostTensor dx({2, 3, c.h, c.w}, MPT_DTYPE_F32, "dx");
    ASSERT_EQ(launch("maxpool2d_forward", {&x}, {&y, &argmax}, {{"kernel", c.k}, {"stride", c.stride}}), MPT_OK) << mpt_last_error();
    ASSERT_EQ(launch("maxpool2d_backward", {&dy, &argmax}, {&dx}), MPT_OK) << mpt_last_error();
    Vec r = dy.values();
    expect_gradient(dx, x.values(), [&](const Vec& v) { return weighted_sum(r, ref::maxpool(planes, c.h, c.w, c.k, c.stride, v)); },
                    1e-6, "maxpool dx");
  }
}

TEST(Gradients, GroupNormInputGammaAndBeta) {
  const int64_t n = 2, c = 6, h = 3, w = 4, groups = 3;
  const double eps = 1e-5;
  auto x = random_tensor({n, c, h, w}, -2, 2, 500, "x"), gamma = random_tensor({c}, 0.5, 1.5, 501, "gamma");
  auto beta = random_tensor({c}, -0.5, 0.5, 502, "beta"), dy = random_tensor({n, c, h, w}, -1, 1, 503, "dy");
  HostTensor y({n, c, h, w}, MPT_DTYPE_F32, "y"), mean({n, groups}, MPT_DTYPE_F32, "mean"), rstd({n, groups}, MPT_DTYPE_F32, "rstd");
  HostTensor dx({n, c, h, w}, MPT_DTYPE_F32, "dx"), dgamma({c}, MPT_DTYPE_F32, "dgamma"), dbeta({c}, MPT_DTYPE_F32, "dbeta");
  Scalars s{{"groups", groups}, {"eps", eps}};
  ASSERT_EQ(launch("group_norm_forward", {&x, &gamma, &beta}, {&y, &mean, &rstd}, s), MPT_OK) << mpt_last_error();
  ASSERT_EQ(launch("group_norm_backward", {&dy, &x, &gamma, &mean, &rstd}, {&dx, &dgamma, &dbeta}, s), MPT_OK) << mpt_last_error();
  Vec r = dy.values(), xv = x.values(), gv = gamma.values(), bv = beta.values();
  auto forward = [&](const Vec& xs, const Vec& gs, const Vec& bs) { return ref::group_norm(n, c, h * w, groups, eps, xs, gs, bs); };
  expect_gradient(dx, xv, [&](const Vec& v) { return weighted_sum(r, forward(v, gv, bv)); }, 1e-4, "group norm dx");
  expect_gradient(dgamma, gv, [&](const Vec& v) { return weighted_sum(r, forward(xv, v, bv)); }, 1e-4, "group norm dgamma");
  expect_gradient(dbeta, bv, [&](const Vec& v) { return weighted_sum(r, forward(xv, gv, v)); }, 1e-4, "group norm dbeta");
}

TEST(Gradients, LogSoftmax) {
  const int64_t rows = 4, cols = 7;
  auto x = random_tensor({rows, cols}, -3, 3, 600, "x"), dy = random_tensor({rows, cols}, -1, 1, 601, "dy");
  HostTensor y({rows, cols}, MPT_DTYPE_F32, "y"), dx({rows, cols}, MPT_DTYPE_F32, "dx");
  ASSERT_EQ(launch("log_softmax_forward", {&x}, {&y}), MPT_OK);
  ASSERT_EQ(launch("log_softmax_backward", {&dy, &y}, {&dx}), MPT_OK) << mpt_last_error();
  Vec r = dy.values();
  expect_gradient(dx, x.values(), [&](const Vec& v) { return weighted_sum(r, ref::log_softmax(rows, cols, v)); }, 1e-4, "log-softmax dx");
}

TEST(Gradients, NllLossWithAndWithoutLossScale) {
  const int64_t n = 5, classes = 4;
  std::vector<int32_t> labels{3, 0, 1, 3, 2};
  auto logp = random_tensor({n, classes}, -3, 0, 700, "logp");
  auto label_tensor = mpt_test::HostTensor::i32({n}, labels);
  for (double scale : {1.0, 1024.0}) {
    auto scale_tensor = HostTensor::from_values({1}, {scale}, MPT_DTYPE_F32, "scale");
    HostTensor dlogp({n, classes}, MPT_DTYPE_F32, "dlogp");
    ASSERT_EQ(launch("nll_loss_backward", {&label_tensor, &scale_tensor}, {&dlogp}), MPT_OK) << mpt_last_error();
    expect_gradient(dlogp, logp.values(), [&](const Vec& v) { return scale * ref::nll(n, classes, v, labels); }, 1e-3, "nll dlogp");
  }
}

}  // namespace
