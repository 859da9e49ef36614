// Why: the causes behind the first NaN/Inf and behind skipped steps, the chain of launches behind
// them, and the forecasts of ranges heading for fp16's edge.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/nonfinite.h"
#include "fpscope/analysis/ranges.h"
#include "fpscope/analysis/trace.h"
#include "fpscope/analysis/trend.h"

namespace fpscope::analysis {

// Walks back from the first origin: for each floating input of a launch, the measured launch that
// last wrote that tensor (same allocation, latest earlier output) and how its range moved there
// against the tensor's previous version; unusual moves are followed on through the writer's
// inputs. Everything comes from the trace; where it cannot tell (no allocation id, writers left
// unmeasured by --every/--steps/--ops), the link says so instead of guessing.

struct CauseLink {
  int depth = 0;                       // 0: an input of the origin; 1: an input of that writer; ...
  int64_t reader_kernel_id = 0;        // the launch that read the tensor
  std::string tensor;
  std::optional<int64_t> tensor_uid;
  std::optional<int64_t> writer_kernel_id, writer_step, writer_tensor_id;
  std::string writer_kernel;
  std::optional<std::string> writer_layer, writer_phase;
  std::optional<double> absmax_before, absmax_after, min_nonzero_before, min_nonzero_after;
  int64_t zero_before = 0, zero_after = 0, count = 0;
  std::optional<double> jump_log2;     // log2(absmax after / absmax before)
  std::string note;                    // what is unusual, or why the walk stops here
};

enum class CauseKind {
  LossScale, OptimizerStep, UnderflowIntoDivision, NonfiniteData, OpFromOrdinaryInputs, SkippedStep,
  NotMeasured,  // the walk stopped at writers the trace did not measure: it cannot tell
  RangeJump,    // an input's range jumped at its writer, for no reason the trace names
  OutsideDomain,  // sqrt, log, acos, ... read values where the function is not defined
  ZeroVarianceNorm,  // a normalisation of rows with no variance whose eps is 0 (or too small to count)
};
const char* cause_kind_name(CauseKind kind);  // "loss_scale", "optimizer_step", ... (JSON)
const char* cause_label(CauseKind kind);      // "loss scale too high", ... (for people)

struct Cause {
  CauseKind kind = CauseKind::OpFromOrdinaryInputs;
  std::string summary;                 // one sentence with the numbers
  std::string advice;                  // one line: what to change
  std::optional<int64_t> kernel_id, tensor_id, step;  // the evidence to select
  std::string subject;                 // what it is about, in a few words ("fc1.weight (2^12.6 at step 0)")
};

// A range heading for fp16's edge, and the step where it would cross fp16's largest value if it
// kept growing as it did over the row's last measured steps (trend.h: by a factor a step, as
// activations feeding on themselves or a loss scale too high grow, or by an amount a step, as a bias
// under Adam moves by about the learning rate).
struct RangeForecast : ForecastLine {
  RangeView view = RangeView::Activations;
  std::string row;     // layer or tensor
  bool upward = true;  // absmax toward the largest value (the only direction forecast)
  std::string summary;
};
inline constexpr int kForecastWindow = 20;  // measured steps fitted
std::vector<RangeForecast> forecast(const Trace& trace, int window = kForecastWindow);

struct WhyReport {
  std::optional<NonfiniteEvent> origin;  // the first origin (or first non-finite output)
  std::vector<CauseLink> chain;          // unusual links and stops, in walk order
  int64_t ordinary_links = 0;            // inputs whose writer left their range ordinary
  std::vector<Cause> causes;             // the first origin's, the likeliest first
  std::vector<Cause> skipped_steps;      // one per step the loss scaler skipped (up to 50)
  std::vector<RangeForecast> forecasts;  // ranges heading for fp16's edge (forecast())
};
WhyReport why(const Trace& trace);

}  // namespace fpscope::analysis
