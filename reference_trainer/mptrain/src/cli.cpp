// Command-line parsing (see cli.h). Option semantics are documented in docs/mptrain.md.
#include "cli.h"

#include "errors.h"
#include "fpscope/contract/scaling_recipes.h"
#include "lr_schedule.h"
#include "op_lists.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <thread>

namespace mptrain {

void parse_loss_scale(const std::string& text, LossScaleConfig& scale) {
  if (text == "none") {
    scale.kind = LossScaleKind::kNone;
  } else if (text == "dynamic") {
    scale.kind = LossScaleKind::kDynamic;
  } else if (text.rfind("static:", 0) == 0) {
    const std::string value = text.substr(7);
    double parsed = 0.0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (ec != std::errc() || end != value.data() + value.size() || !(parsed > 0.0)) {
      throw UsageError(fmt::format("--loss-scale '{}': the static scale must be a positive number", text));
    }
    scale.kind = LossScaleKind::kStatic;
    scale.init = parsed;
  } else {
    throw UsageError(fmt::format("--loss-scale '{}' is not none, static:N or dynamic", text));
  }
}

namespace {

struct RawOptions {
  std::string precision = "fp32";
  std::string optimizer = "sgd";
  std::string optimizer_state = "fp32";
  std::string partials = "fp32";
  std::string layer_precision;
  std::string fault;
  std::optional<int> fault_rank;
  std::optional<double> lr;
  std::optional<double> weight_decay;
  std::optional<std::string> fp8_recipe, fp8_format, fp8_keep_bf16;
  std::optional<int64_t> fp8_amax_history;
};

// CLI::PositiveNumber prints DBL_MAX as the bound; this says it plainly.
const CLI::Validator kPositive(
    [](std::string& text) {
      try {
        std::size_t used = 0;
        double v = std::stod(text, &used);
        if (used == text.size() && v > 0.0) return std::string();
      } catch (const std::exception&) {
      }
      return "'" + text + "' is not a positive number";
    },
    "POSITIVE");

void add_options(CLI::App& app, TrainConfig& c, RawOptions& raw) {
  app.add_option("--model", c.model, "cnn (the conv/GroupNorm CNN) or mlp")
      ->check(CLI::IsMember({"cnn", "mlp"}))->capture_default_str();
  app.add_option("--hidden", c.hidden, "MLP hidden width")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "folder with FashionMNIST's IDX .gz files")->capture_default_str();
  app.add_option("--image-size", c.image_size, "image side in pixels, 28 or larger (bilinear resize)")
      ->check(CLI::Range(28, 1024))->capture_default_str();
  app.add_option("--train-subset", c.train_subset, "train on the first N images (0: all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--test-subset", c.test_subset, "test on the first N images (0: all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seed", c.seed, "seed of weight init, shuffling and stochastic rounding")->capture_default_str();
  app.add_option("--threads", c.threads, "kernel threads (default: one per hardware thread)")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "images per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--epochs", c.epochs, "passes over the training set")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--device", c.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  app.add_option("--precision", raw.precision, "fp32, fp16, bf16, amp-fp16, amp-bf16 or fp8 (amp-bf16 with fp8 operands)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "amp-fp16", "amp-bf16", "fp8"}))->capture_default_str();
  app.add_option("--fp8-recipe", raw.fp8_recipe,
                 "fp8 scaling: current, delayed, mxfp8, mxfp8-ceil, block, or (4-bit) mxfp4, nvfp4 (default current)")
      ->check(CLI::IsMember(std::vector<std::string>(fpscope::contract::kTrainerFp8Recipes.begin(),
                                                     fpscope::contract::kTrainerFp8Recipes.end())));
  app.add_option("--fp8-format", raw.fp8_format, "hybrid (e4m3 forward, e5m2 gradients) or e4m3 (default hybrid)")
      ->check(CLI::IsMember({fpscope::contract::kTrainerFp8Formats[0], fpscope::contract::kTrainerFp8Formats[1]}));
  app.add_option("--fp8-amax-history", raw.fp8_amax_history, "delayed scaling: steps of amax history (default 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--fp8-keep-bf16", raw.fp8_keep_bf16,
                 "layers whose operands stay bf16: conv1,fc2, or @FILE with one a line (fpscope advise writes it)");
  app.add_option("--optimizer-state", raw.optimizer_state, "optimizer state type: fp32, fp16 or bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))->capture_default_str();
  app.add_flag("--stochastic-rounding", c.optimizer.stochastic_rounding,
               "round 16-bit weight updates stochastically");
  app.add_option("--layer-precision", raw.layer_precision,
                 "per-layer type override, e.g. conv1=fp16,fc1=fp32");
  app.add_option("--partials", raw.partials, "accumulator of matmuls and convolutions: fp32 or fp16")
      ->check(CLI::IsMember({"fp32", "fp16"}))->capture_default_str();
  app.add_option("--bf16-ops", c.bf16_ops_file, "file replacing the low-precision op list (amp modes)");
  app.add_option("--fp32-ops", c.fp32_ops_file, "file replacing the fp32 op list (amp modes)");
  app.add_option("--loss-scale", c.loss_scale_text, "none, static:N or dynamic")->capture_default_str();
  app.add_option("--scale-init", c.loss_scale.init, "initial dynamic loss scale")->check(kPositive)->capture_default_str();
  app.add_option("--scale-growth", c.loss_scale.growth, "dynamic growth factor")->check(CLI::Range(1.0, 1e6))->capture_default_str();
  app.add_option("--scale-backoff", c.loss_scale.backoff, "dynamic backoff factor")->check(CLI::Range(1e-9, 1.0))->capture_default_str();
  app.add_option("--scale-interval", c.loss_scale.interval, "finite steps before the scale grows")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  app.add_option("--optimizer", raw.optimizer, "sgd or adamw")->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  app.add_option("--lr", raw.lr, "learning rate (default 0.01 for sgd, 0.001 for adamw)")->check(kPositive);
  app.add_option("--lr-schedule", c.optimizer.schedule_text,
                 "learning rate over the updates: constant, exponential:GAMMA (times GAMMA after each update) or "
                 "cosine:STEPS (down to 0 at update STEPS+1 and after)")
      ->capture_default_str();
  app.add_option("--momentum", c.optimizer.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--weight-decay", raw.weight_decay, "weight decay (default 0 for sgd, 0.01 for adamw)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--beta1", c.optimizer.beta1, "AdamW beta1")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--beta2", c.optimizer.beta2, "AdamW beta2")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--eps", c.optimizer.eps, "AdamW epsilon")->check(kPositive)->capture_default_str();
  app.add_option("--fault", raw.fault, "plant a NaN/Inf: KIND@LAYER:STEP[:INDEX], e.g. nan@fc1:5");
  app.add_option("--fault-rank", raw.fault_rank, "with --fault and --data-parallel: plant it on this rank only")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--metrics-json", c.metrics_json, "write the run's metrics to this JSON file (rank 0 writes it)");
  app.add_flag("--data-parallel", c.data_parallel,
               "data parallel over MPI (mpirun -np N mptrain --data-parallel ...): --batch-size is the global batch, "
               "split over the ranks; gradients, loss and found-inf are all-reduced");
  app.add_flag("-v,--verbose", c.verbose, "print the precision plan and per-step details on stderr");
}

