// Synthetic fpscope traces: a made-up but self-consistent run of the reference CNN (NVTX steps,
// phases and layers; kernels with their tensors; memory; loss scale; scalars), optionally with a
// planted NaN and its propagation. It is sent as the injector's wire records through the
// collector's own TraceWriter, so a generated trace is written and finalized by the real code. Used by tests before real
// traces exist and by the benchmarks, which need traces of 10 million tensor records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fpscope::synthetic {

struct Options {
  int64_t steps = 20;
  int64_t tensor_target = 0;         // > 0: choose the number of steps to write about this many tensors
  std::string precision = "fp32";    // fp32, fp16, bf16, amp-fp16, amp-bf16
  std::string loss_scale = "none";   // none, dynamic, static:N
  double scale_init = 65536;
  int64_t growth_interval = 8;
  std::optional<int64_t> nan_at_step;       // fc1's forward output turns NaN at this step
  std::optional<int64_t> overflow_at_step;  // gradients overflow (Inf) at this step: a backoff
  double activation_scale = 1.0;     // multiplies every forward magnitude (large: fp16 overflow)
  double activation_growth = 1.0;    // and this to the power of the step: a range that grows
  std::string end_reason = "exited";   // meta end_reason; "running" leaves the trace unfinished
  bool finalize = true;              // run trace_finalize.sql at the end
  bool basic_stats = false;          // leave the format counts and histograms NULL
  uint64_t seed = 1;
};

// Writes a new trace at `path` (replacing any file there). Throws std::runtime_error on failure.
// Returns the number of tensor records written.
int64_t write_trace(const std::string& path, const Options& options);

}  // namespace fpscope::synthetic
