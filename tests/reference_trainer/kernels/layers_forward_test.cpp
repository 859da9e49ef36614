// Forward kernels against the independent double references of reference_layers.h (fp32 outputs
// within a bound proportional to the sum of magnitudes of the terms), 16-bit outputs equal to the
// round-to-nearest-even of the fp32 result, 16-bit inputs read exactly, and fp16 partials that
// follow the documented accumulator recurrence and visibly differ from fp32 partials.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "reference_layers.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::Scalars;
namespace ref = mpt_test::ref;

constexpr int kFloatTypes[] = {MPT_DTYPE_F32, MPT_DTYPE_F16, MPT_DTYPE_BF16};

// fp32 accumulation of `terms` values: allow terms * 2^-23 relative to the magnitude sum.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& magnitude,
                  double terms, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], (terms + 2) * 1.2e-7 * magnitude[i] + 1e-30) << what << " element " << i;
}

// Checks that an output of 16-bit dtype holds exactly RNE(fp32 output) for every element.
void expect_rounded(const HostTensor& wide, const HostTensor& narrow, const char* what) {
  for (int64_t i = 0; i < wide.numel(); ++i)
    ASSERT_EQ(narrow.value(i), static_cast<double>(mpt_test::reference_round(wide.value(i), narrow.dtype())))
        << what << " element " << i;
}

struct ConvCase {
  ref::ConvShape shape;
};

TEST(ForwardKernels, Conv2dMatchesDoubleReference) {
  const ref::ConvShape cases[] = {{2, 3, 7, 6, 4, 3, 3, 1, 1}, {1, 2, 9, 9, 3, 3, 3, 2, 1},
                                  {3, 4, 5, 5, 2, 1, 1, 1, 0}, {2, 1, 8, 8, 5, 5, 5, 1, 2}};
  uint32_t seed = 1;
  for (const auto& g : cases)
    for (int in_type : kFloatTypes) {
      auto x = HostTensor::from_values({g.n, g.c, g.h, g.w}, mpt_test::random_values(g.n * g.c * g.h * g.w, -1, 1, seed++), in_type, "x");
      auto w = HostTensor::from_values({g.k, g.c, g.r, g.s}, mpt_test::random_values(g.k * g.c * g.r * g.s, -1, 1, seed++), in_type, "w");
      auto b = HostTensor::from_values({g.k}, mpt_test::random_values(g.k, -1, 1, seed++), in_type, "b");
      HostTensor y({g.n, g.k, g.p(), g.q()}, MPT_DTYPE_F32, "y");
      Scalars s{{"stride", g.stride}, {"padding", g.pad}, {"partials_fp16", 0}};
      ASSERT_EQ(launch("conv2d_forward", {&x, &w, &b}, {&y}, s), MPT_OK) << mpt_last_error();
      auto want = ref::conv2d(g, x.values(), w.values(), b.values());
      std::vector<double> xa = x.values(), wa = w.values(), ba = b.values();
      for (double& v : xa) v = std::fabs(v);
      for (double& v : wa) v = std::fabs(v);
      for (double& v : ba) v = std::fabs(v);
      expect_close(y.values(), want, ref::conv2d(g, xa, wa, ba), static_cast<double>(g.c * g.r * g.s), "conv2d");
      for (int out_type : {MPT_DTYPE_F16, MPT_DTYPE_BF16}) {
        HostTensor y16({g.n, g.k, g.p(), g.q()}, out_type, "y16");
        ASSERT_EQ(launch("conv2d_forward", {&x, &w, &b}, {&y16}, s), MPT_OK) << mpt_last_error();
        expect_rounded(y, y16, "conv2d 16-bit output");
      }
    }
}

