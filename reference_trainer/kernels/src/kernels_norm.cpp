// Group normalisation over x[N,C,*]: the C channels form `groups` groups of C/groups channels,
// each (sample, group) is normalised with its own mean and biased variance, then scaled by
// gamma[c] and shifted by beta[c]. Sums are accumulated in double and the statistics stored as
// f32 (mean, rstd = 1/sqrt(var + eps)); the normalisation itself runs in fp32 with those stored
// values, so forward and backward see the same numbers.
#include <cmath>
#include <vector>

#include "kernels.h"
#include "parallel.h"

namespace mpt::kernels {
namespace {

struct GroupLayout {
  int64_t n, c, spatial, groups;
  int64_t channels_per_group() const { return c / groups; }
  int64_t group_size() const { return channels_per_group() * spatial; }
  // Offset of the first element of (sample, group): a group's elements are contiguous.
  int64_t offset(int64_t sample, int64_t group) const { return (sample * c + group * channels_per_group()) * spatial; }
};

GroupLayout group_layout(const Launch& l, const TensorArg& x) {
  if (x->ndim < 2) l.fail(x.label + ": expected shape [N,C,...] with at least 2 dimensions, got " + shape_text(*x));
  GroupLayout g{x.dim(0), x.dim(1), 1, l.integer("groups", 1)};
  for (int i = 2; i < x->ndim; ++i) g.spatial *= x.dim(i);
  if (g.c % g.groups != 0)
    l.fail("scalar 'groups' = " + std::to_string(g.groups) + " does not divide the " + std::to_string(g.c) +
           " channels of " + x.label);
  if (g.spatial == 0) l.fail(x.label + ": empty spatial extent in shape " + shape_text(*x));
  return g;
}

void expect_stats(const Launch& l, const TensorArg& t, const GroupLayout& g) {
  l.expect_dtype(t, MPT_DTYPE_F32);
  l.expect_shape(t, {g.n, g.groups}, "[N,G]");
}

}  // namespace

void group_norm_forward(const Launch& l) {
  l.expect_counts(3, 3);
  TensorArg x = l.input(0, "x"), gamma = l.input(1, "gamma"), beta = l.input(2, "beta");
  TensorArg y = l.output(0, "y"), mean = l.output(1, "mean"), rstd = l.output(2, "rstd");
  for (const TensorArg* t : {&x, &gamma, &beta, &y}) l.expect_float(*t);
  GroupLayout g = group_layout(l, x);
  l.expect_shape(gamma, {g.c}, "[C]");
  l.expect_shape(beta, {g.c}, "[C]");
  l.expect_same_shape(y, x);
  expect_stats(l, mean, g);
  expect_stats(l, rstd, g);
  double eps = l.scalar("eps");
  if (!(eps >= 0.0)) l.fail("scalar 'eps' must be >= 0, got " + std::to_string(eps));

  F32Input xv(*x), gv(*gamma), bv(*beta);
  F32Output yv(*y);
  float* mean_out = static_cast<float*>(mean->data);
  float* rstd_out = static_cast<float*>(rstd->data);
  parallel_for(g.n * g.groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ng = begin; ng < end; ++ng) {
      int64_t sample = ng / g.groups, group = ng % g.groups, m = g.group_size();
      const float* in = xv.data() + g.offset(sample, group);
      double sum = 0.0;
      for (int64_t i = 0; i < m; ++i) sum += in[i];
      double mu = sum / static_cast<double>(m), squares = 0.0;
      for (int64_t i = 0; i < m; ++i) squares += (in[i] - mu) * (in[i] - mu);
      float mean_f = static_cast<float>(mu);
      float rstd_f = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(m) + eps));
      mean_out[ng] = mean_f;
      rstd_out[ng] = rstd_f;
      float* out = yv.data() + g.offset(sample, group);
      for (int64_t i = 0; i < m; ++i) {
        int64_t c = group * g.channels_per_group() + i / g.spatial;
        out[i] = (in[i] - mean_f) * rstd_f * gv[c] + bv[c];
      }
    }
  });
  yv.store();
}

void group_norm_backward(const Launch& l) {
  l.expect_counts(5, 3);
  TensorArg dy = l.input(0, "dy"), x = l.input(1, "x"), gamma = l.input(2, "gamma");
  TensorArg mean = l.input(3, "mean"), rstd = l.input(4, "rstd");
  TensorArg dx = l.output(0, "dx"), dgamma = l.output(1, "dgamma"), dbeta = l.output(2, "dbeta");
  for (const TensorArg* t : {&dy, &x, &gamma, &dx, &dgamma, &dbeta}) l.expect_float(*t);
  GroupLayout g = group_layout(l, x);
  l.expect_same_shape(dy, x);
  l.expect_same_shape(dx, x);
  for (const TensorArg* t : {&gamma, &dgamma, &dbeta}) l.expect_shape(*t, {g.c}, "[C]");
  expect_stats(l, mean, g);
  expect_stats(l, rstd, g);

  F32Input dyv(*dy), xv(*x), gv(*gamma);
  const float* mean_in = static_cast<const float*>(mean->data);
  const float* rstd_in = static_cast<const float*>(rstd->data);
  F32Output dxv(*dx), dgv(*dgamma), dbv(*dbeta);
  int64_t cpg = g.channels_per_group(), m = g.group_size();
  std::vector<double> dgamma_sum(static_cast<size_t>(g.c), 0.0), dbeta_sum(static_cast<size_t>(g.c), 0.0);
  for (int64_t sample = 0; sample < g.n; ++sample)
    for (int64_t group = 0; group < g.groups; ++group) {
      int64_t ng = sample * g.groups + group, base = g.offset(sample, group);
      float mu = mean_in[ng], rs = rstd_in[ng];
      double sum_dyg = 0.0, sum_dyg_xhat = 0.0;
      for (int64_t i = 0; i < m; ++i) {
        int64_t c = group * cpg + i / g.spatial;
        float xhat = (xv[base + i] - mu) * rs, d = dyv[base + i];
        dbeta_sum[c] += d;
        dgamma_sum[c] += static_cast<double>(d) * xhat;
        sum_dyg += static_cast<double>(d) * gv[c];
        sum_dyg_xhat += static_cast<double>(d) * gv[c] * xhat;
      }
      float mean_dyg = static_cast<float>(sum_dyg / m), mean_dyg_xhat = static_cast<float>(sum_dyg_xhat / m);
      for (int64_t i = 0; i < m; ++i) {
        int64_t c = group * cpg + i / g.spatial;
        float xhat = (xv[base + i] - mu) * rs;
        dxv[base + i] = rs * (dyv[base + i] * gv[c] - mean_dyg - xhat * mean_dyg_xhat);
      }
    }
  for (int64_t c = 0; c < g.c; ++c) {
    dgv[c] = static_cast<float>(dgamma_sum[c]);
    dbv[c] = static_cast<float>(dbeta_sum[c]);
  }
  dxv.store();
  dgv.store();
  dbv.store();
}

}  // namespace mpt::kernels
