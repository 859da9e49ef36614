// 2-D convolution, NCHW, square stride and zero padding, through im2col and a matrix product:
// forward y[n] = w[K,CRS] x col(x[n])[CRS,PQ] + b; backward data scatters w^T x dy[n] back with
// col2im; backward weight sums dy[n] x col(x[n])^T over the batch. With partials_fp16 every
// addition of a running sum (products, window overlaps in col2im, batch terms, bias gradient)
// is rounded to fp16, in the order the loops below visit them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "kernels.h"
#include "mpt/numerics.h"
#include "parallel.h"
#include "scratch.h"

namespace mpt::kernels {
namespace {

struct ConvGeometry {
  int64_t n, c, h, w;   // input
  int64_t k, r, s;      // filters
  int64_t p, q;         // output plane
  int64_t stride, pad;
  int64_t crs() const { return c * r * s; }
  int64_t pq() const { return p * q; }
};

ConvGeometry geometry(const Launch& l, const TensorArg& x, const TensorArg& w) {
  ConvGeometry g{};
  g.stride = l.integer("stride", 1);
  g.pad = l.integer("padding", 0);
  l.expect_shape(x, {-1, -1, -1, -1}, "[N,C,H,W]");
  l.expect_shape(w, {-1, x.dim(1), -1, -1}, "[K,C,R,S]");
  g.n = x.dim(0); g.c = x.dim(1); g.h = x.dim(2); g.w = x.dim(3);
  g.k = w.dim(0); g.r = w.dim(2); g.s = w.dim(3);
  if (g.h + 2 * g.pad < g.r || g.w + 2 * g.pad < g.s)
    l.fail(w.label + ": filter " + shape_text(*w) + " is larger than the padded input " + shape_text(*x));
  g.p = (g.h + 2 * g.pad - g.r) / g.stride + 1;
  g.q = (g.w + 2 * g.pad - g.s) / g.stride + 1;
  return g;
}

// Images are processed in groups: the group's im2col columns sit side by side, [CRS, G*PQ], so
// one matrix product covers the whole group (a wide product threads and vectorises far better
// than one small product per image). Column index = image-in-group * PQ + p*Q + q, so a reduction
// over columns visits images in batch order, as the documented partials recurrence requires.
constexpr int64_t kMaxGroupFloats = int64_t{1} << 22;  // 16 MiB of fp32 per scratch matrix

int64_t images_per_group(const ConvGeometry& g) {
  return std::max<int64_t>(1, std::min<int64_t>(g.n, kMaxGroupFloats / std::max<int64_t>(1, g.crs() * g.pq())));
}

// col[(c,r,s), column0 + p*Q + q] = x[c, p*stride - pad + r, q*stride - pad + s], 0 outside;
// `ld` is the row length of col.
void im2col(const ConvGeometry& g, const float* image, float* col, int64_t ld, int64_t column0) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        float* row = col + ((c * g.r + r) * g.s + s) * ld + column0;
        for (int64_t p = 0; p < g.p; ++p) {
          int64_t y = p * g.stride - g.pad + r;
          for (int64_t q = 0; q < g.q; ++q) {
            int64_t x = q * g.stride - g.pad + s;
            bool inside = y >= 0 && y < g.h && x >= 0 && x < g.w;
            row[p * g.q + q] = inside ? image[(c * g.h + y) * g.w + x] : 0.0f;
          }
        }
      }
}

// floor(a / b) for b > 0 (C++ division truncates toward zero).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The adjoint of im2col: image (zeroed by the caller) += the col entries that came from it.
void col2im(const ConvGeometry& g, const float* col, int64_t ld, int64_t column0, float* image, bool partials_fp16) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const float* row = col + ((c * g.r + r) * g.s + s) * ld + column0;
        // Output columns q whose input column x = q*stride - pad + s lies inside the image.
        int64_t q_lo = std::max<int64_t>(0, -floor_div(s - g.pad, g.stride));
        int64_t q_hi = std::min<int64_t>(g.q, floor_div(g.w - 1 + g.pad - s, g.stride) + 1);
        for (int64_t p = 0; p < g.p; ++p) {
          int64_t y = p * g.stride - g.pad + r;
          if (y < 0 || y >= g.h || q_lo >= q_hi) continue;
          float* target = image + (c * g.h + y) * g.w + (q_lo * g.stride - g.pad + s);
          const float* source = row + p * g.q + q_lo;
          for (int64_t q = 0; q < q_hi - q_lo; ++q) target[q * g.stride] += source[q];
          // Each target was touched once above: rounding now equals rounding after that addition.
          if (partials_fp16 && g.stride == 1) round_f32_through_f16(target, static_cast<size_t>(q_hi - q_lo));
          else if (partials_fp16)
            for (int64_t q = 0; q < q_hi - q_lo; ++q) target[q * g.stride] = round_to_f16(target[q * g.stride]);
        }
      }
}

// The transpose of im2col: rows[row0 + p*Q + q, (c,r,s)], one contiguous row per output position.
void im2row(const ConvGeometry& g, const float* image, float* rows, int64_t row0) {
  for (int64_t p = 0; p < g.p; ++p)
    for (int64_t q = 0; q < g.q; ++q) {
      float* out = rows + (row0 + p * g.q + q) * g.crs();
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t r = 0; r < g.r; ++r) {
          int64_t y = p * g.stride - g.pad + r;
          for (int64_t s = 0; s < g.s; ++s) {
            int64_t x = q * g.stride - g.pad + s;
            bool inside = y >= 0 && y < g.h && x >= 0 && x < g.w;
            *out++ = inside ? image[(c * g.h + y) * g.w + x] : 0.0f;
          }
        }
    }
}

