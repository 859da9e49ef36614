// The quantized operands of fp8.h.
#include "fp8.h"

namespace mptrain {

namespace {

// The tensor the quantize kernels see: a weight as [out, in·kh·kw], anything else as it is (the
// kernels take rows of the last dimension).
Tensor quantize_view(const Tensor& x, Fp8Operand operand) {
  if (operand != Fp8Operand::kWeight || x.shape().size() <= 2) return x;
  return x.reshaped({x.dim(0), x.numel() / x.dim(0)});
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Tensor Fp8Quantizer::quantize(Runtime& rt, const Tensor& x_in, Fp8Operand operand) {
  const Tensor x = quantize_view(x_in, operand);
  const DType format = is_fp4_recipe(config_.recipe)                         ? MPT_DTYPE_E2M1
                       : operand == Fp8Operand::kGradient && config_.hybrid ? MPT_DTYPE_E5M2
                                                                            : MPT_DTYPE_E4M3;
  const int category = operand == Fp8Operand::kWeight ? MPT_CAT_WEIGHT : MPT_CAT_ACTIVATION;
  const std::string& name = x.name();
  Tensor q = rt.alloc(name + ".fp8", x.shape(), format, category);
  const int64_t cols = x.shape().empty() ? 1 : x.shape().back();
  int64_t rows = 1;  // every dimension but the last
  for (std::size_t i = 0; i + 1 < x.shape().size(); ++i) rows *= x.dim(i);

  Tensor scale, global;  // global: NVFP4's tensor scale
  Scalars dequantize_scalars;
  switch (config_.recipe) {
    case Fp8Recipe::kCurrent:
    case Fp8Recipe::kDelayed: {
      scale = rt.alloc(name + ".fp8.scale_inv", {1}, MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
      if (config_.recipe == Fp8Recipe::kCurrent) {
        rt.launch("fp8_quantize_tensor", {&x}, {&q, &scale});
        break;
      }
      auto it = histories_.find(name);
      if (it == histories_.end()) {
        it = histories_.emplace(name, rt.alloc(name + ".amax_history", {config_.amax_history}, MPT_DTYPE_F32,
                                               MPT_CAT_WORKSPACE)).first;
      }
      const Tensor& history = it->second;
      rt.launch("fp8_quantize_tensor", {&x, &history}, {&q, &scale, &history},
                {{"update_history", training_ ? 1.0 : 0.0}});
      break;
    }
    case Fp8Recipe::kMxfp8:
    case Fp8Recipe::kMxfp8Ceil:
    case Fp8Recipe::kMxfp4: {
      constexpr int64_t kBlock = 32;
      scale = rt.alloc(name + ".fp8.scales", {rows, ceil_div(cols, kBlock)}, MPT_DTYPE_E8M0, MPT_CAT_WORKSPACE);
      rt.launch("fp8_quantize_mx", {&x}, {&q, &scale},
                {{"block", double(kBlock)}, {"round_up", config_.recipe == Fp8Recipe::kMxfp8Ceil ? 1.0 : 0.0}});
      dequantize_scalars = {{"block", double(kBlock)}};
      break;
    }
    case Fp8Recipe::kNvfp4: {
      constexpr int64_t kBlock = 16;
      const int64_t tile_rows = operand == Fp8Operand::kWeight ? kBlock : 1;
      scale = rt.alloc(name + ".fp8.block_scales", {ceil_div(rows, tile_rows), ceil_div(cols, kBlock)}, MPT_DTYPE_E4M3,
                       MPT_CAT_WORKSPACE);
      global = rt.alloc(name + ".fp8.global_scale_inv", {1}, MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
      dequantize_scalars = {{"block", double(kBlock)}, {"tile_rows", double(tile_rows)}};
      rt.launch("fp8_quantize_nvfp4", {&x}, {&q, &scale, &global}, dequantize_scalars);
      break;
    }
    case Fp8Recipe::kBlock: {
      constexpr int64_t kBlock = 128;
      const int64_t tile_rows = operand == Fp8Operand::kWeight ? kBlock : 1;
      scale = rt.alloc(name + ".fp8.scale_inv", {ceil_div(rows, tile_rows), ceil_div(cols, kBlock)}, MPT_DTYPE_F32,
                       MPT_CAT_WORKSPACE);
      dequantize_scalars = {{"block", double(kBlock)}, {"tile_rows", double(tile_rows)}};
      rt.launch("fp8_quantize_block", {&x}, {&q, &scale}, dequantize_scalars);
      break;
    }
  }
  Tensor y = rt.alloc(name + ".dequantized", x.shape(), MPT_DTYPE_F32, category);
  if (global.defined()) {
    rt.launch("fp8_dequantize", {&q, &scale, &global}, {&y}, dequantize_scalars);
  } else {
    rt.launch("fp8_dequantize", {&q, &scale}, {&y}, dequantize_scalars);
  }
  return y.reshaped(x_in.shape());
}

}  // namespace mptrain
