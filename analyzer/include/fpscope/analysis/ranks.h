// Ranks of a multi-process run: each rank's summary and where they differ.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

// A trace of a multi-process run (MPI ranks, PyTorch DDP) holds every rank; one process is rank 0.

struct RankRow {
  int32_t rank = 0;
  int64_t processes = 0;                 // traced processes with this rank (1 in an MPI run)
  std::optional<int64_t> pid;
  std::string host;
  std::optional<std::string> ended;      // "exited", "vanished" (killed or crashed), unknown
  int64_t kernels = 0, steps = 0;
  int64_t nonfinite_tensors = 0;
  std::optional<int64_t> first_origin_kernel_id, first_origin_step, first_origin_ns;
  std::optional<int64_t> memory_peak_bytes;
  int64_t loss_scale_events = 0, skipped_steps = 0;
  int64_t slowest_steps = 0;  // steps in which this rank's step took longest
  int64_t held_back_ns = 0;   // over those steps: how much longer than the other ranks' mean it took
};

struct RanksReport {
  std::vector<RankRow> ranks;  // by rank
  // The rank whose first NaN/Inf made from finite inputs came first, by time, and how long before
  // the next rank's first origin (nullopt: no other rank made one). Times are each process's
  // monotonic clock: comparable only between ranks of one host (same_host); across hosts the
  // earliest step decides (then the lower rank) and there is no lead.
  std::optional<int32_t> first_origin_rank;
  std::optional<int64_t> first_origin_lead_ns;
  bool same_host = true;
  // Loss scale: steps that more than one rank recorded, and those where the ranks' scales or skip
  // decisions differed.
  int64_t loss_scale_steps_compared = 0, loss_scale_disagreements = 0;
  std::optional<int64_t> first_disagreement_step;
};
RanksReport ranks(const Trace& trace);

// Live bytes over time: one point after each event, thinned to at most max_points (0: all) while
// keeping the peak.
struct MemoryPoint {
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  int64_t total = 0;
  std::array<int64_t, kCategoryCount> by_category{};
};
std::vector<MemoryPoint> memory_timeline(const Trace& trace, std::size_t max_points = 0);

}  // namespace fpscope::analysis
