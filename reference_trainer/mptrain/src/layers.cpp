// The nodes of layers.h: conv2d, linear, relu, max_pool2d, group_norm, log_softmax.
#include "layers.h"

#include <cmath>

namespace mptrain {

// [SECTION] Node basics

std::vector<Param*> Node::params() {
  std::vector<Param*> out;
  for (Param& p : params_) out.push_back(&p);
  return out;
}

void Node::release() { input_.reset(); }

void Node::choose_precision(BuildContext& ctx, DType in_dtype, std::optional<DType> param_dtype) {
  OpPrecision choice = ctx.policy.op_precision(op_, layer_, in_dtype, param_dtype);
  compute_ = choice.dtype;
  reason_ = choice.reason;
  partials_fp16_ = ctx.partials_fp16;
}

std::vector<float> uniform_init(std::mt19937_64& rng, int64_t count, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) {
    // 53 random bits to a double in [0, 1): the same on every standard library.
    double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    v = static_cast<float>((2.0 * unit - 1.0) * bound);
  }
  return values;
}

Param Node::make_param(BuildContext& ctx, const std::string& name, Shape shape, std::vector<float> init) {
  Runtime& rt = ctx.runtime;
  Param p;
  p.name = name;
  if (ctx.policy.is_amp()) {
    // The fp32 master is what the optimizer updates; a 16-bit op also gets a working copy.
    const bool separate = compute_ != MPT_DTYPE_F32;
    p.master = rt.alloc(separate ? name + ".master" : name, shape, MPT_DTYPE_F32, MPT_CAT_MASTER_WEIGHT);
    rt.upload(init, p.master);
    p.weight = p.master;
    if (separate) {
      p.weight = rt.alloc(name, shape, compute_, MPT_CAT_WEIGHT);
      rt.cast_into(p.master, p.weight);
    }
    p.grad = rt.alloc(name + ".grad", shape, MPT_DTYPE_F32, MPT_CAT_GRADIENT);
  } else {
    p.weight = rt.alloc(name, shape, compute_, MPT_CAT_WEIGHT);
    rt.upload(init, p.weight);
    p.grad = rt.alloc(name + ".grad", shape, compute_, MPT_CAT_GRADIENT);
  }
  return p;
}

const Tensor& Node::take_input(Runtime& rt, const Tensor& x) {
  input_name_ = x.name();
  input_dtype_ = x.dtype();
  input_shape_ = x.shape();
  input_ = rt.cast(x, compute_);
  return input_;
}

Tensor Node::alloc_input_grad(Runtime& rt) const {
  return rt.alloc(input_name_ + ".grad", input_shape_, input_dtype_, MPT_CAT_ACTIVATION);
}

namespace {

// [SECTION] matrix-product nodes: conv2d and linear, whose operands fp8 training quantizes

class MatrixNode : public Node {
 public:
  using Node::Node;

  void release() override {
    Node::release();
    weight_operand_.reset();
  }

 protected:
  // Chooses the precision and whether this layer's operands go through fp8 (fp8.h).
  void plan_precision(BuildContext& ctx, DType in_dtype) {
    choose_precision(ctx, in_dtype, ctx.policy.param_storage_dtype(layer_));
    if (ctx.fp8 == nullptr) return;
    if (compute_ == MPT_DTYPE_F32) {
      reason_ += "; fp32: operands not quantized";
      return;
    }
    if (!ctx.fp8->quantizes(layer_)) {
      reason_ += "; kept in bf16 (--fp8-keep-bf16)";
      return;
    }
    fp8_ = ctx.fp8;
    reason_ += "; fp8 operands (" + fp8_description(fp8_->config()) + ")";
  }

