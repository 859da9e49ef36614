// fp8 training (--precision fp8): the operands of the matrix products of linear and conv2d layers
// are quantized to 8-bit floats with scales and dequantized before the product, by kernels of the
// kernel library (docs/kernels.md, "Scaled 8-bit quantization"), so that a tool sees the 8-bit
// tensors and their scales; the products then accumulate in fp32. Everything else runs as in
// amp-bf16: fp32 master weights, bf16 activations, fp32 optimizer.
//
// Which operands: a layer's input (activation) and weight in forward, and its output gradient in
// backward; the weight is quantized once per step (forward and both backward products use the same
// copy, in its row layout) and the input once (the weight-gradient product reuses it). The bias,
// the outputs and everything outside linear and conv2d stay bf16 or fp32. Formats: e4m3
// everywhere, or with the hybrid format (the default) e5m2 for gradients.
//
// Recipes: current (a scale per tensor from its own amax), delayed (from the amax history of the
// same tensor over the last --fp8-amax-history steps), mxfp8 (an E8M0 power of two per 32 values,
// the OCP rule; mxfp8-ceil rounds the scale up as TE and cuBLAS do), block (power-of-two scales per
// 1x128 run of a row, per 128x128 tile of a weight); and in 4 bits (e2m1 for every operand) mxfp4
// (the MX rule per 32 values) and nvfp4 (an fp32 scale for the tensor and an e4m3 scale per 16
// values of a row, per 16x16 tile of a weight). A weight is viewed as [out, in·kh·kw], other
// operands as rows of their last dimension, as fpscope's forecast views them.
#pragma once

#include "config.h"
#include "runtime.h"

#include <map>
#include <string>

namespace mptrain {

enum class Fp8Operand { kActivation, kWeight, kGradient };

class Fp8Quantizer {
 public:
  explicit Fp8Quantizer(Fp8Config config) : config_(std::move(config)) {}

  // Whether `layer`'s operands are quantized.
  bool quantizes(const std::string& layer) const { return config_.keep_bf16.count(layer) == 0; }
  // Delayed scaling adds a step's amax to a tensor's history only while training.
  void set_training(bool training) { training_ = training; }

  // Quantizes x (named after the tensor it stands for) with the recipe and returns the fp32
  // tensor its 8-bit values and scales stand for, in x's shape.
  Tensor quantize(Runtime& rt, const Tensor& x, Fp8Operand operand);

  const Fp8Config& config() const { return config_; }

 private:
  Fp8Config config_;
  bool training_ = true;
  std::map<std::string, Tensor> histories_;  // delayed scaling, by tensor name
};

}  // namespace mptrain