void finish_fp8(TrainConfig& c, const RawOptions& raw) {
  const bool any = raw.fp8_recipe || raw.fp8_format || raw.fp8_amax_history || raw.fp8_keep_bf16;
  if (c.precision != PrecisionMode::kFp8) {
    if (any) throw UsageError("--fp8-recipe, --fp8-format, --fp8-amax-history and --fp8-keep-bf16 apply to --precision fp8 only");
    return;
  }
  if (raw.fp8_recipe) c.fp8.recipe = parse_fp8_recipe(*raw.fp8_recipe);
  if (raw.fp8_format && is_fp4_recipe(c.fp8.recipe))
    throw UsageError(fmt::format("--fp8-format applies to the 8-bit recipes: {} quantizes every operand to e2m1",
                                 fp8_recipe_name(c.fp8.recipe)));
  c.fp8.hybrid = raw.fp8_format.value_or(fpscope::contract::kTrainerFp8Formats[0]) == fpscope::contract::kTrainerFp8Formats[0];
  if (raw.fp8_amax_history) {
    if (c.fp8.recipe != Fp8Recipe::kDelayed) throw UsageError("--fp8-amax-history applies to --fp8-recipe delayed only");
    c.fp8.amax_history = *raw.fp8_amax_history;
  }
  if (raw.fp8_keep_bf16) {
    const std::string& text = *raw.fp8_keep_bf16;
    if (!text.empty() && text[0] == '@') {
      c.fp8.keep_bf16 = read_layer_list_file(text.substr(1), "--fp8-keep-bf16");
      return;
    }
    for (std::size_t begin = 0; begin <= text.size();) {
      const std::size_t end = std::min(text.find(',', begin), text.size());
      if (end == begin) throw UsageError(fmt::format("--fp8-keep-bf16 '{}': an empty layer name", text));
      c.fp8.keep_bf16.insert(text.substr(begin, end - begin));
      begin = end + 1;
    }
  }
}