TEST(ForwardKernels, LinearMatchesDoubleReference) {
  const int64_t n = 5, in = 37, out = 11;
  for (int in_type : kFloatTypes) {
    auto x = HostTensor::from_values({n, in}, mpt_test::random_values(n * in, -2, 2, 10), in_type, "x");
    auto w = HostTensor::from_values({out, in}, mpt_test::random_values(out * in, -1, 1, 11), in_type, "w");
    auto b = HostTensor::from_values({out}, mpt_test::random_values(out, -1, 1, 12), in_type, "b");
    HostTensor y({n, out}, MPT_DTYPE_F32, "y");
    ASSERT_EQ(launch("linear_forward", {&x, &w, &b}, {&y}, {{"partials_fp16", 0}}), MPT_OK) << mpt_last_error();
    std::vector<double> xa = x.values(), wa = w.values(), ba = b.values();
    for (double& v : xa) v = std::fabs(v);
    for (double& v : wa) v = std::fabs(v);
    for (double& v : ba) v = std::fabs(v);
    expect_close(y.values(), ref::linear(n, in, out, x.values(), w.values(), b.values()),
                 ref::linear(n, in, out, xa, wa, ba), in, "linear");
    for (int out_type : {MPT_DTYPE_F16, MPT_DTYPE_BF16}) {
      HostTensor y16({n, out}, out_type, "y16");
      ASSERT_EQ(launch("linear_forward", {&x, &w, &b}, {&y16}), MPT_OK) << mpt_last_error();
      expect_rounded(y, y16, "linear 16-bit output");
    }
  }
}

TEST(ForwardKernels, PointwiseLayersMatchDoubleReference) {
  const int64_t n = 3, c = 4, h = 6, w = 6;
  auto values = mpt_test::random_values(n * c * h * w, -3, 3, 20);
  for (int in_type : kFloatTypes) {
    auto x = HostTensor::from_values({n, c, h, w}, values, in_type, "x");
    HostTensor y({n, c, h, w}, MPT_DTYPE_F32, "y"), pooled({n, c, 3, 3}, MPT_DTYPE_F32, "pooled");
    HostTensor argmax({n, c, 3, 3}, MPT_DTYPE_I32, "argmax");
    ASSERT_EQ(launch("relu_forward", {&x}, {&y}), MPT_OK) << mpt_last_error();
    EXPECT_EQ(y.values(), ref::relu(x.values()));
    ASSERT_EQ(launch("maxpool2d_forward", {&x}, {&pooled, &argmax}, {{"kernel", 2}, {"stride", 2}}), MPT_OK);
    EXPECT_EQ(pooled.values(), ref::maxpool(n * c, h, w, 2, 2, x.values()));
    for (int64_t i = 0; i < pooled.numel(); ++i)
      EXPECT_EQ(x.value(i / 9 * h * w + argmax.i32_at(i)), pooled.value(i)) << "argmax points at the maximum";

    HostTensor gamma = HostTensor::from_values({c}, {0.5, 1.5, -1.0, 2.0}, in_type, "gamma");
    HostTensor beta = HostTensor::from_values({c}, {0.1, -0.2, 0.3, 0.0}, in_type, "beta");
    HostTensor mean({n, 2}, MPT_DTYPE_F32, "mean"), rstd({n, 2}, MPT_DTYPE_F32, "rstd");
    ASSERT_EQ(launch("group_norm_forward", {&x, &gamma, &beta}, {&y, &mean, &rstd}, {{"groups", 2}, {"eps", 1e-5}}), MPT_OK)
        << mpt_last_error();
    auto want = ref::group_norm(n, c, h * w, 2, 1e-5, x.values(), gamma.values(), beta.values());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.value(static_cast<int64_t>(i)), want[i], 2e-6 * (1 + std::fabs(want[i])));

    auto logits = HostTensor::from_values({n * c, h * w}, values, in_type, "logits");
    HostTensor logp({n * c, h * w}, MPT_DTYPE_F32, "logp");
    ASSERT_EQ(launch("log_softmax_forward", {&logits}, {&logp}), MPT_OK);
    auto want_logp = ref::log_softmax(n * c, h * w, logits.values());
    for (size_t i = 0; i < want_logp.size(); ++i) ASSERT_NEAR(logp.value(static_cast<int64_t>(i)), want_logp[i], 2e-6 * (1 + std::fabs(want_logp[i])));

    for (int out_type : {MPT_DTYPE_F16, MPT_DTYPE_BF16}) {
      HostTensor y16({n, c, h, w}, out_type, "y16"), logp16({n * c, h * w}, out_type, "logp16");
      ASSERT_EQ(launch("group_norm_forward", {&x, &gamma, &beta}, {&y16, &mean, &rstd}, {{"groups", 2}, {"eps", 1e-5}}), MPT_OK);
      expect_rounded(y, y16, "group norm 16-bit output");
      ASSERT_EQ(launch("log_softmax_forward", {&logits}, {&logp16}), MPT_OK);
      expect_rounded(logp, logp16, "log-softmax 16-bit output");
    }
  }
}