// im2col of images [first, first + count) into col [CRS, count*PQ].
void im2col_group(const ConvGeometry& g, const float* x, int64_t first, int64_t count, float* col) {
  parallel_for(count, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) im2col(g, x + (first + i) * g.c * g.h * g.w, col, count * g.pq(), i * g.pq());
  });
}

// dy of images [first, first + count), [N,K,PQ], gathered into [K, count*PQ].
void gather_dy(const ConvGeometry& g, const float* dy, int64_t first, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i)
    for (int64_t k = 0; k < g.k; ++k)
      std::memcpy(out + k * count * g.pq() + i * g.pq(), dy + ((first + i) * g.k + k) * g.pq(),
                  static_cast<size_t>(g.pq()) * sizeof(float));
}

}  // namespace

void conv2d_forward(const Launch& l) {
  l.expect_counts(3, 1);
  TensorArg x = l.input(0, "x"), w = l.input(1, "w"), b = l.input(2, "b"), y = l.output(0, "y");
  for (const TensorArg* t : {&x, &w, &b, &y}) l.expect_float(*t);
  ConvGeometry g = geometry(l, x, w);
  l.expect_shape(b, {g.k}, "[K]");
  l.expect_shape(y, {g.n, g.k, g.p, g.q}, "[N,K,H',W']");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input xv(*x), wv(*w), bv(*b);
  F32Output yv(*y);
  int64_t group = images_per_group(g), pq = g.pq();
  ScratchFloats col(static_cast<size_t>(g.crs() * group * pq)), product(static_cast<size_t>(g.k * group * pq));
  for (int64_t first = 0; first < g.n; first += group) {
    int64_t count = std::min(group, g.n - first);
    im2col_group(g, xv.data(), first, count, col.data());
    gemm(GemmShape{false, false, g.k, count * pq, g.crs(), false}, wv.data(), col.data(), product.data(), partials_fp16);
    parallel_for(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t k = 0; k < g.k; ++k) {
          const float* from = product.data() + k * count * pq + i * pq;
          float* to = yv.data() + ((first + i) * g.k + k) * pq;
          for (int64_t j = 0; j < pq; ++j) to[j] = from[j] + bv[k];
        }
    });
  }
  yv.store();
}

void conv2d_backward_data(const Launch& l) {
  l.expect_counts(2, 1);
  TensorArg dy = l.input(0, "dy"), w = l.input(1, "w"), dx = l.output(0, "dx");
  for (const TensorArg* t : {&dy, &w, &dx}) l.expect_float(*t);
  ConvGeometry g = geometry(l, dx, w);
  l.expect_shape(dy, {g.n, g.k, g.p, g.q}, "[N,K,H',W']");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input dyv(*dy), wv(*w);
  F32Output dxv(*dx, /*zeroed=*/true);
  int64_t group = images_per_group(g), pq = g.pq();
  ScratchFloats dcol(static_cast<size_t>(g.crs() * group * pq)), dy_rows(static_cast<size_t>(g.k * group * pq));
  for (int64_t first = 0; first < g.n; first += group) {
    int64_t count = std::min(group, g.n - first);
    gather_dy(g, dyv.data(), first, count, dy_rows.data());
    gemm(GemmShape{true, false, g.crs(), count * pq, g.k, false}, wv.data(), dy_rows.data(), dcol.data(), partials_fp16);
    parallel_for(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        col2im(g, dcol.data(), count * pq, i * pq, dxv.data() + (first + i) * g.c * g.h * g.w, partials_fp16);
    });
  }
  dxv.store();
}

void conv2d_backward_weight(const Launch& l) {
  l.expect_counts(2, 2);
  TensorArg dy = l.input(0, "dy"), x = l.input(1, "x"), dw = l.output(0, "dw"), db = l.output(1, "db");
  for (const TensorArg* t : {&dy, &x, &dw, &db}) l.expect_float(*t);
  ConvGeometry g = geometry(l, x, dw);
  l.expect_shape(dy, {g.n, g.k, g.p, g.q}, "[N,K,H',W']");
  l.expect_shape(db, {g.k}, "[K]");
  bool partials_fp16 = l.flag("partials_fp16");

  F32Input dyv(*dy), xv(*x);
  F32Output dwv(*dw, /*zeroed=*/true), dbv(*db, /*zeroed=*/true);
  int64_t group = images_per_group(g), pq = g.pq();
  ScratchFloats col(static_cast<size_t>(g.crs() * group * pq)), dy_rows(static_cast<size_t>(g.k * group * pq));
  for (int64_t first = 0; first < g.n; first += group) {
    int64_t count = std::min(group, g.n - first);
    parallel_for(count, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) im2row(g, xv.data() + (first + i) * g.c * g.h * g.w, col.data(), i * pq);
    });
    gather_dy(g, dyv.data(), first, count, dy_rows.data());
    gemm(GemmShape{false, false, g.k, g.crs(), count * pq, first > 0}, dy_rows.data(), col.data(), dwv.data(), partials_fp16);
    for (int64_t k = 0; k < g.k; ++k) {  // images in batch order, then positions
      float acc = dbv[k];
      const float* row = dy_rows.data() + k * count * pq;
      for (int64_t i = 0; i < count * pq; ++i) acc = partials_fp16 ? round_to_f16(acc + row[i]) : acc + row[i];
      dbv[k] = acc;
    }
  }
  dwv.store();
  dbv.store();
}

}  // namespace mpt::kernels