void finish_config(TrainConfig& c, const RawOptions& raw) {
  c.precision = parse_precision_mode(raw.precision);
  c.optimizer.kind = raw.optimizer == "adamw" ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
  c.optimizer.lr = raw.lr.value_or(c.optimizer.kind == OptimizerKind::kAdamW ? 0.001 : 0.01);
  c.optimizer.weight_decay = raw.weight_decay.value_or(c.optimizer.kind == OptimizerKind::kAdamW ? 0.01 : 0.0);
  c.optimizer.state_dtype = *parse_float_dtype(raw.optimizer_state);
  c.partials_fp16 = raw.partials == "fp16";
  if (!raw.layer_precision.empty()) c.layer_precision = parse_layer_precision(raw.layer_precision);
  if (!raw.fault.empty()) c.fault = parse_fault_spec(raw.fault);
  if (raw.fault_rank && (!c.fault || !c.data_parallel))
    throw UsageError("--fault-rank needs --fault and --data-parallel");
  c.fault_rank = raw.fault_rank;
  // The collective kernel (allreduce_sum) has no CUDA version yet.
  if (c.data_parallel && c.device == "cuda") throw UsageError("--data-parallel runs on --device cpu only");
  parse_loss_scale(c.loss_scale_text, c.loss_scale);
  c.optimizer.schedule = parse_lr_schedule(c.optimizer.schedule_text);
  finish_fp8(c, raw);
  if (!PrecisionPolicy(c.precision).is_amp() && (!c.bf16_ops_file.empty() || !c.fp32_ops_file.empty())) {
    throw UsageError("--bf16-ops and --fp32-ops apply to --precision amp-fp16, amp-bf16 or fp8 only");
  }
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, char** argv) {
  TrainConfig config;
  config.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  RawOptions raw;
  CLI::App app{"mptrain: the reference mixed-precision trainer (FashionMNIST, CNN or MLP) whose "
               "kernels all go through libmpt_kernels.so"};
  app.get_formatter()->column_width(34);
  // A later occurrence of an option replaces an earlier one, as scripts that append flags expect.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_options(app, config, raw);
  app.footer("Exit codes: 0 success, 1 a kernel failed, 2 bad usage, missing data or no usable device.\n"
             "Precision rules, metrics and NVTX ranges: docs/mptrain.md");
  try {
    app.parse(argc, argv);
    finish_config(config, raw);
  } catch (const CLI::CallForHelp& e) {
    return {std::nullopt, app.exit(e)};
  } catch (const CLI::ParseError& e) {
    std::cerr << "mptrain: " << e.what() << "\nRun 'mptrain --help' for the options.\n";
    return {std::nullopt, 2};
  } catch (const UsageError& e) {
    std::cerr << "mptrain: " << e.what() << "\n";
    return {std::nullopt, 2};
  }
  return {std::move(config), 0};
}

}  // namespace mptrain
