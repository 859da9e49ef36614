// The two models, as chains of nodes grouped into named layers:
//   cnn: conv1 (conv 1->5 3x3, relu, maxpool 2), conv2 (conv 5->12 5x5, relu), norm (GroupNorm 3
//        groups), fc1 (linear ->100, relu), fc2 (linear 100->10), loss (log_softmax, nll_loss);
//   mlp: fc1 (linear ->hidden, relu), fc2 (hidden->hidden, relu), fc3 (->10), loss.
// The model opens an NVTX layer range around each layer's kernels, forward and backward, and can
// plant a NaN/Inf in a layer's output (--fault).
#pragma once

#include "config.h"
#include "layers.h"

#include <memory>
#include <string>
#include <vector>

namespace mptrain {

class Model {
 public:
  // Builds and initialises the model for single-channel images of side `image_size`. Throws
  // UsageError when --layer-precision or --fault names a layer the model lacks.
  Model(const TrainConfig& config, const PrecisionPolicy& policy, Runtime& runtime);

  const std::vector<std::string>& layer_names() const { return layers_; }
  std::vector<Param*> params();
  int64_t parameter_count() const;

  // Runs the nodes; returns log-probabilities [N, 10]. `fault` (or null) is planted after its
  // layer's last node.
  Tensor forward(Runtime& rt, const Tensor& x, const FaultSpec* fault);
  // NLL loss (f32 [1], mean over the batch) of the log-probabilities from forward().
  // `batch`: what the summed loss is divided by: the batch, or a data-parallel run's global batch.
  Tensor loss(Runtime& rt, const Tensor& logp, const Tensor& labels, int64_t batch);
  // Backward from the loss scaled by `scale` (f32 [1]): fills every parameter's gradient.
  void backward(Runtime& rt, const Tensor& labels, const Tensor& scale, int64_t batch);
  // Frees what forward kept for backward.
  void release();
  // Training (the default) or evaluation: delayed fp8 scaling learns amaxes only while training.
  void set_training(bool training);

  // One line per op: "conv1  conv2d  bf16  (bf16 list)".
  std::string precision_plan() const;
  // "conv1.conv2d=bf16,conv1.relu=bf16,..." for the configuration log.
  std::string precision_summary() const;

 private:
  void add(std::unique_ptr<Node> node);
  void build_cnn(const TrainConfig& config);
  void build_mlp(const TrainConfig& config);
  void check_layer_name(const std::string& layer, const char* option) const;

  std::unique_ptr<Fp8Quantizer> fp8_;  // --precision fp8 only
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::string> layers_;
  Shape logp_shape_;
  DType logp_dtype_ = MPT_DTYPE_F32;
  OpPrecision nll_precision_{MPT_DTYPE_F32, ""};
  Tensor logp_;
};

}  // namespace mptrain