TEST(ForwardKernels, NllLossAndAccuracy) {
  const int64_t n = 4, classes = 5;
  auto logp = HostTensor::from_values({n, classes}, mpt_test::random_values(n * classes, -4, 0, 30), MPT_DTYPE_F32, "logp");
  std::vector<int32_t> labels{0, 4, 2, 2};
  auto label_tensor = HostTensor::i32({n}, labels);
  HostTensor loss({1}, MPT_DTYPE_F32, "loss"), correct({1}, MPT_DTYPE_I32, "correct");
  ASSERT_EQ(launch("nll_loss_forward", {&logp, &label_tensor}, {&loss}), MPT_OK) << mpt_last_error();
  EXPECT_NEAR(loss.value(0), ref::nll(n, classes, logp.values(), labels), 1e-6);
  ASSERT_EQ(launch("accuracy_count", {&logp, &label_tensor}, {&correct}), MPT_OK) << mpt_last_error();
  int expected = 0;
  bool row0_correct = false;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (logp.value(i * classes + c) > logp.value(i * classes + best)) best = c;
    expected += best == labels[static_cast<size_t>(i)];
    if (i == 0) row0_correct = best == labels[0];
  }
  EXPECT_EQ(correct.i32_at(0), expected);
  logp.set(1, NAN);  // a row with a NaN never counts
  ASSERT_EQ(launch("accuracy_count", {&logp, &label_tensor}, {&correct}), MPT_OK);
  EXPECT_EQ(correct.i32_at(0), expected - (row0_correct ? 1 : 0));
}

TEST(ForwardKernels, NanPropagatesThroughReluPoolAndLogSoftmax) {
  auto x = HostTensor::from_values({1, 1, 2, 2}, {1.0, -2.0, 3.0, 0.5}, MPT_DTYPE_F32, "x");
  x.set(1, NAN);
  HostTensor y({1, 1, 2, 2}, MPT_DTYPE_F16, "y"), pooled({1, 1, 1, 1}, MPT_DTYPE_F32, "p"), idx({1, 1, 1, 1}, MPT_DTYPE_I32, "i");
  ASSERT_EQ(launch("relu_forward", {&x}, {&y}), MPT_OK);
  EXPECT_TRUE(std::isnan(y.value(1)));
  ASSERT_EQ(launch("maxpool2d_forward", {&x}, {&pooled, &idx}, {{"kernel", 2}}), MPT_OK);
  EXPECT_TRUE(std::isnan(pooled.value(0)));
  EXPECT_EQ(idx.i32_at(0), 1);
  auto logits = HostTensor::from_values({1, 4}, {1.0, 0.0, 2.0, 3.0}, MPT_DTYPE_F32, "logits");
  logits.set(2, NAN);
  HostTensor logp({1, 4}, MPT_DTYPE_F32, "logp");
  ASSERT_EQ(launch("log_softmax_forward", {&logits}, {&logp}), MPT_OK);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(logp.value(i)));
}

// The recurrence of docs/kernels.md: acc = fp16(fmaf(a, b, acc)), in k order, from 0.
std::vector<double> f16_accumulated_product(int64_t n, int64_t in, int64_t out, const HostTensor& x, const HostTensor& w) {
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0.0f;
      for (int64_t k = 0; k < in; ++k)
        acc = static_cast<float>(mpt_test::reference_round_f16(
            std::fma(static_cast<float>(x.value(i * in + k)), static_cast<float>(w.value(o * in + k)), acc)));
      y[static_cast<size_t>(i * out + o)] = acc;
    }
  return y;
}

