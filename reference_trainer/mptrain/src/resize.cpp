// Bilinear interpolation with half-pixel centres (see resize.h). The per-axis source indices and
// weights are computed once per call and reused for every row.
#include "resize.h"

#include <algorithm>

namespace mptrain {

namespace {

struct AxisSample {
  int lo = 0;
  int hi = 0;
  float frac = 0.0f;  // weight of `hi`
};

std::vector<AxisSample> axis_samples(int in, int out) {
  std::vector<AxisSample> samples(static_cast<std::size_t>(out));
  const float ratio = static_cast<float>(in) / static_cast<float>(out);
  for (int i = 0; i < out; ++i) {
    float src = std::max((static_cast<float>(i) + 0.5f) * ratio - 0.5f, 0.0f);
    int lo = std::min(static_cast<int>(src), in - 1);
    samples[static_cast<std::size_t>(i)] = {lo, std::min(lo + 1, in - 1), src - static_cast<float>(lo)};
  }
  return samples;
}

}  // namespace

void resize_bilinear_into(const float* src, int in_h, int in_w, float* dst, int out_h, int out_w) {
  const std::vector<AxisSample> rows = axis_samples(in_h, out_h);
  const std::vector<AxisSample> cols = axis_samples(in_w, out_w);
  for (int y = 0; y < out_h; ++y) {
    const AxisSample& r = rows[static_cast<std::size_t>(y)];
    const float* top = src + static_cast<std::ptrdiff_t>(r.lo) * in_w;
    const float* bottom = src + static_cast<std::ptrdiff_t>(r.hi) * in_w;
    for (int x = 0; x < out_w; ++x) {
      const AxisSample& c = cols[static_cast<std::size_t>(x)];
      float upper = top[c.lo] + (top[c.hi] - top[c.lo]) * c.frac;
      float lower = bottom[c.lo] + (bottom[c.hi] - bottom[c.lo]) * c.frac;
      dst[static_cast<std::ptrdiff_t>(y) * out_w + x] = upper + (lower - upper) * r.frac;
    }
  }
}

std::vector<float> resize_bilinear(const float* src, int in_h, int in_w, int out_h, int out_w) {
  std::vector<float> dst(static_cast<std::size_t>(out_h) * static_cast<std::size_t>(out_w));
  resize_bilinear_into(src, in_h, in_w, dst.data(), out_h, out_w);
  return dst;
}

}  // namespace mptrain
