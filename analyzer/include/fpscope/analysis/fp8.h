// Will it train in fp8? The scaling recipes' forecast (`fpscope run --recipes operands`) per layer
// and operand, which recipe each layer fits, the layers to keep in higher precision, and the steps
// where delayed scaling's history fell behind the amax.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/trace.h"
#include "fpscope/contract/scaling_recipes.h"

namespace fpscope::analysis {

using contract::kRecipeCount;
using contract::Operand;
using contract::Recipe;

// What a recipe would do, summed over a set of tensors (docs/statistics.md, "Scaling recipes").
struct RecipeFigures {
  int64_t tensors = 0;
  uint64_t quantized = 0, underflow = 0, subnormal = 0, saturated = 0;
  uint64_t blocks = 0, blocks_lost = 0, blocks_nonfinite = 0;
  double sse = 0, signal = 0;
  std::optional<double> worst_sqnr_db;  // of the tensor with the lowest SQNR
  std::optional<int64_t> worst_step;    // its step
  std::optional<int64_t> worst_tensor_id;  // its row in `tensors`
  std::optional<double> worst_amax;     // its amax (nullopt when it held NaN or Inf)
  std::optional<double> worst_scale;    // the per-tensor recipes' scale there
  // Shares of the values quantized; nullopt when none was.
  std::optional<double> underflow_share() const;
  std::optional<double> saturated_share() const;
  // 10 log10(signal / sse) over the set; +Inf when nothing was lost, nullopt without a nonzero value.
  std::optional<double> sqnr_db() const;
};

// When a recipe is good enough for an operand: the thresholds fp8_readiness() applies.
struct FitThresholds {
  double max_underflow_share = 0.01;      // of the values quantized
  double max_saturated_share = 1e-4;
  // The least SQNR per element format: about 6 dB below what each gives values spread as a
  // gaussian's under per-tensor scaling (e4m3 31 dB, e5m2 25 dB, e2m1 18 dB).
  double min_sqnr_db_e4m3 = 25;
  double min_sqnr_db_e5m2 = 19;
  double min_sqnr_db_e2m1 = 12;
  double min_sqnr_db(contract::ElementFormat e) const {
    return e == contract::ElementFormat::E4M3 ? min_sqnr_db_e4m3
           : e == contract::ElementFormat::E5M2 ? min_sqnr_db_e5m2
                                                : min_sqnr_db_e2m1;
  }
};

enum class Misfit : uint8_t { None, Underflow, Saturation, Sqnr, Nonfinite };
const char* misfit_name(Misfit m);  // "underflow", "saturation", "SQNR", "non-finite blocks"

struct OperandReadiness {
  std::string layer;                   // the layer range's name; "" outside any
  Operand operand = Operand::Activation;
  std::string tensors;                 // the names of the tensors, comma-separated
  std::array<RecipeFigures, kRecipeCount> recipes{};
  std::array<Misfit, kRecipeCount> misfit{};  // why each recipe does not fit (None: it fits)
  // How far past its worst threshold each recipe is, as a ratio (a share over its limit, or the
  // noise over the noise the SQNR limit allows); at most 1 where it fits.
  std::array<double, kRecipeCount> severity{};
};

struct LayerReadiness {
  std::string layer;
  // The recipes that fit every operand of the layer, in contract order.
  std::vector<Recipe> fitting;
  // The 8-bit recipe the layer fits best (fitting, highest SQNR over its operands), if any.
  std::optional<Recipe> best_8bit;
  bool keep_high_precision = false;    // no 8-bit recipe fits every operand
  // For a layer to keep: the 8-bit recipe that came closest, the operand it failed on and why,
  // with that operand's figures.
  std::optional<Recipe> closest;
  std::optional<Operand> failing_operand;
  Misfit failure = Misfit::None;
  double severity = 0;  // how far past the threshold (ratio); the layers to keep are ranked by it
};

// A delayed-scaling step whose values outgrew the scale the history gave: saturation.
struct DelayedOverflow {
  std::string layer;
  Operand operand = Operand::Activation;
  Recipe recipe = Recipe::DelayedE4M3;
  std::optional<int64_t> step;
  int64_t kernel_id = 0;
  std::string tensor;
  uint64_t saturated = 0, quantized = 0;
  std::optional<double> amax;          // the tensor's amax at that step
  std::optional<double> scale;         // the scale the history gave
};

struct Fp8Readiness {
  bool forecast = false;               // the trace holds a forecast (traced with --recipes)
  // The forecast was asked for (a traced process ran with --recipes operands or all) though the
  // trace holds none: no launch had an operand it knows (PyTorch's operators are not classified
  // as operands yet; --recipes all covers every tensor).
  bool asked_without_operands = false;
  FitThresholds thresholds;
  std::vector<OperandReadiness> operands;  // by layer (as the trace first met it), then operand
  std::vector<LayerReadiness> layers;      // the layers to keep first, most severe first; then the rest
  std::vector<DelayedOverflow> overflows;  // by step, at most `max_overflows`
  int64_t overflow_count = 0;              // all of them
};

// mptrain's fp8 modes (--precision fp8 --fp8-recipe R --fp8-format F) and the forecast recipes
// that say what each does to an operand: `forward` to activations and weights, `gradient` to
// output gradients (docs/mptrain.md, "fp8"). mxfp8-ceil and block quantize gradients in e5m2 under
// the hybrid format, which no forecast recipe replays: they are listed with e4m3 only.
struct MptrainFp8Mode {
  const char* recipe;  // --fp8-recipe
  const char* format;  // --fp8-format
  Recipe forward, gradient;
};
inline constexpr std::array<MptrainFp8Mode, 8> kMptrainFp8Modes = {{
    {"current", "hybrid", Recipe::CurrentE4M3, Recipe::CurrentE5M2},
    {"current", "e4m3", Recipe::CurrentE4M3, Recipe::CurrentE4M3},
    {"delayed", "hybrid", Recipe::DelayedE4M3, Recipe::DelayedE5M2},
    {"delayed", "e4m3", Recipe::DelayedE4M3, Recipe::DelayedE4M3},
    {"mxfp8", "hybrid", Recipe::Mxfp8E4M3, Recipe::Mxfp8E5M2},
    {"mxfp8", "e4m3", Recipe::Mxfp8E4M3, Recipe::Mxfp8E4M3},
    {"mxfp8-ceil", "e4m3", Recipe::Mxfp8E4M3Ceil, Recipe::Mxfp8E4M3Ceil},
    {"block", "e4m3", Recipe::BlockE4M3, Recipe::BlockE4M3},
}};

// What one of those modes would have to keep in bf16: the layers one of whose operands the mode's
// recipe for it does not fit, each with why ("gradient: SQNR 17.2 dB, limit 19 dB").
struct Fp8ModeAdvice {
  MptrainFp8Mode mode;
  std::vector<std::string> keep;     // in the forecast's layer order
  std::vector<std::string> reasons;  // one per kept layer
  double severity = 0;               // summed over the kept layers' worst operands
};
struct Fp8Advice {
  std::vector<Fp8ModeAdvice> modes;  // kMptrainFp8Modes order
  // The mode that keeps the fewest layers (then the least severe; then the first): what to train.
  std::optional<std::size_t> best;
};
// Empty without a forecast.
Fp8Advice fp8_advice(const Fp8Readiness& readiness);

// Whether the trace holds a forecast at all (cheap).
bool has_fp8_forecast(const Trace& trace);

Fp8Readiness fp8_readiness(const Trace& trace, const FitThresholds& thresholds = {}, std::size_t max_overflows = 50);

}  // namespace fpscope::analysis
