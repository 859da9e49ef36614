// Independent double-precision forward implementations of the layers, written for the tests
// from the definitions (not from the library's code): the reference for forward values and the
// function whose central finite differences check every gradient.
#ifndef MPT_TESTS_REFERENCE_LAYERS_H
#define MPT_TESTS_REFERENCE_LAYERS_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace mpt_test::ref {

using Vec = std::vector<double>;

struct ConvShape {
  int64_t n, c, h, w, k, r, s, stride, pad;
  int64_t p() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t q() const { return (w + 2 * pad - s) / stride + 1; }
};

inline Vec conv2d(const ConvShape& g, const Vec& x, const Vec& w, const Vec& b) {
  Vec y(static_cast<size_t>(g.n * g.k * g.p() * g.q()));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t i = 0; i < g.p(); ++i)
        for (int64_t j = 0; j < g.q(); ++j) {
          double sum = b[k];
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t r = 0; r < g.r; ++r)
              for (int64_t s = 0; s < g.s; ++s) {
                int64_t yy = i * g.stride + r - g.pad, xx = j * g.stride + s - g.pad;
                if (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
                  sum += x[((n * g.c + c) * g.h + yy) * g.w + xx] * w[((k * g.c + c) * g.r + r) * g.s + s];
              }
          y[((n * g.k + k) * g.p() + i) * g.q() + j] = sum;
        }
  return y;
}

inline Vec linear(int64_t n, int64_t in, int64_t out, const Vec& x, const Vec& w, const Vec& b) {
  Vec y(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (int64_t k = 0; k < in; ++k) sum += x[i * in + k] * w[o * in + k];
      y[i * out + o] = sum;
    }
  return y;
}

inline Vec relu(const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
  return y;
}

inline Vec maxpool(int64_t planes, int64_t h, int64_t w, int64_t k, int64_t stride, const Vec& x) {
  int64_t p = (h - k) / stride + 1, q = (w - k) / stride + 1;
  Vec y(static_cast<size_t>(planes * p * q));
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        double best = -INFINITY;
        for (int64_t r = 0; r < k; ++r)
          for (int64_t s = 0; s < k; ++s) best = std::fmax(best, x[(pl * h + i * stride + r) * w + j * stride + s]);
        y[(pl * p + i) * q + j] = best;
      }
  return y;
}

inline Vec group_norm(int64_t n, int64_t c, int64_t spatial, int64_t groups, double eps, const Vec& x,
                      const Vec& gamma, const Vec& beta) {
  Vec y(x.size());
  int64_t cpg = c / groups, m = cpg * spatial;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t base = (s * c + g * cpg) * spatial;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < m; ++i) mean += x[base + i];
      mean /= m;
      for (int64_t i = 0; i < m; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
      var /= m;
      for (int64_t i = 0; i < m; ++i) {
        int64_t ch = g * cpg + i / spatial;
        y[base + i] = (x[base + i] - mean) / std::sqrt(var + eps) * gamma[ch] + beta[ch];
      }
    }
  return y;
}

inline Vec log_softmax(int64_t rows, int64_t cols, const Vec& x) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double top = -INFINITY, sum = 0;
    for (int64_t i = 0; i < cols; ++i) top = std::fmax(top, x[r * cols + i]);
    for (int64_t i = 0; i < cols; ++i) sum += std::exp(x[r * cols + i] - top);
    for (int64_t i = 0; i < cols; ++i) y[r * cols + i] = x[r * cols + i] - top - std::log(sum);
  }
  return y;
}

inline double nll(int64_t n, int64_t cols, const Vec& logp, const std::vector<int32_t>& labels) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += logp[i * cols + labels[i]];
  return -sum / n;
}

}  // namespace mpt_test::ref

#endif
