// The report as data: the typed JSON object that `fpscope report --format json` and
// `fpscope compare --format json` print and fpscope-gui's --dump-state prints for each trace.
// Numbers are JSON numbers, bytes integers, unknown values null, names as in docs/schema.md; the
// object carries its own version ("fpscope_report": kReportJsonVersion). docs/cli.md lists every
// field. Front ends fill ReportData with what they show, so a test can hold one against the other.
#pragma once

#include "fpscope/analysis.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fpscope::analysis {

inline constexpr int kReportJsonVersion = 1;

struct ReportData {
  RunSummary summary;                      // always present
  std::optional<NonfiniteReport> nonfinite;
  std::optional<WhyReport> why;
  std::optional<LossScaleReport> loss_scale;
  std::optional<MemoryReport> memory;
  std::optional<RanksReport> ranks;
  std::optional<std::pair<RangeView, std::vector<ViewRangeRow>>> ranges;
  std::optional<Fp8Readiness> fp8;
  std::optional<LearningReport> learning;
};

// Every section of the report, read from the trace (ranges in `view`).
ReportData report_data(const Trace& trace, RangeView view = RangeView::Activations);

// The JSON text of the report (2-space indented, ending in a newline).
std::string report_json(const ReportData& data);
// The `nonfinite.intended` object: {tensors, nan, pos_inf, neg_inf, made_by}.
nlohmann::ordered_json intended_json(const IntendedNonfinite& intended);
std::string compare_json(const Comparison& comparison);

}  // namespace fpscope::analysis
