// Comparing two runs: losses, layers that moved, events and memory side by side.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/fp8.h"
#include "fpscope/analysis/learning.h"
#include "fpscope/analysis/summary.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

struct CompareOptions {
  double loss_tolerance = 0.05;  // relative: |a-b| / max(|a|,|b|)
  // A layer moved when its largest forward output grew or shrank by at least this factor. Not a
  // crossed power of two: 3.98 -> 4.13 changes the exponent and is a change of 4%.
  double move_ratio = 2.0;
};

// A percentage only says something against a base that is not tiny: reduction_pct is set when
// the source holds at least kMinPercentBaseBytes and at least 1% of the target's bytes (8 B against
// 16 MiB is "+16.0 MiB", not "-208859900%").
inline constexpr int64_t kMinPercentBaseBytes = 1024;
struct MemoryDelta {
  std::string category;             // a category name, or "peak" for the total
  int64_t a = 0, b = 0;
  std::optional<double> reduction_pct;  // (a - b) / a * 100; nullopt against a zero or tiny base
};
// The change from source to target as the front ends print it: "-25.0%", or the difference in
// bytes ("+15.93 MiB") when reduction_pct is not set; "0 B" when equal.
std::string change_text(const MemoryDelta& d);

struct LossPoint {
  int64_t step = 0;
  std::optional<double> a, b;                // NaN where the run logged a NaN loss
  std::optional<double> relative_difference;  // both losses finite only
  bool nonfinite_mismatch = false;            // one loss finite and the other not, or opposite infinities
};

struct LayerShift {
  std::string layer;
  std::optional<double> a_absmax, b_absmax;
  std::optional<int> a_exponent, b_exponent;
  std::optional<int> shift;  // b_exponent - a_exponent
  std::optional<double> ratio;  // b_absmax / a_absmax, where both are nonzero
  bool moved = false;           // ratio or its inverse at least CompareOptions::move_ratio, or in one run only
};

struct RunEvent {
  std::string kind;              // "nonfinite", "skipped_step", "backoff"
  std::optional<int64_t> step;
  std::string detail;            // kernel/layer, scale, ...
};

// One parameter's updates in both runs (learning.h), over the steps each measured.
struct UpdateShift {
  std::string param;
  std::optional<std::string> a_type, b_type;  // "bf16", "f32 master"; unset where the run has no such parameter
  std::optional<double> a_lost_share, b_lost_share;
  std::optional<double> a_ratio, b_ratio;     // update/weight over the run
  bool a_flagged = false, b_flagged = false;
};

struct Comparison {
  RunSummary a, b;                       // a: source, b: target
  std::vector<MemoryDelta> memory;       // "peak" first, then each category at its run's peak
  std::vector<MemoryDelta> memory_max_live;  // each category's own maximum
  std::optional<double> accuracy_delta;  // b - a in percentage points: test accuracy if both have it, else train
  std::optional<double> final_loss_delta;  // unset where a run's loss went NaN/Inf after its last finite one
  double loss_tolerance = 0;
  std::vector<LossPoint> loss_curve;     // steps present in both runs, ascending, NaN losses included
  int64_t a_steps = 0, b_steps = 0;
  std::optional<int64_t> first_divergent_step;  // beyond the tolerance, or finite against NaN/Inf
  bool diverged_to_nonfinite = false;            // at first_divergent_step one loss is NaN/Inf and the other not
  std::vector<LayerShift> layers;        // every layer of either run
  double move_ratio = 2.0;               // CompareOptions::move_ratio: what "moved" meant
  std::vector<RunEvent> only_in_a, only_in_b;  // matched on (kind, step)
  // A's fp8 forecast against an fp8 run B's quantize kernels (fp8_outcome), where both exist.
  std::optional<Fp8Outcome> fp8;
  // Every parameter of either run whose updates were measured, in A's order then B's.
  std::vector<UpdateShift> updates;
};
Comparison compare(const Trace& a, const Trace& b, const CompareOptions& options = {});

}  // namespace fpscope::analysis
