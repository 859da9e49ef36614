// One loaded trace: the analyzer's Trace plus everything the views draw, read once on the loading
// thread through libfpscope_analysis (so the numbers are the CLI's), and the GUI's own time index
// of kernels and ranges for the timeline. A TraceData is immutable once built; a trace still being
// written is re-read into a new TraceData and swapped in whole.
#pragma once

#include <fpscope/analysis.h>
#include <fpscope/report_json.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "timeline_index.h"

namespace fpscope::gui {

struct LoadStatus;

struct TraceData {
  std::filesystem::path path;
  // The connection the loader used; kept for the views' small on-demand queries (hovered kernel's
  // tensors, a tensor's exponent histogram). Calls on it are serialized by the library.
  std::shared_ptr<analysis::Trace> trace;

  analysis::RunSummary summary;
  analysis::NonfiniteReport nonfinite;
  analysis::WhyReport why;  // the causes behind the first NaN/Inf and the skipped steps
  analysis::LossScaleReport loss_scale;
  std::vector<analysis::StepRow> steps;
  analysis::MemoryReport memory;
  analysis::RanksReport ranks;
  analysis::Fp8Readiness fp8;  // the fp8 forecast (fpscope report --section fp8), if the trace has one
  analysis::LearningReport learning;  // updates lost, stores that flushed (fpscope report --section learning)
  std::vector<analysis::MemoryPoint> memory_over_time;  // thinned for plotting
  std::vector<analysis::LayerStepCell> layer_steps;
  std::vector<std::string> layers;  // in first-seen order, for heat map rows
  std::vector<analysis::RangeRow> ranges;  // by layer and kernel, outputs
  std::vector<analysis::Event> events;  // the first kEventLimit, from analysis::events()
  bool events_truncated = false;
  std::optional<std::pair<int64_t, int64_t>> bounds;
  TimelineIndex timeline;

  // Seconds each stage took, for --dump-state and the benchmark.
  double seconds_open = 0, seconds_reports = 0, seconds_timeline = 0;

  // False in the early snapshot published while the timeline index and the events are being read.
  bool complete = false;

  bool still_running() const { return summary.state == analysis::RunEnd::Running; }
  // The step row of a step, or null.
  const analysis::StepRow* step_row(int64_t step) const;
};

// Reads the trace at `path` (throws analysis::TraceError or std::exception with a message that says
// what is wrong). Reports progress and stops when progress.cancelled is set.
// `rank`: only that rank of a multi-process trace (analysis::OpenOptions::rank).
std::shared_ptr<const TraceData> load_trace_data(const std::filesystem::path& path, LoadStatus& progress,
                                                 std::optional<int32_t> rank = std::nullopt);

// The events the event table and the timeline show: the first kEventLimit in time order.
inline constexpr size_t kEventLimit = 50'000;

// The report's data as the views draw it (for --dump-state: the same object as `fpscope report
// --format json`, filled from what was loaded).
analysis::ReportData report_data_of(const TraceData& data);

// On-demand queries for the views, cached per trace: the tensors of a kernel launch and the
// exponent histogram of a tensor. Failures come back as an error string (never thrown).
class KernelDetailCache {
 public:
  const std::vector<analysis::TensorRecord>* tensors(const TraceData& data, int64_t kernel_id, std::string* error);
  const analysis::ExponentHistogram* histogram(const TraceData& data, int64_t tensor_id, std::string* error);

 private:
  const TraceData* owner_ = nullptr;
  std::unordered_map<int64_t, std::vector<analysis::TensorRecord>> tensors_;
  std::unordered_map<int64_t, analysis::ExponentHistogram> histograms_;
  void reset_for(const TraceData& data);
};

}  // namespace fpscope::gui
