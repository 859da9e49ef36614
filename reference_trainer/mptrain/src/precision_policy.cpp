// The precision rules of precision_policy.h.
#include "precision_policy.h"

#include "errors.h"
#include "fpscope/contract/scaling_recipes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace mptrain {

PrecisionMode parse_precision_mode(const std::string& text) {
  if (text == "fp32") return PrecisionMode::kFp32;
  if (text == "fp16") return PrecisionMode::kFp16;
  if (text == "bf16") return PrecisionMode::kBf16;
  if (text == "amp-fp16") return PrecisionMode::kAmpFp16;
  if (text == "amp-bf16") return PrecisionMode::kAmpBf16;
  if (text == "fp8") return PrecisionMode::kFp8;
  throw UsageError(fmt::format("--precision: '{}' is not one of fp32, fp16, bf16, amp-fp16, amp-bf16, fp8", text));
}

std::string precision_mode_name(PrecisionMode mode) {
  switch (mode) {
    case PrecisionMode::kFp32: return "fp32";
    case PrecisionMode::kFp16: return "fp16";
    case PrecisionMode::kBf16: return "bf16";
    case PrecisionMode::kAmpFp16: return "amp-fp16";
    case PrecisionMode::kAmpBf16: return "amp-bf16";
    case PrecisionMode::kFp8: return "fp8";
  }
  return "?";
}

// The names are the trace contract's, which the analyzer reads back from the configuration log.
static_assert(fpscope::contract::kTrainerFp8Recipes.size() == std::size_t(Fp8Recipe::kNvfp4) + 1,
              "Fp8Recipe lists the contract's kTrainerFp8Recipes in order");

Fp8Recipe parse_fp8_recipe(const std::string& text) {
  const auto& names = fpscope::contract::kTrainerFp8Recipes;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (text == names[i]) return static_cast<Fp8Recipe>(i);
  throw UsageError(fmt::format("--fp8-recipe: '{}' is not one of {}", text, fmt::join(names, ", ")));
}

std::string fp8_recipe_name(Fp8Recipe recipe) { return fpscope::contract::kTrainerFp8Recipes.at(std::size_t(recipe)); }

std::string fp8_description(const Fp8Config& config) {
  std::string text = fp8_recipe_name(config.recipe);
  if (config.recipe == Fp8Recipe::kDelayed) text += fmt::format(" (amax history {})", config.amax_history);
  if (is_fp4_recipe(config.recipe)) return text + ", e2m1 everywhere";
  return text + (config.hybrid ? ", e4m3 forward and e5m2 gradients" : ", e4m3 everywhere");
}

std::string fp8_format_name(const Fp8Config& config) {
  const auto& formats = fpscope::contract::kTrainerFp8Formats;
  return is_fp4_recipe(config.recipe) ? formats[2] : config.hybrid ? formats[0] : formats[1];
}

std::map<std::string, DType> parse_layer_precision(const std::string& text) {
  std::map<std::string, DType> overrides;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(fmt::format("--layer-precision: '{}' is not LAYER=DTYPE (e.g. conv1=fp16)", item));
    }
    auto dtype = parse_float_dtype(item.substr(eq + 1));
    if (!dtype) {
      throw UsageError(fmt::format("--layer-precision: '{}' is not fp32, fp16 or bf16", item.substr(eq + 1)));
    }
    overrides[item.substr(0, eq)] = *dtype;
  }
  return overrides;
}

PrecisionPolicy::PrecisionPolicy(PrecisionMode mode) : mode_(mode) {
  if (mode == PrecisionMode::kAmpFp16) {
    lists_ = autocast_fp16_default_lists();
  } else if (mode == PrecisionMode::kAmpBf16 || mode == PrecisionMode::kFp8) {
    lists_ = hmp_default_lists();
  }
}

bool PrecisionPolicy::is_amp() const {
  return mode_ == PrecisionMode::kAmpFp16 || mode_ == PrecisionMode::kAmpBf16 || mode_ == PrecisionMode::kFp8;
}

DType PrecisionPolicy::low_dtype() const {
  switch (mode_) {
    case PrecisionMode::kFp16:
    case PrecisionMode::kAmpFp16: return MPT_DTYPE_F16;
    case PrecisionMode::kBf16:
    case PrecisionMode::kAmpBf16:
    case PrecisionMode::kFp8: return MPT_DTYPE_BF16;
    case PrecisionMode::kFp32: break;
  }
  return MPT_DTYPE_F32;
}

DType PrecisionPolicy::input_dtype() const {
  return is_amp() ? MPT_DTYPE_F32 : low_dtype();
}

DType PrecisionPolicy::param_storage_dtype(const std::string& layer) const {
  if (is_amp()) return MPT_DTYPE_F32;
  auto it = overrides_.find(layer);
  return it != overrides_.end() ? it->second : low_dtype();
}

OpPrecision PrecisionPolicy::op_precision(const std::string& op, const std::string& layer,
                                          DType input_dtype, std::optional<DType> param_dtype) const {
  if (auto it = overrides_.find(layer); it != overrides_.end()) return {it->second, "layer override"};
  if (!is_amp()) {
    if (param_dtype) return {*param_dtype, "parameter type"};
    return {input_dtype, "input type"};
  }
  // An op on both lists runs in fp32: keeping it wide is the safe reading of a contradiction.
  if (lists_.fp32.count(op) != 0) return {MPT_DTYPE_F32, "fp32 list"};
  if (lists_.low_precision.count(op) != 0) return {low_dtype(), dtype_name(low_dtype()) + " list"};
  if (param_dtype) return {widest(input_dtype, *param_dtype), "widest input"};
  return {input_dtype, "input type"};
}

}  // namespace mptrain
