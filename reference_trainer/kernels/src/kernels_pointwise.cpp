// ReLU, max pooling, log-softmax, negative log-likelihood and the accuracy count. All arithmetic
// in fp32 on fp32 views of the tensors; outputs rounded to their dtype on store. NaN propagates
// through relu, max pooling and log-softmax, so a tool sees where it went.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"
#include "parallel.h"

namespace mpt::kernels {
namespace {

constexpr int64_t kElementwiseChunk = 1 << 14;

int64_t row_length(const Launch& l, const TensorArg& t) {
  if (t->ndim < 1 || t.dim(t->ndim - 1) == 0) l.fail(t.label + ": expected at least one dimension with a nonzero last extent, got " + shape_text(*t));
  return t.dim(t->ndim - 1);
}

const int32_t* checked_labels(const Launch& l, const TensorArg& labels, int64_t n, int64_t classes) {
  l.expect_dtype(labels, MPT_DTYPE_I32);
  l.expect_shape(labels, {n}, "[N]");
  const int32_t* values = static_cast<const int32_t*>(labels->data);
  for (int64_t i = 0; i < n; ++i)
    if (values[i] < 0 || values[i] >= classes)
      l.fail(labels.label + ": label " + std::to_string(values[i]) + " at index " + std::to_string(i) +
             " is outside 0.." + std::to_string(classes - 1));
  return values;
}

}  // namespace

void relu_forward(const Launch& l) {
  l.expect_counts(1, 1);
  TensorArg x = l.input(0, "x"), y = l.output(0, "y");
  l.expect_float(x); l.expect_float(y);
  l.expect_same_shape(y, x);
  F32Input xv(*x);
  F32Output yv(*y);
  float* out = yv.data();
  parallel_for(x.numel(), kElementwiseChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = xv[i] < 0.0f ? 0.0f : xv[i];  // NaN passes through
  });
  yv.store();
}

void relu_backward(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg dy = l.input(0, "dy"), y = l.input(1, "y"), dx = l.output(0, "dx");
  for (const TensorArg* t : {&dy, &y, &dx}) l.expect_float(*t);
  l.expect_same_shape(y, dy);
  l.expect_same_shape(dx, dy);
  F32Input dyv(*dy), yv(*y);
  F32Output dxv(*dx);
  float* out = dxv.data();
  parallel_for(dy.numel(), kElementwiseChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = yv[i] > 0.0f ? dyv[i] : 0.0f;
  });
  dxv.store();
}

void maxpool2d_forward(const Launch& l) {
  l.expect_counts(1, 2);
  TensorArg x = l.input(0, "x"), y = l.output(0, "y"), argmax = l.output(1, "argmax");
  l.expect_float(x); l.expect_float(y);
  l.expect_dtype(argmax, MPT_DTYPE_I32);
  int64_t window = l.integer("kernel", 1);
  int64_t stride = l.integer_or("stride", window, 1);
  l.expect_shape(x, {-1, -1, -1, -1}, "[N,C,H,W]");
  int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h < window || w < window) l.fail(x.label + ": plane smaller than the pooling window " + std::to_string(window));
  int64_t p = (h - window) / stride + 1, q = (w - window) / stride + 1;
  l.expect_shape(y, {x.dim(0), x.dim(1), p, q}, "[N,C,H',W']");
  l.expect_same_shape(argmax, y);

  F32Input xv(*x);
  F32Output yv(*y);
  int32_t* index = static_cast<int32_t*>(argmax->data);
  parallel_for(planes, 8, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const float* in = xv.data() + plane * h * w;
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          int64_t best = i * stride * w + j * stride;
          for (int64_t r = 0; r < window; ++r)
            for (int64_t s = 0; s < window; ++s) {
              int64_t at = (i * stride + r) * w + j * stride + s;
              if (!std::isnan(in[best]) && (in[at] > in[best] || std::isnan(in[at]))) best = at;
            }
          yv[plane * p * q + i * q + j] = in[best];
          index[plane * p * q + i * q + j] = static_cast<int32_t>(best);
        }
    }
  });
  yv.store();
}

void maxpool2d_backward(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg dy = l.input(0, "dy"), argmax = l.input(1, "argmax"), dx = l.output(0, "dx");
  l.expect_float(dy); l.expect_float(dx);
  l.expect_dtype(argmax, MPT_DTYPE_I32);
  l.expect_shape(dx, {-1, -1, -1, -1}, "[N,C,H,W]");
  l.expect_shape(dy, {dx.dim(0), dx.dim(1), -1, -1}, "[N,C,H',W']");
  l.expect_same_shape(argmax, dy);
  int64_t planes = dx.dim(0) * dx.dim(1), plane_size = dx.dim(2) * dx.dim(3);
  int64_t pooled = dy.dim(2) * dy.dim(3);
  const int32_t* index = static_cast<const int32_t*>(argmax->data);
  for (int64_t i = 0; i < planes * pooled; ++i)
    if (index[i] < 0 || index[i] >= plane_size)
      l.fail(argmax.label + ": index " + std::to_string(index[i]) + " at " + std::to_string(i) +
             " is outside the plane of " + std::to_string(plane_size) + " elements");

  F32Input dyv(*dy);
  F32Output dxv(*dx, /*zeroed=*/true);
  parallel_for(planes, 8, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane)
      for (int64_t i = 0; i < pooled; ++i)
        dxv[plane * plane_size + index[plane * pooled + i]] += dyv[plane * pooled + i];
  });
  dxv.store();
}

