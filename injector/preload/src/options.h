// What the injector measures, read once from the environment that `fpscope run` sets.
//
// FPSCOPE_EVERY, FPSCOPE_STEPS and FPSCOPE_OPS choose which launches are measured; FPSCOPE_TENSORS
// and FPSCOPE_STATS choose what is measured of them; FPSCOPE_TRAP and FPSCOPE_DUMP add a stop at
// the first non-finite origin and .npy dumps; FPSCOPE_ALLOW names intended NaN/Inf. docs/injector.md defines every value. parse_options()
// rejects anything it does not understand with a message that names the variable, so a typo never
// silently traces the wrong thing.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/contract/allow_rules.h"
#include "fpscope/tensor_stats.h"

namespace fpscope::inject {

enum class TensorRoles : uint8_t { Inputs, Outputs, Both };
enum class TrapKind : uint8_t { None, Nonfinite, NaN, Inf };
// Which tensors get the fp8 recipe forecast (fpscope/fp8_recipes.h): the operands fp8 training
// quantizes (contract::kQuantizedOperands), every measured tensor, or none.
enum class RecipeTensors : uint8_t { Operands, All, None };

// Inclusive range of optimizer steps.
struct StepRange {
  int64_t first = 0;
  int64_t last = std::numeric_limits<int64_t>::max();
  bool contains(int64_t step) const { return first <= step && step <= last; }
};

// FPSCOPE_DUMP: every key given must match. op, layer and tensor are fnmatch globs; step is a
// number or an inclusive range A-B.
struct DumpSpec {
  bool enabled = false;
  std::string op, layer, tensor;
  std::optional<StepRange> steps;

  // The launch-level keys (op, layer, step). `layer` may be null (no layer range open).
  bool matches_launch(const char* kernel, const char* layer, int64_t step) const;
  bool matches_tensor(const char* name) const;
};

struct Options {
  std::string ring_name;             // FPSCOPE_RING
  int64_t every = 1;                 // FPSCOPE_EVERY
  std::optional<StepRange> steps;    // FPSCOPE_STEPS
  std::vector<std::string> ops;      // FPSCOPE_OPS, globs against kernel and layer names
  TensorRoles tensors = TensorRoles::Both;
  StatsLevel stats = StatsLevel::Full;
  RecipeTensors recipes = RecipeTensors::None;  // FPSCOPE_RECIPES; full statistics only
  bool updates = true;               // FPSCOPE_UPDATES: ask kernels for launch reports (docs/kernels.md)
  int stats_threads = 0;             // FPSCOPE_STATS_THREADS; 0: one per hardware thread, at most 4
  bool rescan_inputs = false;        // FPSCOPE_RESCAN_INPUTS: scan every input, even one unchanged
                                     // since a launch measured it as an output (output_memo.h)
  TrapKind trap = TrapKind::None;
  std::vector<contract::AllowRule> allow;  // FPSCOPE_ALLOW, else contract::kDefaultAllowRules
  std::string allow_text = contract::kDefaultAllowRules;
  DumpSpec dump;
  std::string dump_dir;              // FPSCOPE_DUMP_DIR, absolute

  // True when a step filter is set: launches outside any step range are then never measured.
  bool filters_steps() const { return every > 1 || steps.has_value(); }
  // Whether a launch of `kernel` in `layer` (may be null) at `step` (-1: none) is measured.
  bool selects(const char* kernel, const char* layer, int64_t step) const;
  // Whether any launch of optimizer step `step` may be measured or dumped.
  bool watches_step(int64_t step) const;
  // Whether the recipe forecast is computed for the tensors it covers.
  bool forecasts_recipes() const { return stats == StatsLevel::Full && recipes != RecipeTensors::None; }
  bool measures_inputs() const { return tensors != TensorRoles::Outputs; }
  // Outputs are measured when asked for, and always under --trap (the trap watches outputs).
  bool measures_outputs() const { return tensors != TensorRoles::Inputs || trap != TrapKind::None; }
  // One line naming every choice, stored in the trace's Process record.
  std::string describe() const;
};

// Returns the value of an environment variable or null. Tests pass their own.
using EnvLookup = std::function<const char*(const char*)>;

// Fills *out from the environment. On an invalid value returns false with *error saying which
// variable held what and what is accepted.
bool parse_options(const EnvLookup& env, Options* out, std::string* error);

}  // namespace fpscope::inject
