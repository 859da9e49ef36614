/* Host side of the CUDA quantize and dequantize kernels: their arguments checked as the CPU
 * library checks them (kernels_fp8.cpp), then the device code of quantize.cu queued. */
#include <string>

#include "device_scratch.h"
#include "launch_args.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

bool byte_float(LaunchArgs& a, const mpt_tensor& q, bool e2m1_too) {
  if (q.dtype == MPT_DTYPE_E4M3 || q.dtype == MPT_DTYPE_E5M2 || (e2m1_too && q.dtype == MPT_DTYPE_E2M1)) return true;
  return a.bad(std::string("q must be e4m3") + (e2m1_too ? ", e5m2 or e2m1" : " or e5m2") + ", got " +
               dtype_name(q.dtype));
}

/* The tiles of x for the launch's `block` and `tile_rows`, with `scales` checked to hold one scale
 * per tile ([rows of tiles, tiles per row]). */
bool tile_grid(LaunchArgs& a, const mpt_tensor& x, const mpt_tensor& scales, int64_t default_block, TileGrid* g) {
  int64_t block = 0, tile_rows = 0;
  if (!a.integer_or("block", default_block, 1, &block) || !a.integer_or("tile_rows", 1, 1, &tile_rows)) return false;
  *g = mpt::tile_grid(x, block, tile_rows);
  if (scales.ndim != 2 || scales.shape[0] != g->rows_of_tiles || scales.shape[1] != g->tiles_per_row)
    return a.bad("scales must have shape [" + std::to_string(g->rows_of_tiles) + "," +
                 std::to_string(g->tiles_per_row) + "] (tiles of " + std::to_string(g->tile_rows) + " x " +
                 std::to_string(g->block) + ")");
  return true;
}

bool one_f32(LaunchArgs& a, const mpt_tensor& t, const char* role) {
  return a.dtype_is(t, MPT_DTYPE_F32, role) &&
         (element_count(t) == 1 || a.bad(std::string(role) + " must hold one element"));
}

/* Queues queue(work) with `bytes` of device scratch as work. */
template <typename Queue>
int with_scratch(LaunchArgs& a, size_t bytes, Queue queue) {
  Scratch scratch(a.stream());
  void* work = nullptr;
  cudaError_t e = scratch.get(bytes, &work);
  if (e == cudaSuccess) e = queue(work);
  return a.done(e);
}

}  // namespace

int run_fp8_quantize_tensor(LaunchArgs& a) {
  const mpt_launch_desc& d = a.desc();
  const bool delayed = d.n_inputs == 2;
  if (!(d.n_inputs == 1 && d.n_outputs == 2) && !(delayed && d.n_outputs == 3)) {
    a.bad("expected inputs x[, amax_history] and outputs q, scale_inv[, amax_history]");
    return a.fail();
  }
  if (!a.on_device() || !a.floating(a.in(0), "x") || !byte_float(a, a.out(0), false) ||
      !a.same_shape(a.in(0), a.out(0), "x", "q") || !one_f32(a, a.out(1), "scale_inv")) {
    return a.fail();
  }
  if (delayed) {
    const mpt_tensor& h = a.in(1);
    if (!a.dtype_is(h, MPT_DTYPE_F32, "amax_history") ||
        ((h.ndim != 1 || element_count(h) < 1) && !a.bad("amax_history must be 1-D with at least one step")) ||
        (a.out(2).data != h.data && !a.bad("amax_history (output) must be the history itself (updated in place)"))) {
      return a.fail();
    }
  }
  if (a.dry_run()) return MPT_OK;
  return with_scratch(a, 16, [&](void* work) {
    float* history = delayed ? static_cast<float*>(a.in(1).data) : nullptr;
    return fp8_quantize_tensor(a.in_flat(0), static_cast<uint8_t*>(a.out(0).data), byte_format(a.out(0).dtype),
                               static_cast<float*>(a.out(1).data), history, delayed ? element_count(a.in(1)) : 0,
                               a.flag("update_history"), a.flag("pow2"), work, a.stream());
  });
}