void log_softmax_forward(const Launch& l) {
  l.expect_counts(1, 1);
  TensorArg x = l.input(0, "x"), y = l.output(0, "y");
  l.expect_float(x); l.expect_float(y);
  l.expect_same_shape(y, x);
  int64_t classes = row_length(l, x), rows = x.numel() / classes;
  F32Input xv(*x);
  F32Output yv(*y);
  parallel_for(rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* in = xv.data() + r * classes;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < classes; ++i) top = in[i] > top ? in[i] : top;
      float sum = 0.0f;
      for (int64_t i = 0; i < classes; ++i) sum += std::exp(in[i] - top);
      float log_sum = std::log(sum);
      for (int64_t i = 0; i < classes; ++i) yv[r * classes + i] = in[i] - top - log_sum;
    }
  });
  yv.store();
}

void log_softmax_backward(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg dy = l.input(0, "dy"), y = l.input(1, "y"), dx = l.output(0, "dx");
  for (const TensorArg* t : {&dy, &y, &dx}) l.expect_float(*t);
  l.expect_same_shape(y, dy);
  l.expect_same_shape(dx, dy);
  int64_t classes = row_length(l, dy), rows = dy.numel() / classes;
  F32Input dyv(*dy), yv(*y);
  F32Output dxv(*dx);
  parallel_for(rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float sum = 0.0f;
      for (int64_t i = 0; i < classes; ++i) sum += dyv[r * classes + i];
      for (int64_t i = 0; i < classes; ++i)
        dxv[r * classes + i] = dyv[r * classes + i] - std::exp(yv[r * classes + i]) * sum;
    }
  });
  dxv.store();
}

void nll_loss_forward(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg logp = l.input(0, "logp"), labels = l.input(1, "labels"), loss = l.output(0, "loss");
  l.expect_float(logp); l.expect_float(loss);
  l.expect_shape(logp, {-1, -1}, "[N,O]");
  l.expect_numel(loss, 1);
  int64_t n = logp.dim(0), classes = logp.dim(1);
  if (n == 0) l.fail(logp.label + ": the batch is empty, its mean is undefined");
  const int32_t* label = checked_labels(l, labels, n, classes);
  F32Input lv(*logp);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += lv[i * classes + label[i]];
  // `batch`: the count the sum is divided by; N, or the global batch of a data-parallel run whose
  // ranks then add their losses (allreduce_sum) into the mean over the whole batch.
  const float batch = static_cast<float>(l.integer_or("batch", n, 1));
  F32Output out(*loss);
  out[0] = -sum / batch;
  out.store();
}

void nll_loss_backward(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg labels = l.input(0, "labels"), scale = l.input(1, "scale"), dlogp = l.output(0, "dlogp");
  l.expect_float(scale); l.expect_float(dlogp);
  l.expect_numel(scale, 1);
  l.expect_shape(dlogp, {-1, -1}, "[N,O]");
  int64_t n = dlogp.dim(0), classes = dlogp.dim(1);
  if (n == 0) l.fail(dlogp.label + ": the batch is empty");
  const int32_t* label = checked_labels(l, labels, n, classes);
  const float batch = static_cast<float>(l.integer_or("batch", n, 1));  // as nll_loss_forward's
  float gradient = -(F32Input(*scale)[0] / batch);
  F32Output out(*dlogp, /*zeroed=*/true);
  for (int64_t i = 0; i < n; ++i) out[i * classes + label[i]] = gradient;
  out.store();
}

void accuracy_count(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg logp = l.input(0, "logp"), labels = l.input(1, "labels"), correct = l.output(0, "correct");
  l.expect_float(logp);
  l.expect_shape(logp, {-1, -1}, "[N,O]");
  l.expect_dtype(correct, MPT_DTYPE_I32);
  l.expect_numel(correct, 1);
  int64_t n = logp.dim(0), classes = logp.dim(1);
  const int32_t* label = checked_labels(l, labels, n, classes);
  F32Input lv(*logp);
  int32_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = lv.data() + i * classes;
    int64_t best = 0;
    bool has_nan = false;
    for (int64_t c = 0; c < classes; ++c) {
      has_nan = has_nan || std::isnan(row[c]);
      if (row[c] > row[best]) best = c;  // first maximum wins ties
    }
    if (!has_nan && best == label[i]) ++count;
  }
  *static_cast<int32_t*>(correct->data) = count;
}

}  // namespace mpt::kernels
