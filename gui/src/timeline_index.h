// The timeline's own index of a trace's kernels and NVTX ranges, built once on the loading thread
// from analysis::timeline() windows. Spans live in lanes (ranges: one lane per thread and nesting
// depth; kernels: one lane per thread and device), sorted by start, with a running maximum of ends
// so the first span visible at a time is a binary search away. Each lane also keeps levels of
// detail: level l merges neighbours closer than gap(l) into one block, so a zoomed-out frame draws
// about one block per pixel instead of millions of kernels.
#pragma once

#include <fpscope/analysis.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace fpscope::gui {

struct TimeSpan {
  enum Flags : uint8_t { kNonfinite = 1, kFailed = 2, kOpenEnded = 4, kSampled = 8 };
  int64_t start = 0, end = 0;
  int64_t id = 0;        // kernels.id or nvtx_ranges.id
  uint32_t name = 0;     // index into TimelineIndex::names
  uint32_t layer = 0;    // kernels: layer name index (0 = none)
  int32_t step = -1;     // -1: none
  uint8_t flags = 0;
};

// A merged run of spans at one level of detail.
struct TimeBlock {
  int64_t start = 0, end = 0;
  uint32_t first = 0;    // index of its first span in the lane
  uint32_t count = 0;    // spans merged
  uint32_t name = 0;     // name of its longest span
  uint8_t flags = 0;     // OR of its spans' flags
};

struct TimeLane {
  enum class Kind { kRanges, kKernels };
  Kind kind = Kind::kKernels;
  int32_t rank = 0;        // the process's rank: a multi-rank trace has lanes per rank
  int64_t thread = 0;
  int depth = 0;           // ranges: nesting depth; kernels: device (0 cpu, 1 cuda)
  std::string label;       // "thread 1 - step", "thread 1 - kernels (cpu)"
  std::vector<TimeSpan> spans;
  std::vector<int64_t> max_end;              // max_end[i] = max(spans[0..i].end)
  std::vector<int64_t> level_gap;            // level_gap[l]: merge threshold of lod[l] (ns)
  std::vector<std::vector<TimeBlock>> lod;   // lod[0] has one block per span

  // Index of the first span whose end is after t (spans before it end at or before t).
  size_t first_visible(int64_t t) const;
  // The level whose merge gap fits in `ns_per_pixel` (the coarsest one still sharper than a pixel).
  size_t level_for(double ns_per_pixel) const;
};

class TimelineIndex {
 public:
  std::vector<std::string> names{""};  // interned names; index 0 is "no name"
  std::vector<TimeLane> lanes;         // per rank: ranges lanes first (by thread, depth), then kernel lanes
  bool several_ranks = false;          // lanes of more than one rank (set by finish())

  void add(const analysis::TimelineWindow& window, int64_t accept_from, int64_t accept_to);
  // Sorts, builds running maxima and levels of detail; call once after the last add().
  void finish();

  size_t kernel_count() const { return kernel_count_; }
  // Where a kernel launch is drawn, for jumps from other views; nullopt if unknown.
  struct Location {
    size_t lane, index;
  };
  std::optional<Location> find_kernel(int64_t kernel_id) const;
  const std::string& name(uint32_t i) const { return names[i]; }

 private:
  uint32_t intern(const std::string& s);
  TimeLane& lane_for(TimeLane::Kind kind, int32_t rank, int64_t thread, int depth, const std::string& what);

  std::unordered_map<std::string, uint32_t> name_ids_;
  std::vector<std::pair<int64_t, Location>> kernel_locations_;  // by kernel id
  size_t kernel_count_ = 0;
};

}  // namespace fpscope::gui