int run_fp8_quantize_mx(LaunchArgs& a) {
  TileGrid g{};
  if (!a.counts(1, 2) || !a.on_device() || !a.floating(a.in(0), "x") || !byte_float(a, a.out(0), true) ||
      !a.same_shape(a.in(0), a.out(0), "x", "q") || !a.dtype_is(a.out(1), MPT_DTYPE_E8M0, "scales") ||
      !tile_grid(a, a.in(0), a.out(1), 32, &g)) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(fp8_quantize_mx(a.in_flat(0), static_cast<uint8_t*>(a.out(0).data),
                                static_cast<uint8_t*>(a.out(1).data), g, byte_format(a.out(0).dtype),
                                a.flag("round_up"), a.stream()));
}

int run_fp8_quantize_block(LaunchArgs& a) {
  TileGrid g{};
  if (!a.counts(1, 2) || !a.on_device() || !a.floating(a.in(0), "x") || !byte_float(a, a.out(0), false) ||
      !a.same_shape(a.in(0), a.out(0), "x", "q") || !a.dtype_is(a.out(1), MPT_DTYPE_F32, "scale_inv") ||
      !tile_grid(a, a.in(0), a.out(1), 128, &g)) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return a.done(fp8_quantize_block(a.in_flat(0), static_cast<uint8_t*>(a.out(0).data),
                                   static_cast<float*>(a.out(1).data), g, byte_format(a.out(0).dtype), a.stream()));
}

int run_fp8_quantize_nvfp4(LaunchArgs& a) {
  TileGrid g{};
  if (!a.counts(1, 3) || !a.on_device() || !a.floating(a.in(0), "x") ||
      !a.dtype_is(a.out(0), MPT_DTYPE_E2M1, "q") || !a.same_shape(a.in(0), a.out(0), "x", "q") ||
      !a.dtype_is(a.out(1), MPT_DTYPE_E4M3, "block_scales") || !one_f32(a, a.out(2), "global_scale_inv") ||
      !tile_grid(a, a.in(0), a.out(1), 16, &g)) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  return with_scratch(a, 8, [&](void* work) {
    return fp8_quantize_nvfp4(a.in_flat(0), static_cast<uint8_t*>(a.out(0).data), static_cast<uint8_t*>(a.out(1).data),
                              static_cast<float*>(a.out(2).data), g, work, a.stream());
  });
}

int run_fp8_dequantize(LaunchArgs& a) {
  const mpt_launch_desc& d = a.desc();
  const bool nvfp4 = d.n_inputs == 3;
  if (!a.counts(nvfp4 ? 3 : 2, 1) || !a.on_device() || !byte_float(a, a.in(0), true) || !a.floating(a.out(0), "y") ||
      !a.same_shape(a.in(0), a.out(0), "q", "y")) {
    return a.fail();
  }
  const mpt_tensor& q = a.in(0);
  const mpt_tensor& scale = a.in(1);
  const bool e8m0 = scale.dtype == MPT_DTYPE_E8M0;
  if (nvfp4) {
    if (!a.dtype_is(q, MPT_DTYPE_E2M1, "q") || !a.dtype_is(scale, MPT_DTYPE_E4M3, "scale") ||
        !one_f32(a, a.in(2), "global_scale_inv"))
      return a.fail();
  } else if (!e8m0 && !a.dtype_is(scale, MPT_DTYPE_F32, "scale")) {
    return a.fail();
  }
  if (q.dtype == MPT_DTYPE_E2M1 && !e8m0 && !nvfp4) {
    a.bad("e2m1 values take E8M0 block scales, or NVFP4's e4m3 block scales and a global scale");
    return a.fail();
  }
  int64_t block = 0;
  if (!a.integer_or("block", 0, 0, &block)) return a.fail();
  TileGrid g{};
  if (block == 0) {  // one tile covering the tensor
    if (element_count(scale) != 1) {
      a.bad("scale must hold one value for a per-tensor scale");
      return a.fail();
    }
    g = mpt::one_tile(q);
  } else if (!tile_grid(a, q, scale, 0, &g)) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  const int kind = nvfp4 ? kScaleE4M3 : e8m0 ? kScaleE8M0 : kScaleF32;
  return a.done(fp8_dequantize(static_cast<const uint8_t*>(q.data), byte_format(q.dtype), scale.data, kind, g,
                               nvfp4 ? static_cast<const float*>(a.in(2).data) : nullptr, a.out_flat(0), a.stream()));
}

}  // namespace mpt::cuda::detail