  // The input (cast to the compute type, then quantized in fp8 mode; kept for backward) and the
  // weight as the forward product reads them.
  const Tensor& forward_input(Runtime& rt, const Tensor& x) {
    if (fp8_ != nullptr) {
      const Tensor cast = take_input(rt, x);
      input_ = fp8_->quantize(rt, cast, Fp8Operand::kActivation);
    } else {
      take_input(rt, x);
    }
    weight_operand_ = fp8_ != nullptr ? fp8_->quantize(rt, params_[0].weight, Fp8Operand::kWeight) : params_[0].weight;
    return input_;
  }
  const Tensor& weight_operand() const { return weight_operand_; }
  // The output gradient as the backward products read it.
  Tensor gradient_operand(Runtime& rt, const Tensor& dy) {
    return fp8_ != nullptr ? fp8_->quantize(rt, dy, Fp8Operand::kGradient) : dy;
  }

 private:
  Fp8Quantizer* fp8_ = nullptr;
  Tensor weight_operand_;
};

// [SECTION] conv2d (stride 1, no padding, as nn.Conv2d's defaults)

class Conv2d final : public MatrixNode {
 public:
  Conv2d(std::string layer, int64_t c, int64_t k, int64_t r) : MatrixNode(std::move(layer), "conv2d"), c_(c), k_(k), r_(r) {}

  Shape plan(BuildContext& ctx, const Shape& in, DType in_dtype) override {
    plan_precision(ctx, in_dtype);
    const int64_t fan_in = c_ * r_ * r_;
    params_.push_back(make_param(ctx, layer_ + ".weight", {k_, c_, r_, r_}, uniform_init(ctx.init_rng, k_ * fan_in, fan_in)));
    params_.push_back(make_param(ctx, layer_ + ".bias", {k_}, uniform_init(ctx.init_rng, k_, fan_in)));
    return {k_, in[1] - r_ + 1, in[2] - r_ + 1};
  }

  Tensor forward(Runtime& rt, const Tensor& x_in) override {
    const Tensor& x = forward_input(rt, x_in);
    Tensor y = rt.alloc(layer_ + ".out", {x.dim(0), k_, x.dim(2) - r_ + 1, x.dim(3) - r_ + 1}, compute_, MPT_CAT_ACTIVATION);
    rt.launch("conv2d_forward", {&x, &weight_operand(), &params_[1].weight}, {&y}, scalars());
    return y;
  }

  Tensor backward(Runtime& rt, const Tensor& dy_in, bool need_dx) override {
    const Tensor dy = gradient_operand(rt, dy_in);
    rt.launch("conv2d_backward_weight", {&dy, &input_}, {&params_[0].grad, &params_[1].grad}, scalars());
    if (!need_dx) return {};
    Tensor dx = alloc_input_grad(rt);
    rt.launch("conv2d_backward_data", {&dy, &weight_operand()}, {&dx}, scalars());
    return dx;
  }

 private:
  Scalars scalars() const { return {{"stride", 1}, {"padding", 0}, {"partials_fp16", partials_fp16_ ? 1.0 : 0.0}}; }
  int64_t c_, k_, r_;
};

// [SECTION] linear (flattens its input, as torch.flatten(x, 1) before nn.Linear)

class Linear final : public MatrixNode {
 public:
  Linear(std::string layer, int64_t i, int64_t o) : MatrixNode(std::move(layer), "linear"), i_(i), o_(o) {}

  Shape plan(BuildContext& ctx, const Shape& in, DType in_dtype) override {
    if (i_ <= 0) {  // 0: as many features as the flattened input has
      i_ = 1;
      for (int64_t d : in) i_ *= d;
    }
    plan_precision(ctx, in_dtype);
    params_.push_back(make_param(ctx, layer_ + ".weight", {o_, i_}, uniform_init(ctx.init_rng, o_ * i_, i_)));
    params_.push_back(make_param(ctx, layer_ + ".bias", {o_}, uniform_init(ctx.init_rng, o_, i_)));
    return {o_};
  }

