// Memory: live bytes per category at the peak, each category's own maximum, the largest
// allocations, and live bytes over time.
#include "report_util.h"

#include <algorithm>

namespace fpscope::analysis {


MemoryReport memory(const Trace& trace, std::size_t largest) {
  auto& impl = detail::impl(trace);
  MemoryReport report;
  report.peak_bytes = impl.count("memory_peak_bytes").value_or(0);
  report.peak_ns = impl.count("memory_peak_ns");
  report.peak_step = impl.count("memory_peak_step");
  report.events = impl.count("memory_events").value_or(0);
  for (int c = 0; c < kCategoryCount; ++c) report.by_category[c].category = kCategoryNames[c];
  sql::Statement st(detail::db(trace),
          "SELECT category, at_peak, max_live, allocated, allocations, live_at_end FROM summary_memory");
  while (st.step()) {
    const int64_t c = st.i64(0);
    if (c < 0 || c >= kCategoryCount) continue;
    auto& m = report.by_category[c];
    m.at_peak = st.i64(1);
    m.max_live = st.i64(2);
    m.allocated = st.i64(3);
    m.allocations = st.i64(4);
    report.live_at_end += st.i64(5);
  }
  sql::Statement top(detail::db(trace),
           "SELECT s.value, c.name, a.bytes, a.count, a.first_alloc_id, a.first_alloc_ns, a.first_step "
           "FROM summary_allocations a JOIN strings s ON s.id = a.name_id "
           "LEFT JOIN categories c ON c.id = a.category "
           "ORDER BY a.bytes DESC, a.first_event_id LIMIT ?1");
  top.bind(1, static_cast<int64_t>(largest));
  while (top.step()) {
    Allocation a;
    a.name = top.text(0);
    a.category = top.text(1);
    a.bytes = top.i64(2);
    a.count = top.i64(3);
    a.first_alloc_id = top.i64(4);
    a.first_alloc_ns = top.i64(5);
    a.first_step = top.opt_i64(6);
    report.largest.push_back(std::move(a));
  }
  return report;
}

std::vector<MemoryPoint> memory_timeline(const Trace& trace, std::size_t max_points) {
  // The schema's memory timeline: live bytes after each event, in total and in its category.
  sql::Statement st(detail::db(trace),
                    "SELECT t_ns, step, category, live, category_live FROM v_memory_timeline ORDER BY t_ns, id");
  std::vector<MemoryPoint> points;
  MemoryPoint live;
  while (st.step()) {
    const int64_t c = st.i64(2);
    live.t_ns = st.i64(0);
    live.step = st.opt_i64(1);
    live.total = st.i64(3);
    if (c >= 0 && c < kCategoryCount) live.by_category[c] = st.i64(4);
    if (!points.empty() && points.back().t_ns == live.t_ns) {
      points.back() = live;  // one point per moment: the state after its last event
    } else {
      points.push_back(live);
    }
  }
  if (max_points == 0 || points.size() <= max_points || max_points < 2) return points;
  // Thin to max_points by keeping, in each bucket, the point with the most live bytes.
  std::vector<MemoryPoint> thinned;
  const double bucket = static_cast<double>(points.size()) / static_cast<double>(max_points);
  for (size_t b = 0; b < max_points; ++b) {
    size_t from = static_cast<size_t>(b * bucket);
    size_t to = std::min(points.size(), static_cast<size_t>((b + 1) * bucket));
    if (from >= to) continue;
    auto best = std::max_element(points.begin() + from, points.begin() + to,
                                 [](const auto& x, const auto& y) { return x.total < y.total; });
    thinned.push_back(*best);
  }
  return thinned;
}

}  // namespace fpscope::analysis