TEST(ForwardKernels, Fp16PartialsFollowTheAccumulatorRecurrence) {
  // Column counts straddle the vector widths (16, 64) so every path of the product is used.
  for (int64_t out : {1, 7, 16, 23, 64, 100}) {
    const int64_t n = 3, in = 50;
    auto x = HostTensor::from_values({n, in}, mpt_test::random_values(n * in, -1, 1, 40), MPT_DTYPE_F16, "x");
    auto w = HostTensor::from_values({out, in}, mpt_test::random_values(out * in, -1, 1, 41), MPT_DTYPE_F16, "w");
    auto b = HostTensor::from_values({out}, std::vector<double>(static_cast<size_t>(out), 0.0), MPT_DTYPE_F32, "b");
    HostTensor y({n, out}, MPT_DTYPE_F32, "y");
    ASSERT_EQ(launch("linear_forward", {&x, &w, &b}, {&y}, {{"partials_fp16", 1}}), MPT_OK) << mpt_last_error();
    EXPECT_EQ(y.values(), f16_accumulated_product(n, in, out, x, w)) << "out = " << out;
  }
}

// The same recurrence for convolutions: forward sums over (c, r, s) in order (padding terms are
// products with 0 and leave the accumulator unchanged); the weight gradient sums over
// (image, p, q) in batch order, the bias gradient likewise with plain additions.
TEST(ForwardKernels, Fp16PartialsInConvolutionsFollowTheRecurrence) {
  const ref::ConvShape g{3, 3, 9, 8, 5, 3, 3, 1, 1};
  auto x = HostTensor::from_values({g.n, g.c, g.h, g.w}, mpt_test::random_values(g.n * g.c * g.h * g.w, -1, 1, 50), MPT_DTYPE_F16, "x");
  auto w = HostTensor::from_values({g.k, g.c, g.r, g.s}, mpt_test::random_values(g.k * g.c * 9, -1, 1, 51), MPT_DTYPE_F16, "w");
  auto b = HostTensor::from_values({g.k}, mpt_test::random_values(g.k, -1, 1, 52), MPT_DTYPE_F32, "b");
  auto dy = HostTensor::from_values({g.n, g.k, g.p(), g.q()}, mpt_test::random_values(g.n * g.k * g.p() * g.q(), -1, 1, 53), MPT_DTYPE_F16, "dy");
  HostTensor y({g.n, g.k, g.p(), g.q()}, MPT_DTYPE_F32, "y"), dw({g.k, g.c, g.r, g.s}, MPT_DTYPE_F32, "dw"), db({g.k}, MPT_DTYPE_F32, "db");
  Scalars s{{"stride", g.stride}, {"padding", g.pad}, {"partials_fp16", 1}};
  ASSERT_EQ(launch("conv2d_forward", {&x, &w, &b}, {&y}, s), MPT_OK) << mpt_last_error();
  ASSERT_EQ(launch("conv2d_backward_weight", {&dy, &x}, {&dw, &db}, s), MPT_OK) << mpt_last_error();
  auto xv = x.values(), wv = w.values(), dyv = dy.values();
  auto at = [&](int64_t n, int64_t c, int64_t yy, int64_t xx) {
    return yy < 0 || yy >= g.h || xx < 0 || xx >= g.w ? 0.0f : static_cast<float>(xv[((n * g.c + c) * g.h + yy) * g.w + xx]);
  };
  auto round16 = [](float v) { return static_cast<float>(mpt_test::reference_round_f16(v)); };
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t i = 0; i < g.p(); ++i)
        for (int64_t j = 0; j < g.q(); ++j) {
          float acc = 0.0f;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t r = 0; r < g.r; ++r)
              for (int64_t t = 0; t < g.s; ++t)
                acc = round16(std::fma(static_cast<float>(wv[((k * g.c + c) * g.r + r) * g.s + t]), at(n, c, i + r - g.pad, j + t - g.pad), acc));
          ASSERT_EQ(y.value(((n * g.k + k) * g.p() + i) * g.q() + j), acc + static_cast<float>(b.value(k)));
        }
  for (int64_t k = 0; k < g.k; ++k) {
    float bias_acc = 0.0f;
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t i = 0; i < g.p() * g.q(); ++i) bias_acc = round16(bias_acc + static_cast<float>(dyv[(n * g.k + k) * g.p() * g.q() + i]));
    ASSERT_EQ(db.value(k), bias_acc);
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t t = 0; t < g.s; ++t) {
          float acc = 0.0f;
          for (int64_t n = 0; n < g.n; ++n)
            for (int64_t i = 0; i < g.p(); ++i)
              for (int64_t j = 0; j < g.q(); ++j)
                acc = round16(std::fma(static_cast<float>(dyv[((n * g.k + k) * g.p() + i) * g.q() + j]), at(n, c, i + r - g.pad, j + t - g.pad), acc));
          ASSERT_EQ(dw.value(((k * g.c + c) * g.r + r) * g.s + t), acc) << k << "," << c << "," << r << "," << t;
        }
  }
}