  Tensor forward(Runtime& rt, const Tensor& x_in) override {
    const Tensor& x = forward_input(rt, x_in.reshaped({x_in.dim(0), i_}));
    input_shape_ = x_in.shape();  // the gradient goes back in the unflattened shape
    Tensor y = rt.alloc(layer_ + ".out", {x.dim(0), o_}, compute_, MPT_CAT_ACTIVATION);
    rt.launch("linear_forward", {&x, &weight_operand(), &params_[1].weight}, {&y}, scalars());
    return y;
  }

  Tensor backward(Runtime& rt, const Tensor& dy_in, bool need_dx) override {
    const Tensor dy = gradient_operand(rt, dy_in);
    rt.launch("linear_backward_weight", {&dy, &input_}, {&params_[0].grad, &params_[1].grad}, scalars());
    if (!need_dx) return {};
    Tensor dx = alloc_input_grad(rt);
    Tensor dx_flat = dx.reshaped({dy.dim(0), i_});
    rt.launch("linear_backward_data", {&dy, &weight_operand()}, {&dx_flat}, scalars());
    return dx;
  }

 private:
  Scalars scalars() const { return {{"partials_fp16", partials_fp16_ ? 1.0 : 0.0}}; }
  int64_t i_, o_;
};

// [SECTION] nodes whose backward reads only the output: relu, log_softmax

// Keeps the output instead of the input: the backward kernels of these ops need nothing else.
class OutputSavingNode : public Node {
 public:
  OutputSavingNode(std::string layer, const char* op, const char* forward_kernel)
      : Node(std::move(layer), op), forward_kernel_(forward_kernel) {}

  Shape plan(BuildContext& ctx, const Shape& in, DType in_dtype) override {
    choose_precision(ctx, in_dtype, std::nullopt);
    return in;
  }

  Tensor forward(Runtime& rt, const Tensor& x_in) override {
    const Tensor& x = take_input(rt, x_in);
    y_ = rt.alloc(layer_ + "." + op_ + ".out", x.shape(), compute_, MPT_CAT_ACTIVATION);
    rt.launch(forward_kernel_, {&x}, {&y_});
    input_.reset();  // backward needs only the output
    return y_;
  }

  void release() override {
    Node::release();
    y_.reset();
  }

 protected:
  const char* forward_kernel_;
  Tensor y_;
};

class Relu final : public OutputSavingNode {
 public:
  explicit Relu(std::string layer) : OutputSavingNode(std::move(layer), "relu", "relu_forward") {}

  Tensor backward(Runtime& rt, const Tensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    Tensor dx = alloc_input_grad(rt);
    rt.launch("relu_backward", {&dy, &y_}, {&dx});
    return dx;
  }
};

// [SECTION] max_pool2d (kernel = stride)

class MaxPool2d final : public Node {
 public:
  MaxPool2d(std::string layer, int64_t k) : Node(std::move(layer), "max_pool2d"), k_(k) {}

  Shape plan(BuildContext& ctx, const Shape& in, DType in_dtype) override {
    choose_precision(ctx, in_dtype, std::nullopt);
    return {in[0], in[1] / k_, in[2] / k_};
  }

  Tensor forward(Runtime& rt, const Tensor& x_in) override {
    const Tensor& x = take_input(rt, x_in);
    Shape out{x.dim(0), x.dim(1), x.dim(2) / k_, x.dim(3) / k_};
    Tensor y = rt.alloc(layer_ + ".pool.out", out, compute_, MPT_CAT_ACTIVATION);
    argmax_ = rt.alloc(layer_ + ".pool.argmax", out, MPT_DTYPE_I32, MPT_CAT_ACTIVATION);
    rt.launch("maxpool2d_forward", {&x}, {&y, &argmax_}, {{"kernel", static_cast<double>(k_)}, {"stride", static_cast<double>(k_)}});
    input_.reset();  // backward needs only the argmax
    return y;
  }

  Tensor backward(Runtime& rt, const Tensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    Tensor dx = alloc_input_grad(rt);
    rt.launch("maxpool2d_backward", {&dy, &argmax_}, {&dx});
    return dx;
  }

