// Model construction and the forward/backward walk over its nodes (see model.h).
#include "model.h"

#include "dataset.h"
#include "errors.h"
#include "nvtx_ranges.h"

#include <fmt/format.h>

#include <optional>

namespace mptrain {

Model::Model(const TrainConfig& config, const PrecisionPolicy& policy, Runtime& runtime) {
  if (config.model == "cnn") {
    build_cnn(config);
  } else {
    build_mlp(config);
  }
  for (const auto& [layer, dtype] : config.layer_precision) check_layer_name(layer, "--layer-precision");
  if (config.fault) check_layer_name(config.fault->layer, "--fault");
  for (const std::string& layer : config.fp8.keep_bf16) {
    check_layer_name(layer, "--fp8-keep-bf16");
    std::string products;  // the layers whose operands fp8 quantizes
    bool has_product = false;
    for (const auto& node : nodes_) {
      if (node->op() != "conv2d" && node->op() != "linear") continue;
      products += (products.empty() ? "" : ", ") + node->layer();
      has_product = has_product || node->layer() == layer;
    }
    if (!has_product)
      throw UsageError(fmt::format("--fp8-keep-bf16: layer '{}' has no linear or conv2d op to keep out of fp8 (those "
                                   "that do: {})", layer, products));
  }
  if (policy.mode() == PrecisionMode::kFp8) fp8_ = std::make_unique<Fp8Quantizer>(config.fp8);

  std::mt19937_64 init_rng(config.seed);
  BuildContext ctx{runtime, policy, init_rng, config.partials_fp16, fp8_.get()};
  Shape shape{1, config.image_size, config.image_size};
  DType dtype = policy.input_dtype();
  for (auto& node : nodes_) {
    shape = node->plan(ctx, shape, dtype);
    for (int64_t d : shape) {
      if (d <= 0) throw UsageError(fmt::format("--image-size {} is too small for the {} model", config.image_size, config.model));
    }
    dtype = node->compute_dtype();
  }
  logp_shape_ = shape;
  logp_dtype_ = dtype;
  nll_precision_ = policy.op_precision("nll_loss", "loss", dtype, std::nullopt);
}

void Model::add(std::unique_ptr<Node> node) {
  if (layers_.empty() || layers_.back() != node->layer()) layers_.push_back(node->layer());
  nodes_.push_back(std::move(node));
}

void Model::build_cnn(const TrainConfig&) {
  add(make_conv2d("conv1", 1, 5, 3));
  add(make_relu("conv1"));
  add(make_max_pool2d("conv1", 2));
  add(make_conv2d("conv2", 5, 12, 5));
  add(make_relu("conv2"));
  add(make_group_norm("norm", 3, 12));
  add(make_linear("fc1", 0, 100));
  add(make_relu("fc1"));
  add(make_linear("fc2", 100, kNumClasses));
  add(make_log_softmax("loss"));
}

void Model::build_mlp(const TrainConfig& config) {
  add(make_linear("fc1", 0, config.hidden));
  add(make_relu("fc1"));
  add(make_linear("fc2", config.hidden, config.hidden));
  add(make_relu("fc2"));
  add(make_linear("fc3", config.hidden, kNumClasses));
  add(make_log_softmax("loss"));
}

void Model::check_layer_name(const std::string& layer, const char* option) const {
  for (const std::string& name : layers_) {
    if (name == layer) return;
  }
  std::string known;
  for (const std::string& name : layers_) known += (known.empty() ? "" : ", ") + name;
  throw UsageError(fmt::format("{}: the model has no layer '{}' (layers: {})", option, layer, known));
}

std::vector<Param*> Model::params() {
  std::vector<Param*> all;
  for (auto& node : nodes_) {
    for (Param* p : node->params()) all.push_back(p);
  }
  return all;
}

int64_t Model::parameter_count() const {
  int64_t count = 0;
  for (const auto& node : nodes_) {
    for (Param* p : node->params()) count += p->weight.numel();
  }
  return count;
}

Tensor Model::forward(Runtime& rt, const Tensor& x, const FaultSpec* fault) {
  Tensor h = x;
  std::optional<NvtxRange> layer_range;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = *nodes_[i];
    if (i == 0 || nodes_[i - 1]->layer() != node.layer()) {
      layer_range.reset();
      layer_range.emplace(RangeCategory::kLayer, node.layer().c_str());
    }
    h = node.forward(rt, h);
    const bool last_of_layer = i + 1 == nodes_.size() || nodes_[i + 1]->layer() != node.layer();
    if (fault != nullptr && last_of_layer && fault->layer == node.layer()) {
      rt.launch("inject_fault", {&h}, {&h},
                {{"index", static_cast<double>(fault->index)}, {"kind", static_cast<double>(fault->kind)}});
    }
  }
  logp_ = h;
  return h;
}

Tensor Model::loss(Runtime& rt, const Tensor& logp, const Tensor& labels, int64_t batch) {
  NvtxRange range(RangeCategory::kLayer, "loss");
  // The loss value is fp32 whatever the policy; the policy decides the type nll_loss reads.
  Tensor input = rt.cast(logp, nll_precision_.dtype);
  Tensor value = rt.alloc("loss.out", {1}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
  rt.launch("nll_loss_forward", {&input, &labels}, {&value}, {{"batch", static_cast<double>(batch)}});
  return value;
}

void Model::backward(Runtime& rt, const Tensor& labels, const Tensor& scale, int64_t batch) {
  Tensor dy;
  {
    NvtxRange range(RangeCategory::kLayer, "loss");
    dy = rt.alloc(logp_.name() + ".grad", logp_.shape(), logp_.dtype(), MPT_CAT_ACTIVATION);
    rt.launch("nll_loss_backward", {&labels, &scale}, {&dy}, {{"batch", static_cast<double>(batch)}});
  }
  std::optional<NvtxRange> layer_range;
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    Node& node = *nodes_[i];
    if (i + 1 == nodes_.size() || nodes_[i + 1]->layer() != node.layer()) {
      layer_range.reset();
      layer_range.emplace(RangeCategory::kLayer, node.layer().c_str());
    }
    // Gradients of activations are freed as soon as the next node down has consumed them.
    dy = node.backward(rt, dy, i > 0);
  }
}

void Model::release() {
  logp_.reset();
  for (auto& node : nodes_) node->release();
}

void Model::set_training(bool training) {
  if (fp8_) fp8_->set_training(training);
}

std::string Model::precision_plan() const {
  std::string text;
  for (const auto& node : nodes_) {
    text += fmt::format("  {:<6} {:<12} {:<5} ({})\n", node->layer(), node->op(),
                        dtype_name(node->compute_dtype()), node->precision_reason());
  }
  text += fmt::format("  {:<6} {:<12} {:<5} ({}; the loss value is fp32)\n", "loss", "nll_loss",
                      dtype_name(nll_precision_.dtype), nll_precision_.reason);
  return text;
}

std::string Model::precision_summary() const {
  std::string text;
  for (const auto& node : nodes_) {
    text += fmt::format("{}{}.{}={}", text.empty() ? "" : ",", node->layer(), node->op(),
                        dtype_name(node->compute_dtype()));
  }
  return text;
}

}  // namespace mptrain
