// The ops of the models as nodes of a chain. Each node is planned once (output shape, the type
// it runs in, its parameters), then runs forward (keeping what its backward needs) and backward
// (writing its parameters' gradients and, when asked, the gradient of its input).
//
// Types follow one rule: a node casts its input to the type it runs in (a `cast` kernel whose
// output is kept for backward), and the gradient of any tensor has that tensor's type, so the
// backward kernels write input gradients straight in the type of the uncast input.
#pragma once

#include "fp8.h"
#include "precision_policy.h"
#include "runtime.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mptrain {

// A trainable tensor. In amp modes `master` is the fp32 copy the optimizer updates and `weight`
// the working copy the forward reads (the same tensor when the op runs in fp32).
struct Param {
  std::string name;          // "fc1.weight"
  Tensor weight;
  Tensor master;             // undefined outside amp modes
  Tensor grad;               // "fc1.weight.grad": fp32 in amp modes, else the weight's type
  std::vector<Tensor> state; // optimizer state, created by the optimizer

  const Tensor& updated() const { return master.defined() ? master : weight; }
  bool has_working_copy() const { return master.defined() && master.id() != weight.id(); }
};

// What every node is built with.
struct BuildContext {
  Runtime& runtime;
  const PrecisionPolicy& policy;
  std::mt19937_64& init_rng;  // PyTorch-style uniform init, drawn in module order
  bool partials_fp16;
  Fp8Quantizer* fp8 = nullptr;  // --precision fp8: quantizes linear and conv2d operands
};

class Node {
 public:
  Node(std::string layer, std::string op) : layer_(std::move(layer)), op_(std::move(op)) {}
  virtual ~Node() = default;

  const std::string& layer() const { return layer_; }
  const std::string& op() const { return op_; }
  DType compute_dtype() const { return compute_; }
  const std::string& precision_reason() const { return reason_; }
  std::vector<Param*> params();

  // Decides the type, creates parameters; returns the output shape (batch dimension excluded).
  virtual Shape plan(BuildContext& ctx, const Shape& in_shape, DType in_dtype) = 0;
  virtual Tensor forward(Runtime& rt, const Tensor& x) = 0;
  // Returns the input gradient (undefined when !need_dx).
  virtual Tensor backward(Runtime& rt, const Tensor& dy, bool need_dx) = 0;
  // Drops what forward kept.
  virtual void release();

 protected:
  // Runs the policy and records the result.
  void choose_precision(BuildContext& ctx, DType in_dtype, std::optional<DType> param_dtype);
  Param make_param(BuildContext& ctx, const std::string& name, Shape shape, std::vector<float> init);
  // Casts x to the compute type, remembering the original input's name, type and shape.
  const Tensor& take_input(Runtime& rt, const Tensor& x);
  Tensor alloc_input_grad(Runtime& rt) const;

  std::string layer_;
  std::string op_;
  DType compute_ = MPT_DTYPE_F32;
  std::string reason_;
  std::vector<Param> params_;
  bool partials_fp16_ = false;
  Tensor input_;  // the input as the op saw it (after the cast)
  std::string input_name_;
  DType input_dtype_ = MPT_DTYPE_F32;
  Shape input_shape_;
};

// Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) values, as nn.Conv2d and nn.Linear initialise both
// weight (kaiming_uniform with a = sqrt(5)) and bias.
std::vector<float> uniform_init(std::mt19937_64& rng, int64_t count, int64_t fan_in);

std::unique_ptr<Node> make_conv2d(std::string layer, int64_t in_channels, int64_t out_channels, int64_t kernel);
std::unique_ptr<Node> make_linear(std::string layer, int64_t in_features, int64_t out_features);
std::unique_ptr<Node> make_relu(std::string layer);
std::unique_ptr<Node> make_max_pool2d(std::string layer, int64_t kernel);
std::unique_ptr<Node> make_group_norm(std::string layer, int64_t groups, int64_t channels);
std::unique_ptr<Node> make_log_softmax(std::string layer);

}  // namespace mptrain
