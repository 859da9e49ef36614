// Fully connected layer y[N,O] = x[N,I] w[O,I]^T + b[O] and its two gradients, as matrix
// products (gemm.h). With partials_fp16 the running sums, the bias gradient's included, are
// rounded to fp16 after every addition; the bias itself is added to the final sum in fp32.
#include "gemm.h"
#include "kernels.h"
#include "mpt/numerics.h"

namespace mpt::kernels {

void linear_forward(const Launch& l) {
  l.expect_counts(3, 1);
  TensorArg x = l.input(0, "x"), w = l.input(1, "w"), b = l.input(2, "b"), y = l.output(0, "y");
  for (const TensorArg* t : {&x, &w, &b, &y}) l.expect_float(*t);
  l.expect_shape(x, {-1, -1}, "[N,I]");
  l.expect_shape(w, {-1, x.dim(1)}, "[O,I]");
  int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  l.expect_shape(b, {out}, "[O]");
  l.expect_shape(y, {n, out}, "[N,O]");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input xv(*x), wv(*w), bv(*b);
  F32Output yv(*y);
  gemm(GemmShape{false, true, n, out, in, false}, xv.data(), wv.data(), yv.data(), partials_fp16);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) yv[i * out + o] += bv[o];
  yv.store();
}

void linear_backward_data(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg dy = l.input(0, "dy"), w = l.input(1, "w"), dx = l.output(0, "dx");
  for (const TensorArg* t : {&dy, &w, &dx}) l.expect_float(*t);
  l.expect_shape(dy, {-1, -1}, "[N,O]");
  l.expect_shape(w, {dy.dim(1), -1}, "[O,I]");
  int64_t n = dy.dim(0), out = dy.dim(1), in = w.dim(1);
  l.expect_shape(dx, {n, in}, "[N,I]");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input dyv(*dy), wv(*w);
  F32Output dxv(*dx);
  gemm(GemmShape{false, false, n, in, out, false}, dyv.data(), wv.data(), dxv.data(), partials_fp16);
  dxv.store();
}

void linear_backward_weight(const Launch& l) {
  l.expect_counts(2, 2);
  TensorArg dy = l.input(0, "dy"), x = l.input(1, "x"), dw = l.output(0, "dw"), db = l.output(1, "db");
  for (const TensorArg* t : {&dy, &x, &dw, &db}) l.expect_float(*t);
  l.expect_shape(dy, {-1, -1}, "[N,O]");
  l.expect_shape(x, {dy.dim(0), -1}, "[N,I]");
  int64_t n = dy.dim(0), out = dy.dim(1), in = x.dim(1);
  l.expect_shape(dw, {out, in}, "[O,I]");
  l.expect_shape(db, {out}, "[O]");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input dyv(*dy), xv(*x);
  F32Output dwv(*dw), dbv(*db);
  gemm(GemmShape{true, false, out, in, n, false}, dyv.data(), xv.data(), dwv.data(), partials_fp16);
  for (int64_t o = 0; o < out; ++o) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      acc = partials_fp16 ? round_to_f16(acc + dyv[i * out + o]) : acc + dyv[i * out + o];
    dbv[o] = acc;
  }
  dwv.store();
  dbv.store();
}

}  // namespace mpt::kernels
