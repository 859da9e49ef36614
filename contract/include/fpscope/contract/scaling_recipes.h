// The fp8 and microscaling recipes whose outcome fpscope forecasts for the operands that fp8
// training quantizes, in the one order used by wire records, the trace's recipe table and the
// analyzer's arrays.
//
// Every recipe scales a value x by a factor s (per tensor, per row or per block) and rounds the
// scaled value x*s to an element format, nearest even, saturating at the format's largest finite
// value; x is recovered as q * (1/s). docs/statistics.md ("Scaling recipes") states each rule exactly;
// the injector's statistics (fpscope/fp8_recipes.h) implement them and the tests check them
// against an independent quantizer.
//
// Part of the trace contract (see contract.h).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "fpscope/contract/number_formats.h"

namespace fpscope::contract {

// The element formats the recipes round to.
enum class ElementFormat : uint8_t { E4M3 = 0, E5M2 = 1, E2M1 = 2 };
struct ElementFormatInfo {
  ElementFormat id;
  const char* name;
  FloatFormat bits;
};
inline constexpr std::array<ElementFormatInfo, 3> kElementFormats = {{
    {ElementFormat::E4M3, "e4m3", kE4M3},
    {ElementFormat::E5M2, "e5m2", kE5M2},
    {ElementFormat::E2M1, "e2m1", kE2M1},
}};
constexpr const FloatFormat& element_bits(ElementFormat f) { return kElementFormats[static_cast<int>(f)].bits; }

// How a recipe chooses its scale (docs/statistics.md gives each formula).
enum class ScaleRule : uint8_t {
  TensorCurrent,      // s = max_elem / amax(tensor)
  TensorCurrentPow2,  // the same, rounded down to a power of two
  TensorDelayed,      // s = max_elem / (largest amax of the tensor's previous `history` steps)
  RowPow2,            // per row: max_elem / amax(row), rounded down to a power of two
  MxFloor,            // per block: 1 / 2^(floor(log2 amax(block)) - emax_elem), an E8M0 power
  MxCeil,             // per block: 1 / (amax(block) / max_elem rounded up to a power of two)
  Nvfp4,              // a tensor scale and an e4m3 scale per block (docs/statistics.md)
  BlockPow2,          // per block: max_elem / amax(block), rounded down to a power of two
};

// Whether every scale the rule takes from an amax is a power of two (E8M0, or rounded down to
// one): the recipe replay then works out each value's error in fp32, exactly (docs/statistics.md).
constexpr bool pow2_scales(ScaleRule r) {
  return r == ScaleRule::TensorCurrentPow2 || r == ScaleRule::RowPow2 || r == ScaleRule::MxFloor ||
         r == ScaleRule::MxCeil || r == ScaleRule::BlockPow2;
}

enum class Recipe : uint8_t {
  CurrentE4M3 = 0,
  CurrentE5M2,
  CurrentPow2E4M3,
  DelayedE4M3,
  Delayed16E4M3,
  DelayedE5M2,
  RowwiseE4M3,
  Mxfp8E4M3,
  Mxfp8E4M3Ceil,
  Mxfp8E5M2,
  Mxfp4,
  Nvfp4,
  BlockE4M3,
};
inline constexpr int kRecipeCount = 13;

// Block shape: `block` contiguous values along a row (0: the whole tensor; -1: the whole row);
// for a weight, tiles of `weight_rows` rows by `block` columns where weight_rows > 1.
struct RecipeInfo {
  Recipe id;
  const char* name;         // as users write it: "mxfp8-e4m3"
  const char* description;  // one line for reports
  ScaleRule rule;
  ElementFormat element;
  int block;
  int weight_rows;
  int history;              // delayed scaling: steps of amax history (0 otherwise)
};

inline constexpr int kTensorBlock = 0;
inline constexpr int kRowBlock = -1;

inline constexpr std::array<RecipeInfo, kRecipeCount> kRecipes = {{
    {Recipe::CurrentE4M3, "current-e4m3", "per-tensor current scaling, e4m3",
     ScaleRule::TensorCurrent, ElementFormat::E4M3, kTensorBlock, 1, 0},
    {Recipe::CurrentE5M2, "current-e5m2", "per-tensor current scaling, e5m2",
     ScaleRule::TensorCurrent, ElementFormat::E5M2, kTensorBlock, 1, 0},
    {Recipe::CurrentPow2E4M3, "current-pow2-e4m3", "per-tensor current scaling, power-of-two scale, e4m3",
     ScaleRule::TensorCurrentPow2, ElementFormat::E4M3, kTensorBlock, 1, 0},
    {Recipe::DelayedE4M3, "delayed-e4m3", "per-tensor delayed scaling, amax history 1024, e4m3",
     ScaleRule::TensorDelayed, ElementFormat::E4M3, kTensorBlock, 1, 1024},
    {Recipe::Delayed16E4M3, "delayed16-e4m3", "per-tensor delayed scaling, amax history 16, e4m3",
     ScaleRule::TensorDelayed, ElementFormat::E4M3, kTensorBlock, 1, 16},
    {Recipe::DelayedE5M2, "delayed-e5m2", "per-tensor delayed scaling, amax history 1024, e5m2",
     ScaleRule::TensorDelayed, ElementFormat::E5M2, kTensorBlock, 1, 1024},
    {Recipe::RowwiseE4M3, "rowwise-e4m3", "per-row scaling, power-of-two scales, e4m3",
     ScaleRule::RowPow2, ElementFormat::E4M3, kRowBlock, 1, 0},
    {Recipe::Mxfp8E4M3, "mxfp8-e4m3", "MXFP8: E8M0 scale per 32 values (OCP rule), e4m3",
     ScaleRule::MxFloor, ElementFormat::E4M3, 32, 1, 0},
    {Recipe::Mxfp8E4M3Ceil, "mxfp8-e4m3-ceil", "MXFP8: E8M0 scale per 32 values rounded up, e4m3",
     ScaleRule::MxCeil, ElementFormat::E4M3, 32, 1, 0},
    {Recipe::Mxfp8E5M2, "mxfp8-e5m2", "MXFP8: E8M0 scale per 32 values (OCP rule), e5m2",
     ScaleRule::MxFloor, ElementFormat::E5M2, 32, 1, 0},
    {Recipe::Mxfp4, "mxfp4", "MXFP4: E8M0 scale per 32 values (OCP rule), e2m1",
     ScaleRule::MxFloor, ElementFormat::E2M1, 32, 1, 0},
    {Recipe::Nvfp4, "nvfp4", "NVFP4: tensor scale and e4m3 scale per 16 values (16x16 weights), e2m1",
     ScaleRule::Nvfp4, ElementFormat::E2M1, 16, 16, 0},
    {Recipe::BlockE4M3, "block-e4m3", "blockwise: 1x128 (128x128 weights), power-of-two scales, e4m3",
     ScaleRule::BlockPow2, ElementFormat::E4M3, 128, 128, 0},
}};
constexpr const RecipeInfo& recipe_info(Recipe r) { return kRecipes[static_cast<int>(r)]; }
static_assert([] {
  for (int i = 0; i < kRecipeCount; ++i)
    if (static_cast<int>(kRecipes[i].id) != i) return false;
  return true;
}(), "kRecipes must list the recipes in Recipe order");

// E8M0's range, which bounds the MX rules' scales: 2^-127 to 2^127.
inline constexpr int kE8M0MinExponent = -127;
inline constexpr int kE8M0MaxExponent = 127;

// [SECTION] The scales ------------------------------------------------------------------------------
//
// How each rule turns an amax into a scale, operation by operation as docs/statistics.md states
// it: the injector's replay (fpscope/fp8_recipes.h) and the analyzer's and the GUI's pictures of a
// recipe's window use these, so that they agree to the bit.

// The fp32 quotient a / b (b > 0), the largest finite fp32 where it overflows: how a recipe's
// scale max_elem / amax is computed.
inline float scale_quotient(float a, float b) {
  const float q = a / b;
  return std::isinf(q) ? std::numeric_limits<float>::max() : q;
}

// 2^floor(log2(s)) of a positive normal fp32 s: its exponent field alone.
inline float pow2_floor(float s) { return std::bit_cast<float>(std::bit_cast<uint32_t>(s) & 0x7F800000u); }

// floor(log2(a)) of a positive fp32 value (exact for subnormals too, through double).
inline int floor_log2_of(float a) { return int((std::bit_cast<uint64_t>(double(a)) >> 52) & 0x7FF) - 1023; }

// Rounds a >= 0 (finite fp32) to format f, nearest even, with unbounded exponent above: from the
// smallest normal value up, the fp32 bits rounded to f's mantissa width (a carry is the next
// binade); below it, onto the subnormal grid by adding and subtracting min_subnormal * 2^23.
inline float round_to_format(float a, const FloatFormat& f) {
  if (a >= float(f.min_normal())) {
    const uint32_t drop = uint32_t(23 - f.mantissa_bits);
    const uint32_t b = std::bit_cast<uint32_t>(a);
    return std::bit_cast<float>((b + ((uint32_t{1} << (drop - 1)) - 1) + ((b >> drop) & 1u)) &
                                ~((uint32_t{1} << drop) - 1));
  }
  const float magic = float(f.min_subnormal() * 0x1p23);
  return (a + magic) - magic;
}

// A per-tensor recipe's scale (NVFP4: its global scale s_g) from the tensor's amax (largest finite
// |x|) and whether it held a NaN or Inf; delayed scaling from `history` (the largest amax of the
// steps before, 0 for none). 1 where the rule falls back; 1 for a block rule.
inline float tensor_scale(const RecipeInfo& r, float amax, bool nonfinite, double history) {
  const bool usable = !nonfinite && amax > 0;
  const float max = float(element_bits(r.element).max_finite());
  switch (r.rule) {
    case ScaleRule::TensorCurrent:
      return usable ? scale_quotient(max, amax) : 1;
    case ScaleRule::TensorCurrentPow2:
      return usable ? pow2_floor(scale_quotient(max, amax)) : 1;
    case ScaleRule::TensorDelayed:
      return history > 0 && std::isfinite(history) ? scale_quotient(max, float(history)) : 1;
    case ScaleRule::Nvfp4:  // s_g = 448 * 6 / amax
      return usable ? scale_quotient(float(kE4M3.max_finite()) * max, amax) : 1;
    default:
      return 1;
  }
}

// A block recipe's scale of a block with that amax and NaN/Inf flag; `tensor_s` is NVFP4's global
// scale. NaN for a non-finite block (its scale is NaN: every value decodes to NaN); 0 for an NVFP4
// block whose e4m3 scale underflows (every value is lost). A per-tensor rule gives tensor_s.
inline float block_scale(const RecipeInfo& r, float amax, bool nonfinite, float tensor_s) {
  const float max = float(element_bits(r.element).max_finite());
  switch (r.rule) {
    case ScaleRule::RowPow2:
    case ScaleRule::BlockPow2:
      if (nonfinite || amax == 0) return 1;
      return pow2_floor(scale_quotient(max, amax));
    case ScaleRule::MxFloor:
    case ScaleRule::MxCeil: {
      if (nonfinite) return std::numeric_limits<float>::quiet_NaN();
      if (amax == 0) return 1;
      int k;  // the shared scale is 2^k; values are divided by it
      if (r.rule == ScaleRule::MxFloor) {
        k = floor_log2_of(amax) - floor_log2_of(max);
      } else {  // amax / max_elem in fp32, rounded up to a power of two
        const float t = amax / max;
        const bool power_of_two = (std::bit_cast<uint64_t>(double(t)) & ((uint64_t{1} << 52) - 1)) == 0;
        k = t == 0 ? kE8M0MinExponent : floor_log2_of(t) + (power_of_two ? 0 : 1);
      }
      k = std::clamp(k, kE8M0MinExponent, kE8M0MaxExponent);
      return float(pow2(-k));
    }
    case ScaleRule::Nvfp4: {
      if (nonfinite) return std::numeric_limits<float>::quiet_NaN();
      // The block's e4m3 scale b = e4m3(fp32(amax_b / 6) * s_g), saturating at 448.
      const float b = std::min(round_to_format((amax / max) * tensor_s, kE4M3), float(kE4M3.max_finite()));
      return b == 0 ? 0.0f : tensor_s / b;
    }
    default:
      return tensor_s;
  }
}

// The reference trainer's fp8 modes (mptrain --precision fp8 --fp8-recipe R --fp8-format F) and the
// recipes above that replay each: `forward` for activations and weights, `gradient` for output
// gradients (none where no recipe does: the e5m2 gradients of mxfp8-ceil and block in the hybrid
// format). mptrain takes its recipe and format names from here and logs them as config items
// fp8_recipe and fp8_format; the 4-bit recipes quantize every operand to e2m1 and log that format.
inline constexpr std::array<const char*, 7> kTrainerFp8Recipes = {"current", "delayed", "mxfp8", "mxfp8-ceil",
                                                                  "block",   "mxfp4",   "nvfp4"};
inline constexpr std::array<const char*, 3> kTrainerFp8Formats = {"hybrid", "e4m3", "e2m1"};
struct TrainerFp8Mode {
  const char* recipe;  // --fp8-recipe
  const char* format;  // --fp8-format
  Recipe forward;
  std::optional<Recipe> gradient;
};
inline constexpr std::array<TrainerFp8Mode, 12> kTrainerFp8Modes = {{
    {kTrainerFp8Recipes[0], kTrainerFp8Formats[0], Recipe::CurrentE4M3, Recipe::CurrentE5M2},
    {kTrainerFp8Recipes[0], kTrainerFp8Formats[1], Recipe::CurrentE4M3, Recipe::CurrentE4M3},
    {kTrainerFp8Recipes[1], kTrainerFp8Formats[0], Recipe::DelayedE4M3, Recipe::DelayedE5M2},
    {kTrainerFp8Recipes[1], kTrainerFp8Formats[1], Recipe::DelayedE4M3, Recipe::DelayedE4M3},
    {kTrainerFp8Recipes[2], kTrainerFp8Formats[0], Recipe::Mxfp8E4M3, Recipe::Mxfp8E5M2},
    {kTrainerFp8Recipes[2], kTrainerFp8Formats[1], Recipe::Mxfp8E4M3, Recipe::Mxfp8E4M3},
    {kTrainerFp8Recipes[3], kTrainerFp8Formats[0], Recipe::Mxfp8E4M3Ceil, std::nullopt},
    {kTrainerFp8Recipes[3], kTrainerFp8Formats[1], Recipe::Mxfp8E4M3Ceil, Recipe::Mxfp8E4M3Ceil},
    {kTrainerFp8Recipes[4], kTrainerFp8Formats[0], Recipe::BlockE4M3, std::nullopt},
    {kTrainerFp8Recipes[4], kTrainerFp8Formats[1], Recipe::BlockE4M3, Recipe::BlockE4M3},
    {kTrainerFp8Recipes[5], kTrainerFp8Formats[2], Recipe::Mxfp4, Recipe::Mxfp4},
    {kTrainerFp8Recipes[6], kTrainerFp8Formats[2], Recipe::Nvfp4, Recipe::Nvfp4},
}};

// The operands fp8 training quantizes: the inputs of the matrix products of linear and
// convolution layers, forward and backward. The bias and the outputs stay in higher precision.
// Other: a tensor forecast on request (FPSCOPE_RECIPES=all) that is none of the three.
enum class Operand : uint8_t { Activation = 0, Weight = 1, Gradient = 2, Other = 3 };
inline constexpr std::array<const char*, 4> kOperandNames = {"activation", "weight", "gradient", "other"};
constexpr const char* operand_name(Operand o) { return kOperandNames[static_cast<int>(o)]; }
// The operand of that name (as the trace stores it), if any.
inline std::optional<Operand> operand_named(std::string_view name) {
  for (std::size_t i = 0; i < kOperandNames.size(); ++i)
    if (name == kOperandNames[i]) return static_cast<Operand>(i);
  return std::nullopt;
}

// Which input slot of which kernel is which operand (the reference trainer's kernel library).
struct QuantizedOperand {
  const char* kernel;
  uint8_t slot;
  Operand operand;
};
inline constexpr std::array<QuantizedOperand, 12> kQuantizedOperands = {{
    {"linear_forward", 0, Operand::Activation},
    {"linear_forward", 1, Operand::Weight},
    {"linear_backward_data", 0, Operand::Gradient},
    {"linear_backward_data", 1, Operand::Weight},
    {"linear_backward_weight", 0, Operand::Gradient},
    {"linear_backward_weight", 1, Operand::Activation},
    {"conv2d_forward", 0, Operand::Activation},
    {"conv2d_forward", 1, Operand::Weight},
    {"conv2d_backward_data", 0, Operand::Gradient},
    {"conv2d_backward_data", 1, Operand::Weight},
    {"conv2d_backward_weight", 0, Operand::Gradient},
    {"conv2d_backward_weight", 1, Operand::Activation},
}};

// The operand input `slot` of `kernel` is, if fp8 training quantizes it.
inline std::optional<Operand> quantized_operand(std::string_view kernel, int slot) {
  for (const QuantizedOperand& q : kQuantizedOperands)
    if (q.slot == slot && kernel == q.kernel) return q.operand;
  return std::nullopt;
}

// PyTorch's matrix-product operators, as the PyTorch front end names them, and the input slots that
// are a product's operands (bit i: slot i). Which operand a tensor there is follows from what it
// holds (docs/injector.md, FPSCOPE_RECIPES): a parameter (or a copy of one, is_weight_copy) is
// the weight, a tensor made in backward the gradient, any other the activation.
struct MatrixOperator {
  const char* name;
  uint8_t slots;
};
inline constexpr std::array<MatrixOperator, 9> kMatrixOperators = {{
    {"mm", 0b011},
    {"addmm", 0b110},  // (bias, input, weight)
    {"bmm", 0b011},
    {"baddbmm", 0b110},
    {"matmul", 0b011},
    {"linear", 0b011},
    {"convolution", 0b011},
    {"convolution_backward", 0b111},  // (grad_output, input, weight)
    {"_scaled_mm", 0b011},
}};

// PyTorch's operators whose output is a copy of their first input (autocast casts a parameter to
// bf16 with _to_copy before its product reads it): a copy of a weight is a weight.
inline bool is_weight_copy(std::string_view name) {
  return name == "_to_copy" || name == "_autocast_to_reduced_precision" || name == "clone";
}

// Whether input `slot` of the PyTorch operator `name` is an operand of its matrix product.
inline bool matrix_operand_slot(std::string_view name, int slot) {
  for (const MatrixOperator& m : kMatrixOperators)
    if (name == m.name) return slot >= 0 && slot < 8 && (m.slots >> slot) & 1;
  return false;
}

}  // namespace fpscope::contract
