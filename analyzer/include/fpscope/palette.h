// The colours that carry meaning, in one place for every front end that draws a trace: the HTML
// export and the GUI. A memory category, a run of a comparison, a kind of event and the heat map's
// exponent scale look the same wherever a user meets them. Colours that only dress a front end
// (text on the GUI's dark background, table borders in the HTML) stay with that front end.
#pragma once

#include "fpscope/contract/memory_categories.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fpscope::palette {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  friend constexpr bool operator==(const Rgb&, const Rgb&) = default;
};

// "#rrggbb", for HTML and SVG.
std::string hex(Rgb c);

// The runs of a comparison: the first trace (source), the second (target), then further ones.
inline constexpr std::array<Rgb, 4> kRuns = {{{70, 140, 230}, {240, 140, 40}, {120, 200, 120}, {200, 120, 220}}};
constexpr Rgb run(int index) { return kRuns[static_cast<size_t>(index < 0 ? 0 : index) % kRuns.size()]; }

// Events, and the series they belong to.
inline constexpr Rgb kNaN{230, 40, 40};         // also any cell or bar that holds a non-finite value
inline constexpr Rgb kInf{220, 60, 200};
inline constexpr Rgb kOverflow{235, 90, 60};
inline constexpr Rgb kUnderflow{60, 200, 190};
inline constexpr Rgb kSkipped{250, 190, 40};     // a step the loss scaler skipped
inline constexpr Rgb kScaleBackoff{250, 120, 40};
inline constexpr Rgb kScaleGrowth{90, 200, 110};
inline constexpr Rgb kLoss = kRuns[0];          // the loss curve of a single run
// Where a value falls in a format (the GUI's exponent histogram and its format strips): flushed to
// zero, subnormal, normal, beyond the largest value.
inline constexpr Rgb kBandFlush = kUnderflow;
inline constexpr Rgb kBandSubnormal{250, 190, 70};
inline constexpr Rgb kBandNormal{90, 200, 110};
inline constexpr Rgb kBandOverflow = kOverflow;
inline constexpr Rgb kLossScale{225, 87, 89};   // the loss scale curve

// The fp8 readiness grid (layers and operands by recipes): a recipe that fits is green, brighter the
// more SQNR it keeps beyond its threshold (`margin_db`, 0 to 15 dB); one just past a threshold
// (`severity`, the analyzer's ratio, below 10) amber, one far past it red, one that makes blocks
// non-finite kNaN; a recipe that saw no value a dark grey.
inline constexpr Rgb kRecipeUnseen{45, 45, 52};
inline constexpr Rgb kRecipeNearMiss{200, 150, 50};
inline constexpr Rgb kRecipeMiss{200, 70, 60};
enum class RecipeFit { Unseen, Fits, Misses, Nonfinite };
Rgb recipe_fit(RecipeFit fit, double margin_db, double severity);

// Memory categories, in the contract's order (weight, master_weight, gradient, activation,
// optimizer_state, workspace, data).
inline constexpr std::array<Rgb, contract::kMemoryCategoryCount> kCategories = {
    {{70, 140, 230}, {40, 90, 170}, {235, 120, 50}, {90, 190, 100}, {170, 110, 210}, {150, 150, 150}, {220, 200, 80}}};
constexpr Rgb category(contract::MemoryCategory c) { return kCategories[static_cast<size_t>(c)]; }
// By name; a name outside the contract gets for_name(name).
Rgb category(std::string_view name);

// A stable, distinguishable colour for a name (kernels, layers, phases): the same in every trace
// and every session, muted enough for text drawn over it to stay readable.
Rgb for_name(std::string_view name, double saturation = 0.55, double value = 0.72);

// The heat map's scale of log2(absmax): a perceptually ordered ramp from dark blue (t = 0, the
// smallest exponent shown) through teal and green to yellow (t = 1, the largest). t is clamped.
Rgb exponent_scale(double t);
// Where an exponent falls on a scale from lo to hi (0.5 when the scale is a single value).
double scale_position(double exponent, double lo, double hi);

}  // namespace fpscope::palette
