// Bilinear resizing of one image plane, as torch.nn.functional.interpolate(mode="bilinear",
// align_corners=False) computes it without antialiasing: pixel centres are aligned, a source
// coordinate is (dst + 0.5) * in / out - 0.5 clamped at 0, and the two nearest source pixels per
// axis are blended.
#pragma once

#include <vector>

namespace mptrain {

// `src` holds in_h*in_w values row-major; returns out_h*out_w values.
std::vector<float> resize_bilinear(const float* src, int in_h, int in_w, int out_h, int out_w);

// Same, writing into `dst` (out_h*out_w values).
void resize_bilinear_into(const float* src, int in_h, int in_w, float* dst, int out_h, int out_w);

}  // namespace mptrain
