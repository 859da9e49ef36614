// Dynamic loss scaling, as PyTorch's GradScaler does it: amp_unscale_check multiplies every
// gradient by 1/scale (the reciprocal taken in double, then rounded to fp32) and reports whether
// any gradient held a NaN or an Inf before unscaling; amp_update_scale moves the scale and the
// growth tracker (_amp_update_scale_: backoff on inf, growth after growth_interval clean steps,
// a grown scale kept only if finite).
#include <atomic>
#include <cmath>

#include "kernels.h"
#include "parallel.h"

namespace mpt::kernels {

void amp_unscale_check(const Launch& l) {
  if (l.n_inputs() < 1 || l.n_outputs() != l.n_inputs())
    l.fail("expected inputs scale, g1..gn and outputs found_inf, g1..gn (as many outputs as inputs), got " +
           std::to_string(l.n_inputs()) + " input(s) and " + std::to_string(l.n_outputs()) + " output(s)");
  TensorArg scale = l.input(0, "scale"), found_inf = l.output(0, "found_inf");
  l.expect_dtype(scale, MPT_DTYPE_F32);
  l.expect_numel(scale, 1);
  l.expect_dtype(found_inf, MPT_DTYPE_F32);
  l.expect_numel(found_inf, 1);
  for (int i = 1; i < l.n_inputs(); ++i) {
    TensorArg in = l.input(i, "g"), out = l.output(i, "g");
    l.expect_float(in);
    l.expect_same_shape(out, in);
    if (out->dtype != in->dtype) l.fail(out.label + ": expected the dtype of " + in.label);
  }

  float inv_scale = static_cast<float>(1.0 / static_cast<double>(*static_cast<const float*>(scale->data)));
  std::atomic<bool> any_nonfinite{false};
  for (int i = 1; i < l.n_inputs(); ++i) {
    TensorArg in = l.input(i, "g"), out = l.output(i, "g");
    F32Input gv(*in);
    F32Output result(*out);
    float* values = result.data();
    parallel_for(in.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      bool nonfinite = false;
      for (int64_t j = b; j < e; ++j) {
        float v = gv[j];
        nonfinite = nonfinite || !std::isfinite(v);
        values[j] = inv_scale == 1.0f ? v : v * inv_scale;
      }
      if (nonfinite) any_nonfinite.store(true, std::memory_order_relaxed);
    });
    result.store();
  }
  *static_cast<float*>(found_inf->data) = any_nonfinite.load() ? 1.0f : 0.0f;
}

void amp_update_scale(const Launch& l) {
  l.expect_counts(3, 2);
  TensorArg scale = l.input(0, "scale"), tracker = l.input(1, "growth_tracker"), found = l.input(2, "found_inf");
  TensorArg scale_out = l.output(0, "scale"), tracker_out = l.output(1, "growth_tracker");
  for (const TensorArg* t : {&scale, &found, &scale_out}) {
    l.expect_dtype(*t, MPT_DTYPE_F32);
    l.expect_numel(*t, 1);
  }
  for (const TensorArg* t : {&tracker, &tracker_out}) {
    l.expect_dtype(*t, MPT_DTYPE_I32);
    l.expect_numel(*t, 1);
  }
  double growth_factor = l.scalar("growth_factor"), backoff_factor = l.scalar("backoff_factor");
  int64_t growth_interval = l.integer("growth_interval", 1);

  float current = *static_cast<const float*>(scale->data);
  int32_t successful = *static_cast<const int32_t*>(tracker->data);
  bool found_inf = *static_cast<const float*>(found->data) != 0.0f;
  float new_scale = current;
  int32_t new_tracker;
  if (found_inf) {
    new_scale = static_cast<float>(current * backoff_factor);
    new_tracker = 0;
  } else if (successful + 1 == growth_interval) {
    float grown = static_cast<float>(current * growth_factor);
    if (std::isfinite(grown)) new_scale = grown;
    new_tracker = 0;
  } else {
    new_tracker = successful + 1;
  }
  *static_cast<float*>(scale_out->data) = new_scale;
  *static_cast<int32_t*>(tracker_out->data) = new_tracker;
}

}  // namespace mpt::kernels
