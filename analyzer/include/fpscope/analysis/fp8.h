// Will it train in fp8? The scaling recipes' forecast (`fpscope run --recipes operands`) per layer
// and operand, which recipe each layer fits, the layers to keep in higher precision, and the steps
// where delayed scaling's history fell behind the amax.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/analysis/trace.h"
#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/palette.h"

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
  // trace holds none: no launch had an operand it knows (--recipes all covers every tensor).
  bool asked_without_operands = false;
  FitThresholds thresholds;
  std::vector<OperandReadiness> operands;  // by layer (as the trace first met it), then operand
  std::vector<LayerReadiness> layers;      // the layers to keep first, most severe first; then the rest
  std::vector<DelayedOverflow> overflows;  // by step, at most `max_overflows`
  int64_t overflow_count = 0;              // all of them
};

// mptrain's fp8 modes and the forecast recipes that replay them (the contract's kTrainerFp8Modes).
using MptrainFp8Mode = contract::TrainerFp8Mode;
inline constexpr const auto& kMptrainFp8Modes = contract::kTrainerFp8Modes;
// The mode of those flags, if it is one.
std::optional<MptrainFp8Mode> mptrain_fp8_mode(std::string_view recipe, std::string_view format);
// mptrain's flags for a mode: "--fp8-recipe delayed --fp8-format hybrid"; "--fp8-recipe nvfp4" (the
// 4-bit recipes take no --fp8-format).
std::string mptrain_fp8_flags(const MptrainFp8Mode& mode);

// What one of those modes would have to keep in bf16: the layers one of whose operands the mode's
// recipe for it does not fit, each with why ("gradient: SQNR 17.2 dB, limit 19 dB").
struct Fp8ModeAdvice {
  MptrainFp8Mode mode;
  std::vector<std::string> keep;     // in the forecast's layer order
  std::vector<std::string> reasons;  // one per kept layer
  double severity = 0;               // summed over the kept layers' worst operands
};
struct Fp8Advice {
  std::vector<Fp8ModeAdvice> modes;  // kMptrainFp8Modes order, the modes the forecast replays whole
  // The mode that keeps the fewest layers (then the least severe; then the first): what to train.
  std::optional<std::size_t> best;
};
// Empty without a forecast.
Fp8Advice fp8_advice(const Fp8Readiness& readiness);

// The forecast of run A against what an fp8 run (B) measured, per layer and operand,
// over the training steps (forward and backward phases) each run traced, each operand tensor counted
// once a step (A forecasts it at every product that reads it; B quantizes it once for them all). B is
// an fp8 run of mptrain, whose counts are its quantize kernels' own (their launch reports,
// tensor_stores): the values flushed to zero, made subnormal and saturated (where the kernels did
// not report them, CUDA kernels or an older trainer's, the flushed values are the zeros of the
// 8-bit output less those of the input, so the zeros a 4-bit block holding a NaN or Inf is written
// as count too; the subnormals are the output's, and saturation is unknown); or a PyTorch program
// trained with torchao's float8 tensorwise scaling, whose casts to fp8 are counted from the
// statistics of the tensor cast, of its scaled product and of the fp8 result (fp8.cpp,
// torchao_quantized, says how they are found).
struct Fp8OutcomeRow {
  std::string layer;
  Operand operand = Operand::Activation;
  Recipe recipe = Recipe::CurrentE4M3;  // the forecast recipe that replays B's mode for it
  uint64_t a_quantized = 0, a_underflow = 0, a_subnormal = 0, a_saturated = 0;
  uint64_t b_quantized = 0, b_underflow = 0, b_subnormal = 0;
  std::optional<uint64_t> b_saturated;  // absent where B's kernels did not count it
  // 1 for the operand whose values fall below the format's normal range (flushed or subnormal)
  // most often in that run, 2 for the next...; 0 where the run has no figure.
  int a_rank = 0, b_rank = 0;
  // Step 0's operand (its first launch in the step): whether both runs measured the same statistics
  // of it (count, zeros, NaN/Inf, min, max, mean, rms, exponent histogram), and its counts in each.
  bool step0_same_operand = false;
  std::optional<uint64_t> a_step0_underflow, a_step0_subnormal, a_step0_saturated;
  std::optional<uint64_t> b_step0_underflow, b_step0_subnormal, b_step0_saturated;
  // The same operand, the same counts (saturation where B counted it).
  bool step0_equal() const {
    return step0_same_operand && a_step0_underflow == b_step0_underflow && a_step0_subnormal == b_step0_subnormal &&
           (!b_step0_saturated || a_step0_saturated == b_step0_saturated);
  }
  // The share of the values quantized that were flushed to zero or made subnormal, in each run.
  std::optional<double> a_share() const { return share(a_underflow + a_subnormal, a_quantized); }
  std::optional<double> b_share() const { return share(b_underflow + b_subnormal, b_quantized); }
  // The share of the values quantized that saturated, in each run.
  std::optional<double> a_saturated_share() const { return share(a_saturated, a_quantized); }
  std::optional<double> b_saturated_share() const {
    return b_saturated ? share(*b_saturated, b_quantized) : std::nullopt;
  }

 private:
  static std::optional<double> share(uint64_t part, uint64_t n) {
    return n ? std::optional<double>(double(part) / double(n)) : std::nullopt;
  }
};
struct Fp8Outcome {
  MptrainFp8Mode mode;  // B's recipes, as the mptrain mode that quantizes alike
  std::string trainer;  // "mptrain" or "torchao"
  std::vector<Fp8OutcomeRow> rows;  // by layer (as B met them), then operand
  int step0_compared = 0;           // rows whose step-0 operands were the same
  int step0_equal = 0;              // of them, rows whose counts agree
};
// Set when A holds a forecast and B is an fp8 run of mptrain (meta config.precision "fp8") in a
// mode the forecast replays (delayed scaling with a window of 1024 or 16 steps), or a torchao float8
// run with tensorwise scaling (current scaling: e4m3 forward, e5m2 or e4m3 gradients).
std::optional<Fp8Outcome> fp8_outcome(const Trace& a, const Trace& b);

// The colour of recipe `r`'s cell for an operand in the readiness grid (palette::recipe_fit), and
// its text: the SQNR in dB to a tenth, "lossless" where nothing was lost, "" without a figure.
palette::Rgb recipe_cell_color(const OperandReadiness& o, Recipe r, const FitThresholds& t);
std::string recipe_cell_text(const OperandReadiness& o, Recipe r);

// What a report says of a trace without a forecast: how to get one, or why the run that asked for
// one has none. Empty when it holds one.
std::string no_forecast_text(const Fp8Readiness& readiness);

// Whether the trace holds a forecast at all (cheap).
bool has_fp8_forecast(const Trace& trace);

Fp8Readiness fp8_readiness(const Trace& trace, const FitThresholds& thresholds = {}, std::size_t max_overflows = 50);

}  // namespace fpscope::analysis
