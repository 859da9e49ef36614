// What each fp8 and microscaling recipe (fpscope/contract/scaling_recipes.h) would do to a tensor.
//
// compute_recipes() reads an fp32, fp16 or bf16 tensor, viewed as `rows` rows of `cols` contiguous
// values, and for every recipe scales and rounds each value as the recipe says, then counts what
// was lost: values that round to zero, that land subnormal in the element format, that saturate;
// blocks whose every nonzero value is lost, blocks a NaN or Inf makes non-finite; and the squared
// error of the values it recovers. docs/statistics.md ("Scaling recipes") defines every rule and
// number; the tests check each against an independent quantizer.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/tensor_stats.h"

namespace fpscope {

using contract::kRecipeCount;
using contract::Recipe;

struct RecipeOutcome {
  uint64_t values = 0;     // finite values quantized (those of non-finite blocks are not)
  uint64_t underflow = 0;  // of them, nonzero values that round to zero
  uint64_t subnormal = 0;  // nonzero values that round to a nonzero subnormal of the element format
  uint64_t saturated = 0;  // values whose scaled magnitude rounds beyond the element's largest value
  uint64_t blocks = 0;     // blocks (the tensor, rows, blocks or tiles) holding at least one value
  uint32_t blocks_lost = 0;       // blocks with a nonzero finite value, every one of which rounds to zero
  uint32_t blocks_nonfinite = 0;  // blocks a NaN or Inf makes non-finite (MX and NVFP4 scales)
  double sse = 0;          // sum over the quantized values of (|x| - q * (1/s))^2, in double
  double signal = 0;       // sum over the same values of x^2, in double
  // The per-tensor recipes' scale s (1 when the rule falls back to it); NaN for the block
  // recipes, whose scales are many.
  double scale = std::numeric_limits<double>::quiet_NaN();
  friend bool operator==(const RecipeOutcome&, const RecipeOutcome&) = default;
};
using RecipeOutcomes = std::array<RecipeOutcome, kRecipeCount>;

// No amax history yet: delayed scaling uses s = 1.
inline constexpr double kNoHistory = 0.0;

struct RecipeRequest {
  std::size_t rows = 0, cols = 0;  // rows * cols values, row-major and contiguous
  bool weight = false;             // use the recipes' 2D tiles (NVFP4 16x16, block 128x128)
  // For each delayed recipe: the largest amax of the tensor's previous `history` steps, or
  // kNoHistory. Other recipes ignore their entry.
  std::array<double, kRecipeCount> history_amax{};
};

struct RecipeResult {
  RecipeOutcomes outcomes{};
  // The tensor's amax: the largest finite |x|, or +Inf when the tensor holds an Inf or a NaN.
  // What a delayed recipe's history keeps (a step whose amax is not finite adds nothing).
  double amax = 0;
};

// Whether compute_recipes() reads this type (fp32, fp16 and bf16: what fp8 training quantizes).
constexpr bool recipes_read(ElementType type) {
  return type == ElementType::F32 || type == ElementType::F16 || type == ElementType::BF16;
}

// Fills `out` for every recipe. Thread-safe; computed under the IEEE default floating-point mode
// whatever the calling thread's. A tensor that is not fp32, or not aligned, is converted into a
// buffer of the calling thread's, kept for its next call.
void compute_recipes(const void* data, ElementType type, const RecipeRequest& request, RecipeResult* out);

// The signal-to-quantization-noise ratio in dB of an outcome: 10 log10(signal / sse); +Inf when
// nothing was lost (sse 0), NaN when no nonzero value was quantized.
inline double sqnr_db(double signal, double sse) {
  if (!(signal > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (sse == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / sse);
}

}  // namespace fpscope
