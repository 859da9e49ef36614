// The timeline's time index with levels of detail (see timeline_index.h).
#include "timeline_index.h"

#include <algorithm>
#include <cmath>

namespace fpscope::gui {

size_t TimeLane::first_visible(int64_t t) const {
  return static_cast<size_t>(std::upper_bound(max_end.begin(), max_end.end(), t) - max_end.begin());
}

size_t TimeLane::level_for(double ns_per_pixel) const {
  size_t level = 0;
  while (level + 1 < level_gap.size() && static_cast<double>(level_gap[level + 1]) <= ns_per_pixel) ++level;
  return level;
}

uint32_t TimelineIndex::intern(const std::string& s) {
  auto [it, inserted] = name_ids_.try_emplace(s, static_cast<uint32_t>(names.size()));
  if (inserted) names.push_back(s);
  return it->second;
}

TimeLane& TimelineIndex::lane_for(TimeLane::Kind kind, int32_t rank, int64_t thread, int depth, const std::string& what) {
  for (auto& lane : lanes) {
    if (lane.kind == kind && lane.rank == rank && lane.thread == thread && lane.depth == depth) return lane;
  }
  TimeLane lane;
  lane.kind = kind;
  lane.rank = rank;
  lane.thread = thread;
  lane.depth = depth;
  lane.label = kind == TimeLane::Kind::kRanges ? what : depth == 0 ? "kernels (cpu)" : "kernels (cuda)";
  lanes.push_back(std::move(lane));
  return lanes.back();
}

void TimelineIndex::add(const analysis::TimelineWindow& window, int64_t accept_from, int64_t accept_to) {
  for (const auto& r : window.ranges) {
    if (r.start_ns < accept_from || r.start_ns >= accept_to) continue;
    TimeSpan s;
    s.start = r.start_ns;
    s.end = r.end_ns.value_or(window.t1);
    s.id = r.id;
    // Steps are named by their number, which also gives neighbouring steps different colours.
    s.name = intern(r.kind == "step" && r.step ? "step " + std::to_string(*r.step) : r.name);
    s.step = r.step ? static_cast<int32_t>(*r.step) : -1;
    if (!r.end_ns) s.flags |= TimeSpan::kOpenEnded;
    lane_for(TimeLane::Kind::kRanges, r.rank, r.thread, r.depth, r.kind).spans.push_back(s);
  }
  for (const auto& k : window.kernels) {
    if (k.start_ns < accept_from || k.start_ns >= accept_to) continue;
    TimeSpan s;
    s.start = k.start_ns;
    s.end = std::max(k.end_ns, k.start_ns);
    s.id = k.id;
    s.name = intern(k.kernel);
    s.layer = k.layer ? intern(*k.layer) : 0;
    s.step = k.step ? static_cast<int32_t>(*k.step) : -1;
    if (k.nonfinite) s.flags |= TimeSpan::kNonfinite;
    if (k.status != 0) s.flags |= TimeSpan::kFailed;
    if (k.sampled) s.flags |= TimeSpan::kSampled;
    lane_for(TimeLane::Kind::kKernels, k.rank, k.thread, k.device, {}).spans.push_back(s);
    ++kernel_count_;
  }
}

namespace {

// Merges runs of narrow blocks (shorter than `gap`) that lie closer than `gap` to each other: at
// the zoom this level serves, each such run fits in about a pixel per gap. Blocks at least `gap`
// wide span a pixel or more and stay as they are, so step and layer boundaries remain visible.
std::vector<TimeBlock> merge_level(const std::vector<TimeBlock>& finer, int64_t gap) {
  std::vector<TimeBlock> out;
  out.reserve(finer.size() / 2 + 1);
  bool run_open = false;  // the last block is a run of narrow blocks that may take more
  for (const TimeBlock& b : finer) {
    const bool narrow = b.end - b.start < gap;
    if (run_open && narrow && b.start - out.back().end < gap) {
      TimeBlock& m = out.back();
      if (b.end - b.start > m.end - m.start) m.name = b.name;  // keep the name of the widest part
      m.end = std::max(m.end, b.end);
      m.count += b.count;
      m.flags |= b.flags;
    } else {
      out.push_back(b);
      run_open = narrow;
    }
  }
  return out;
}

void build_levels(TimeLane& lane) {
  std::sort(lane.spans.begin(), lane.spans.end(),
            [](const TimeSpan& a, const TimeSpan& b) { return a.start != b.start ? a.start < b.start : a.id < b.id; });
  lane.max_end.resize(lane.spans.size());
  int64_t running = INT64_MIN;
  std::vector<TimeBlock> base;
  base.reserve(lane.spans.size());
  for (size_t i = 0; i < lane.spans.size(); ++i) {
    const TimeSpan& s = lane.spans[i];
    running = std::max(running, s.end);
    lane.max_end[i] = running;
    base.push_back(TimeBlock{s.start, s.end, static_cast<uint32_t>(i), 1, s.name, s.flags});
  }
  lane.level_gap = {0};
  lane.lod.clear();
  lane.lod.push_back(std::move(base));
  if (lane.spans.empty()) return;
  // Gaps grow by 4x per level from 1 us until a level holds only a few blocks.
  int64_t gap = 1000;
  while (lane.lod.back().size() > 256 && lane.level_gap.size() < 40) {
    std::vector<TimeBlock> next = merge_level(lane.lod.back(), gap);
    lane.level_gap.push_back(gap);
    lane.lod.push_back(std::move(next));
    gap *= 4;
  }
}

}  // namespace

void TimelineIndex::finish() {
  std::stable_sort(lanes.begin(), lanes.end(), [](const TimeLane& a, const TimeLane& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.kind != b.kind) return a.kind == TimeLane::Kind::kRanges;
    return a.thread != b.thread ? a.thread < b.thread : a.depth < b.depth;
  });
  several_ranks = !lanes.empty() && lanes.front().rank != lanes.back().rank;
  kernel_locations_.clear();
  for (size_t l = 0; l < lanes.size(); ++l) {
    build_levels(lanes[l]);
    if (lanes[l].kind != TimeLane::Kind::kKernels) continue;
    for (size_t i = 0; i < lanes[l].spans.size(); ++i) {
      kernel_locations_.push_back({lanes[l].spans[i].id, Location{l, i}});
    }
  }
  std::sort(kernel_locations_.begin(), kernel_locations_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
}

std::optional<TimelineIndex::Location> TimelineIndex::find_kernel(int64_t kernel_id) const {
  auto it = std::lower_bound(kernel_locations_.begin(), kernel_locations_.end(), kernel_id,
                             [](const auto& e, int64_t id) { return e.first < id; });
  if (it == kernel_locations_.end() || it->first != kernel_id) return std::nullopt;
  return it->second;
}

}  // namespace fpscope::gui
