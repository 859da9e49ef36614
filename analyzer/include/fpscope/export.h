// Writers that turn a trace into other formats: CSV (one file per table), JSON (the whole trace),
// Chrome trace event JSON (for Perfetto and chrome://tracing) and a self-contained HTML report with
// inline SVG plots. The `fpscope export` verb is a thin wrapper over these.
#pragma once

#include "fpscope/analysis.h"

#include <ostream>
#include <string>
#include <vector>

namespace fpscope::analysis {

// Writes every table of the trace as DIR/<table>.csv (header row, RFC 4180 quoting). Returns the
// files written. Throws std::runtime_error when DIR cannot be created or written.
std::vector<std::string> export_csv(const Trace& trace, const std::string& dir);

// The whole trace as one JSON object: {"meta": {...}, "tables": {"kernels": [{...}, ...], ...}}.
void export_json(const Trace& trace, std::ostream& out);

// Chrome trace event format: kernels and NVTX ranges as complete ('X') events on one track per
// traced thread, nested by time; counters ('C') for the loss scale and live memory per category.
void export_chrome_trace(const Trace& trace, std::ostream& out);

// One HTML page, no external resources: summary, non-finite origin, ranges, loss and loss scale
// over steps, memory by category over time, and a heat map of layer ranges by step.
void export_html(const Trace& trace, std::ostream& out);

}  // namespace fpscope::analysis