// The data gradient with fp16 partials: each window term sums over k (the recurrence), then the
// overlapping windows add into dx in (r, s) order, every addition rounded to fp16.
TEST(ForwardKernels, Fp16PartialsInConvolutionDataGradientFollowTheRecurrence) {
  for (const ref::ConvShape& g : {ref::ConvShape{2, 3, 8, 7, 4, 3, 3, 1, 1}, ref::ConvShape{2, 2, 9, 9, 3, 3, 3, 2, 1}}) {
    auto w = HostTensor::from_values({g.k, g.c, g.r, g.s}, mpt_test::random_values(g.k * g.c * 9, -1, 1, 60), MPT_DTYPE_F16, "w");
    auto dy = HostTensor::from_values({g.n, g.k, g.p(), g.q()}, mpt_test::random_values(g.n * g.k * g.p() * g.q(), -1, 1, 61), MPT_DTYPE_F16, "dy");
    HostTensor dx({g.n, g.c, g.h, g.w}, MPT_DTYPE_F32, "dx");
    ASSERT_EQ(launch("conv2d_backward_data", {&dy, &w}, {&dx}, {{"stride", g.stride}, {"padding", g.pad}, {"partials_fp16", 1}}), MPT_OK)
        << mpt_last_error();
    auto wv = w.values(), dyv = dy.values();
    auto round16 = [](float v) { return static_cast<float>(mpt_test::reference_round_f16(v)); };
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t yy = 0; yy < g.h; ++yy)
          for (int64_t xx = 0; xx < g.w; ++xx) {
            float acc = 0.0f;
            for (int64_t r = 0; r < g.r; ++r)
              for (int64_t t = 0; t < g.s; ++t) {
                int64_t py = yy + g.pad - r, qx = xx + g.pad - t;
                if (py < 0 || qx < 0 || py % g.stride || qx % g.stride || py / g.stride >= g.p() || qx / g.stride >= g.q()) continue;
                float term = 0.0f;
                for (int64_t k = 0; k < g.k; ++k)
                  term = round16(std::fma(static_cast<float>(wv[((k * g.c + c) * g.r + r) * g.s + t]),
                                          static_cast<float>(dyv[((n * g.k + k) * g.p() + py / g.stride) * g.q() + qx / g.stride]), term));
                acc = round16(acc + term);
              }
            ASSERT_EQ(dx.value(((n * g.c + c) * g.h + yy) * g.w + xx), acc) << "stride " << g.stride;
          }
  }
}