  void release() override {
    Node::release();
    argmax_.reset();
  }

 private:
  int64_t k_;
  Tensor argmax_;
};

// [SECTION] group_norm (affine: gamma = 1, beta = 0 at start, eps 1e-5 as nn.GroupNorm)

class GroupNorm final : public Node {
 public:
  GroupNorm(std::string layer, int64_t g, int64_t c) : Node(std::move(layer), "group_norm"), g_(g), c_(c) {}

  Shape plan(BuildContext& ctx, const Shape& in, DType in_dtype) override {
    choose_precision(ctx, in_dtype, ctx.policy.param_storage_dtype(layer_));
    params_.push_back(make_param(ctx, layer_ + ".weight", {c_}, std::vector<float>(static_cast<std::size_t>(c_), 1.0f)));
    params_.push_back(make_param(ctx, layer_ + ".bias", {c_}, std::vector<float>(static_cast<std::size_t>(c_), 0.0f)));
    return in;
  }

  Tensor forward(Runtime& rt, const Tensor& x_in) override {
    const Tensor& x = take_input(rt, x_in);
    Tensor y = rt.alloc(layer_ + ".out", x.shape(), compute_, MPT_CAT_ACTIVATION);
    mean_ = rt.alloc(layer_ + ".mean", {x.dim(0), g_}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
    rstd_ = rt.alloc(layer_ + ".rstd", {x.dim(0), g_}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
    rt.launch("group_norm_forward", {&x, &params_[0].weight, &params_[1].weight}, {&y, &mean_, &rstd_},
              {{"groups", static_cast<double>(g_)}, {"eps", 1e-5}});
    return y;
  }

  Tensor backward(Runtime& rt, const Tensor& dy, bool need_dx) override {
    Tensor dx = alloc_input_grad(rt);
    rt.launch("group_norm_backward", {&dy, &input_, &params_[0].weight, &mean_, &rstd_},
              {&dx, &params_[0].grad, &params_[1].grad}, {{"groups", static_cast<double>(g_)}});
    return need_dx ? dx : Tensor{};
  }

  void release() override {
    Node::release();
    mean_.reset();
    rstd_.reset();
  }

 private:
  int64_t g_, c_;
  Tensor mean_, rstd_;
};

// [SECTION] log_softmax over the classes

class LogSoftmax final : public OutputSavingNode {
 public:
  explicit LogSoftmax(std::string layer)
      : OutputSavingNode(std::move(layer), "log_softmax", "log_softmax_forward") {}

  Tensor backward(Runtime& rt, const Tensor& dy, bool) override {
    Tensor dx = alloc_input_grad(rt);
    rt.launch("log_softmax_backward", {&dy, &y_}, {&dx});
    return dx;
  }
};

}  // namespace

std::unique_ptr<Node> make_conv2d(std::string layer, int64_t in_channels, int64_t out_channels, int64_t kernel) {
  return std::make_unique<Conv2d>(std::move(layer), in_channels, out_channels, kernel);
}
std::unique_ptr<Node> make_linear(std::string layer, int64_t in_features, int64_t out_features) {
  return std::make_unique<Linear>(std::move(layer), in_features, out_features);
}
std::unique_ptr<Node> make_relu(std::string layer) { return std::make_unique<Relu>(std::move(layer)); }
std::unique_ptr<Node> make_max_pool2d(std::string layer, int64_t kernel) {
  return std::make_unique<MaxPool2d>(std::move(layer), kernel);
}
std::unique_ptr<Node> make_group_norm(std::string layer, int64_t groups, int64_t channels) {
  return std::make_unique<GroupNorm>(std::move(layer), groups, channels);
}
std::unique_ptr<Node> make_log_softmax(std::string layer) { return std::make_unique<LogSoftmax>(std::move(layer)); }

}  // namespace mptrain
