// Configuration logging, the stdout summary and the metrics file (see report.h).
#include "report.h"

#include "errors.h"

#include <fmt/format.h>

#include <fstream>

namespace mptrain {

namespace {

std::string loss_scale_text(const LossScaleConfig& s, const std::string& given) {
  if (s.kind != LossScaleKind::kDynamic) return given;
  return fmt::format("dynamic(init={},growth={},backoff={},interval={})", s.init, s.growth, s.backoff, s.interval);
}

std::string optimizer_text(const OptimizerConfig& o) {
  if (o.kind == OptimizerKind::kSgd) {
    return fmt::format("sgd(momentum={},weight_decay={})", o.momentum, o.weight_decay);
  }
  return fmt::format("adamw(beta1={},beta2={},eps={},weight_decay={})", o.beta1, o.beta2, o.eps, o.weight_decay);
}

std::string overrides_text(const std::map<std::string, DType>& overrides) {
  std::string text;
  for (const auto& [layer, dtype] : overrides) text += fmt::format("{}{}={}", text.empty() ? "" : ",", layer, dtype_name(dtype));
  return text.empty() ? "none" : text;
}

}  // namespace

ConfigItems describe_config(const TrainConfig& c, const PrecisionPolicy& policy, const Model& model) {
  ConfigItems items{
      {"model", c.model == "mlp" ? fmt::format("mlp(hidden={})", c.hidden) : "cnn"},
      {"parameters", std::to_string(model.parameter_count())},
      {"precision", precision_mode_name(c.precision)},
      {"loss_scale", loss_scale_text(c.loss_scale, c.loss_scale_text)},
      {"optimizer", optimizer_text(c.optimizer)},
      {"lr", fmt::format("{}", c.optimizer.lr)},
      {"lr_schedule", c.optimizer.schedule_text},
      {"optimizer_state", dtype_name(c.optimizer.state_dtype)},
      {"stochastic_rounding", c.optimizer.stochastic_rounding ? "on" : "off"},
      {"batch_size", std::to_string(c.batch_size)},
      {"epochs", std::to_string(c.epochs)},
      {"image_size", std::to_string(c.image_size)},
      {"seed", std::to_string(c.seed)},
      {"threads", std::to_string(c.threads)},
      {"device", c.device},
      {"train_subset", std::to_string(c.train_subset)},
      {"test_subset", std::to_string(c.test_subset)},
      {"partials", c.partials_fp16 ? "fp16" : "fp32"},
      {"layer_precision", overrides_text(c.layer_precision)},
      {"op_precisions", model.precision_summary()},
  };
  if (policy.is_amp()) {
    items.emplace_back("low_precision_ops", join_ops(policy.lists().low_precision));
    items.emplace_back("fp32_ops", join_ops(policy.lists().fp32));
  }
  if (c.precision == PrecisionMode::kFp8) {
    items.emplace_back("fp8_recipe", fp8_recipe_name(c.fp8.recipe));
    items.emplace_back("fp8_format", fp8_format_name(c.fp8));
    if (c.fp8.recipe == Fp8Recipe::kDelayed) items.emplace_back("fp8_amax_history", std::to_string(c.fp8.amax_history));
    std::string kept;
    for (const std::string& layer : c.fp8.keep_bf16) kept += (kept.empty() ? "" : ",") + layer;
    items.emplace_back("fp8_keep_bf16", kept.empty() ? "none" : kept);
  }
  if (c.fault) {
    static const char* kinds[] = {"nan", "inf", "-inf"};
    items.emplace_back("fault", fmt::format("{}@{}:{}:{}", kinds[c.fault->kind], c.fault->layer, c.fault->step, c.fault->index));
  }
  if (c.fault && c.fault_rank) items.emplace_back("fault_rank", std::to_string(*c.fault_rank));
  if (c.data_parallel) {
    items.emplace_back("data_parallel", "mpi");
    items.emplace_back("world_size", std::to_string(c.world_size));
  }
  return items;
}

void log_config(const ConfigItems& items) {
  for (const auto& [key, value] : items) mpt_log_text(key.c_str(), value.c_str());
}

void print_summary(const RunResult& result) {
  const MemoryLedger& ledger = memory_ledger();
  fmt::print("test accuracy: {:.2f}%\n", result.test_accuracy);
  fmt::print("mean step time: {:.3f} ms ({} steps, {} skipped), {:.0f} images/s\n", result.step_time_ms,
             result.steps, result.skipped_steps, result.images_per_s);
  fmt::print("final loss scale: {}\n", result.final_loss_scale);
  // The ledger counts the trainer's own tensors; the kernel library's cached scratch goes through
  // mpt_alloc too, where a tracer sees it, but not through this ledger.
  fmt::print("peak memory of the trainer's tensors by category (the kernel library's scratch is not "
             "counted here; a trace records it as workspace):\n");
  for (int c = 0; c < kNumCategories; ++c) {
    fmt::print("  {:<16} {:>14} bytes\n", category_name(c), ledger.peak(c));
  }
  fmt::print("  {:<16} {:>14} bytes\n", "total", ledger.peak_total());
}

nlohmann::json metrics_json(const ConfigItems& config, const RunResult& result, const Runtime& rt) {
  const MemoryLedger& ledger = memory_ledger();
  nlohmann::json j;
  j["test_accuracy"] = result.test_accuracy;
  j["epochs"] = nlohmann::json::array();
  for (const EpochSummary& e : result.epochs) {
    j["epochs"].push_back({{"loss", e.loss}, {"train_accuracy", e.train_accuracy}, {"images_per_s", e.images_per_s}, {"steps", e.steps}});
  }
  j["losses"] = result.losses;
  j["loss_scales"] = result.loss_scales;
  j["images_per_s"] = result.images_per_s;
  j["step_time_ms"] = result.step_time_ms;
  j["train_cpu_seconds"] = result.train_cpu_seconds;
  j["steps"] = result.steps;
  j["skipped_steps"] = result.skipped_steps;
  j["final_loss_scale"] = result.final_loss_scale;
  nlohmann::json peak;
  for (int c = 0; c < kNumCategories; ++c) peak[category_name(c)] = ledger.peak(c);
  peak["total"] = ledger.peak_total();
  j["peak_memory_bytes"] = peak;
  j["kernel_launches"] = rt.launches();
  j["kernel_launches_by_kernel"] = rt.launches_by_kernel();
  j["allocations"] = ledger.allocations();
  nlohmann::json cfg;
  for (const auto& [key, value] : config) cfg[key] = value;
  j["config"] = cfg;
  return j;
}

void write_metrics(const std::string& path, const nlohmann::json& metrics) {
  std::ofstream out(path);
  if (!out) throw UsageError(fmt::format("--metrics-json: cannot write '{}'", path));
  out << metrics.dump(2) << "\n";
  if (!out) throw UsageError(fmt::format("--metrics-json: writing '{}' failed", path));
}

}  // namespace mptrain
