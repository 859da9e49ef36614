// The timeline: launches, ranges and memory in time, read a window at a time.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

struct KernelSpan {
  int64_t id = 0, start_ns = 0, end_ns = 0;
  std::string kernel;
  std::optional<std::string> layer, phase;
  std::optional<int64_t> step;
  int64_t thread = 0;
  int device = 0, status = 0;
  bool sampled = false;
  bool nonfinite = false;  // one of its outputs holds NaN/Inf
  int32_t rank = 0;
};

struct RangeSpan {
  int64_t id = 0, start_ns = 0;
  std::optional<int64_t> end_ns;  // nullopt: never closed
  int64_t thread = 0;
  int depth = 0;
  std::string kind, name;
  std::optional<std::string> domain;
  std::optional<int64_t> step;
  int32_t rank = 0;
};

struct TimelineWindow {
  int64_t t0 = 0, t1 = 0;
  std::vector<KernelSpan> kernels;  // overlapping [t0, t1), by start
  std::vector<RangeSpan> ranges;    // overlapping [t0, t1), by start
  bool truncated = false;           // more than max_kernels kernels overlapped
};
// The time span of the whole trace (first to last event); nullopt for an empty trace.
std::optional<std::pair<int64_t, int64_t>> time_bounds(const Trace& trace);
TimelineWindow timeline(const Trace& trace, int64_t t0, int64_t t1, std::size_t max_kernels = 100000);

}  // namespace fpscope::analysis