TEST(ForwardKernels, Fp16PartialsLoseSmallTermsThatFp32Keeps) {
  // One large term then 1000 terms of 2^-12: an fp16 accumulator at 1.0 has a half-ulp of 2^-11,
  // so each small term rounds away; fp32 keeps them all.
  const int64_t in = 1001;
  std::vector<double> xv(in, std::ldexp(1.0, -12));
  xv[0] = 1.0;
  auto x = HostTensor::from_values({1, in}, xv, MPT_DTYPE_F16, "x");
  auto w = HostTensor::from_values({1, in}, std::vector<double>(in, 1.0), MPT_DTYPE_F16, "w");
  auto b = HostTensor::from_values({1}, {0.0}, MPT_DTYPE_F32, "b");
  HostTensor y32({1, 1}, MPT_DTYPE_F32, "y"), y16({1, 1}, MPT_DTYPE_F32, "y");
  ASSERT_EQ(launch("linear_forward", {&x, &w, &b}, {&y32}, {{"partials_fp16", 0}}), MPT_OK);
  ASSERT_EQ(launch("linear_forward", {&x, &w, &b}, {&y16}, {{"partials_fp16", 1}}), MPT_OK);
  EXPECT_EQ(y32.value(0), 1.0 + 1000 * std::ldexp(1.0, -12));
  EXPECT_EQ(y16.value(0), 1.0);

  // The same effect in a convolution: a 1x1 filter over 300 channels.
  auto cx = HostTensor::from_values({1, 300, 1, 1}, std::vector<double>(300, std::ldexp(1.0, -12)), MPT_DTYPE_F16, "x");
  cx.set(0, 1.0);
  auto cw = HostTensor::from_values({1, 300, 1, 1}, std::vector<double>(300, 1.0), MPT_DTYPE_F16, "w");
  HostTensor cy32({1, 1, 1, 1}, MPT_DTYPE_F32, "y"), cy16({1, 1, 1, 1}, MPT_DTYPE_F32, "y");
  Scalars s{{"stride", 1}, {"padding", 0}, {"partials_fp16", 0}};
  ASSERT_EQ(launch("conv2d_forward", {&cx, &cw, &b}, {&cy32}, s), MPT_OK) << mpt_last_error();
  s[2].second = 1;
  ASSERT_EQ(launch("conv2d_forward", {&cx, &cw, &b}, {&cy16}, s), MPT_OK);
  EXPECT_EQ(cy32.value(0), 1.0 + 299 * std::ldexp(1.0, -12));
  EXPECT_EQ(cy16.value(0), 1.0);
}

TEST(ForwardKernels, CastFillCopyAndInjectFault) {
  auto x = HostTensor::from_values({5}, {1.0, 65519.0, 1e-8, -3.14159, 70000.0}, MPT_DTYPE_F32, "x");
  HostTensor h({5}, MPT_DTYPE_F16, "h"), b({5}, MPT_DTYPE_BF16, "b"), back({5}, MPT_DTYPE_F32, "back");
  ASSERT_EQ(launch("cast", {&x}, {&h}), MPT_OK);
  ASSERT_EQ(launch("cast", {&h}, {&b}), MPT_OK);
  ASSERT_EQ(launch("cast", {&b}, {&back}), MPT_OK);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(h.value(i), mpt_test::reference_round_f16(static_cast<float>(x.value(i))));
    EXPECT_EQ(b.value(i), mpt_test::reference_round_bf16(h.value(i)));
    EXPECT_EQ(back.value(i), b.value(i));
  }
  EXPECT_TRUE(std::isinf(h.value(4)));
  ASSERT_EQ(launch("fill", {}, {&h}, {{"value", 0.1}}), MPT_OK);
  EXPECT_EQ(h.value(3), mpt_test::reference_round_f16(0.1f));
  HostTensor h2({5}, MPT_DTYPE_F16, "h2");
  ASSERT_EQ(launch("copy", {&h}, {&h2}), MPT_OK);
  EXPECT_EQ(h2.bits16(2), h.bits16(2));
  for (int kind : {0, 1, 2}) {
    ASSERT_EQ(launch("inject_fault", {&h2}, {&h2}, {{"index", 2 + kind}, {"kind", kind}}), MPT_OK) << mpt_last_error();
  }
  EXPECT_TRUE(std::isnan(h2.value(2)));
  EXPECT_EQ(h2.value(3), INFINITY);
  EXPECT_EQ(h2.value(4), -INFINITY);
  EXPECT_EQ(h2.value(1), h.value(1));
}

}  // namespace
