// Loading a trace for the views (see trace_data.h). Every report comes from libfpscope_analysis;
// this file only sequences the calls, reports progress and builds the timeline's index.
#include "trace_data.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <fpscope/units.h>

#include "trace_set.h"

namespace fpscope::gui {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes progress for the window; throws Cancelled when the trace was closed meanwhile.
void report(LoadStatus& status, const std::string& stage, double fraction) {
  if (status.cancelled) throw analysis::TraceError(analysis::TraceErrorKind::Cancelled, "closed while loading");
  status.fraction = static_cast<float>(fraction);
  std::lock_guard lock(status.mutex);
  status.stage = stage;
}

// Reads every kernel and range through analysis::timeline() in windows of about a million kernels,
// keeping each span once: a window accepts the spans that start inside it.
void build_timeline(const analysis::Trace& trace, TraceData& data, LoadStatus& status) {
  if (!data.bounds) return;
  const auto [first, last] = *data.bounds;
  const int64_t end = last + 1;
  constexpr size_t kBatch = 1'000'000;
  int64_t width = std::max<int64_t>(1, (end - first) / 8);
  for (int64_t t0 = first; t0 < end;) {
    const int64_t t1 = std::min(end, t0 + width);
    const analysis::TimelineWindow window = analysis::timeline(trace, t0, t1, kBatch);
    int64_t cut = t1;
    if (window.truncated && !window.kernels.empty() && window.kernels.back().start_ns > t0) {
      cut = window.kernels.back().start_ns;  // the rest of that instant comes with the next window
      width = std::max<int64_t>(1, (cut - t0));
    } else if (window.kernels.size() < kBatch / 4) {
      width *= 2;
    }
    data.timeline.add(window, t0, cut);
    t0 = cut;
    report(status, "indexing the timeline", 0.45 + 0.45 * static_cast<double>(t0 - first) / static_cast<double>(end - first));
  }
  data.timeline.finish();
}

std::vector<std::string> layers_in_order(const std::vector<analysis::LayerStepCell>& cells) {
  std::vector<std::string> layers;
  for (const auto& c : cells) {
    if (std::find(layers.begin(), layers.end(), c.layer) == layers.end()) layers.push_back(c.layer);
  }
  return layers;
}

// The cached value for `key`, loaded on first use; a failed load is not cached, its message goes to *error.
template <typename Cache, typename Load>
const typename Cache::mapped_type* find_or_load(Cache& cache, int64_t key, Load load, std::string* error) {
  if (auto it = cache.find(key); it != cache.end()) return &it->second;
  try {
    return &cache.emplace(key, load()).first->second;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}

}  // namespace

const analysis::StepRow* TraceData::step_row(int64_t step) const {
  auto it = std::lower_bound(steps.begin(), steps.end(), step,
                             [](const analysis::StepRow& r, int64_t s) { return r.step < s; });
  return it != steps.end() && it->step == step ? &*it : nullptr;
}

std::shared_ptr<const TraceData> load_trace_data(const std::filesystem::path& path, LoadStatus& status,
                                                 std::optional<int32_t> rank) {
  auto data = std::make_shared<TraceData>();
  data->path = path;
  auto started = Clock::now();
  report(status, "opening", 0.0);
  analysis::OpenOptions options;
  options.rank = rank;
  options.progress = [&status](const analysis::LoadProgress& p) {
    if (status.cancelled) return false;
    status.fraction = static_cast<float>(0.3 * p.fraction);
    std::lock_guard lock(status.mutex);
    status.stage = p.stage;
    return true;
  };
  data->trace = analysis::Trace::open(path.string(), options);
  const analysis::Trace& trace = *data->trace;
  data->seconds_open = seconds_since(started);

  started = Clock::now();
  report(status, "summary", 0.3);
  data->summary = analysis::summary(trace);
  data->nonfinite = analysis::nonfinite(trace);
  report(status, "loss scale", 0.34);
  data->loss_scale = analysis::loss_scale(trace);
  report(status, "causes", 0.35);
  data->why = analysis::why(trace);
  report(status, "memory", 0.36);
  data->memory = analysis::memory(trace, 12);
  data->ranks = analysis::ranks(trace);
  data->fp8 = analysis::fp8_readiness(trace);
  data->learning = analysis::learning(trace);
  report(status, "value ranges", 0.38);
  data->ranges = analysis::ranges(trace, analysis::RangeGrouping::LayerKernel, analysis::RoleFilter::Outputs);
  data->bounds = analysis::time_bounds(trace);
  {
    // The headline reports answer from the summary tables at once; the window draws them while
    // the per-step series, the heat map, the timeline index and the events are read.
    auto early = std::make_shared<TraceData>(*data);
    std::lock_guard lock(status.mutex);
    status.partial = std::move(early);
  }
  report(status, "steps", 0.4);
  data->steps = analysis::steps(trace);
  report(status, "memory over time", 0.42);
  data->memory_over_time = analysis::memory_timeline(trace, 4000);
  report(status, "layer ranges by step", 0.44);
  data->layer_steps = analysis::layer_step_ranges(trace);
  data->layers = layers_in_order(data->layer_steps);
  data->seconds_reports = seconds_since(started);

  started = Clock::now();
  build_timeline(trace, *data, status);
  report(status, "events", 0.92);
  {
    analysis::EventQuery query;
    query.limit = kEventLimit;
    analysis::EventPage page = analysis::events(*data->trace, query);
    data->events = std::move(page.events);
    data->events_truncated = page.more;
  }
  data->seconds_timeline = seconds_since(started);
  data->complete = true;
  report(status, "done", 1.0);
  return data;
}

analysis::ReportData report_data_of(const TraceData& d) {
  analysis::ReportData r;
  r.summary = d.summary;
  r.nonfinite = d.nonfinite;
  r.why = d.why;
  r.loss_scale = d.loss_scale;
  r.memory = d.memory;
  r.ranks = d.ranks;
  r.fp8 = d.fp8;
  r.learning = d.learning;
  r.ranges = std::make_pair(analysis::RangeView::Activations, analysis::view_ranges(d.layer_steps));
  return r;
}

void KernelDetailCache::reset_for(const TraceData& data) {
  if (owner_ == &data) return;
  owner_ = &data;
  tensors_.clear();
  histograms_.clear();
}

const std::vector<analysis::TensorRecord>* KernelDetailCache::tensors(const TraceData& data, int64_t kernel_id,
                                                                     std::string* error) {
  reset_for(data);
  return find_or_load(tensors_, kernel_id, [&] { return analysis::tensors_of_kernel(*data.trace, kernel_id); }, error);
}

const analysis::ExponentHistogram* KernelDetailCache::histogram(const TraceData& data, int64_t tensor_id,
                                                                std::string* error) {
  reset_for(data);
  return find_or_load(histograms_, tensor_id, [&] { return analysis::exponent_histogram(*data.trace, tensor_id); },
                      error);
}

}  // namespace fpscope::gui
