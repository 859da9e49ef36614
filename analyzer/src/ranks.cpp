// Ranks: what each process of a multi-process run did, which made the first NaN/Inf, whether their
// loss scales agreed, and which rank held the others back in each step.
#include "report_util.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace fpscope::analysis {

RanksReport ranks(const Trace& trace) {
  const auto& db = detail::db(trace);
  detail::impl(trace).ensure_summaries();
  RanksReport report;
  {
    sql::Statement st(db,
                      "SELECT rank, processes, pid, host, ended, kernels, steps, nonfinite_tensors,"
                      " first_origin_kernel_id, first_origin_step, first_origin_ns, memory_peak_bytes,"
                      " loss_scale_events, skipped_steps FROM summary_ranks ORDER BY rank");
    while (st.step()) {
      RankRow r;
      r.rank = static_cast<int32_t>(st.i64(0));
      r.processes = st.i64(1);
      r.pid = st.opt_i64(2);
      r.host = st.opt_text(3).value_or("");
      r.ended = st.opt_text(4);
      r.kernels = st.i64(5);
      r.steps = st.i64(6);
      r.nonfinite_tensors = st.i64(7);
      r.first_origin_kernel_id = st.opt_i64(8);
      r.first_origin_step = st.opt_i64(9);
      r.first_origin_ns = st.opt_i64(10);
      r.memory_peak_bytes = st.opt_i64(11);
      r.loss_scale_events = st.i64(12);
      r.skipped_steps = st.i64(13);
      report.ranks.push_back(std::move(r));
    }
  }
  report.same_host = db.query_int("SELECT count(DISTINCT host) FROM processes").value_or(0) <= 1;

  // The first origin by time, and its lead over the next rank's. Processes on different hosts
  // have clocks that cannot be compared: there the earliest step decides (then the lower rank),
  // and no lead is given.
  std::vector<std::pair<int64_t, int32_t>> origins;
  for (const RankRow& r : report.ranks) {
    if (!r.first_origin_ns) continue;
    const int64_t when = report.same_host ? *r.first_origin_ns : r.first_origin_step.value_or(INT64_MAX);
    origins.emplace_back(when, r.rank);
  }
  std::sort(origins.begin(), origins.end());
  if (!origins.empty()) {
    report.first_origin_rank = origins[0].second;
    if (origins.size() > 1 && report.same_host) report.first_origin_lead_ns = origins[1].first - origins[0].first;
  }

  // Loss scale, step by step: the scale each rank used and whether it skipped.
  {
    sql::Statement st(db,
                      "SELECT step, count(DISTINCT rank), count(DISTINCT scale_before || '/' || skipped) "
                      "FROM loss_scale WHERE step IS NOT NULL GROUP BY step HAVING count(DISTINCT rank) > 1 "
                      "ORDER BY step");
    while (st.step()) {
      ++report.loss_scale_steps_compared;
      if (st.i64(2) > 1) {
        ++report.loss_scale_disagreements;
        if (!report.first_disagreement_step) report.first_disagreement_step = st.i64(0);
      }
    }
  }

  // The slowest rank of each step that several ranks ran, and how much longer it took than the
  // others did on average: the time they spent waiting for it at the next collective.
  {
    sql::Statement st(db,
                      "SELECT step, rank, max(end_ns) - min(start_ns) FROM nvtx_ranges "
                      "WHERE kind = 'step' AND step IS NOT NULL AND end_ns IS NOT NULL "
                      "GROUP BY step, rank ORDER BY step, rank");
    std::map<int32_t, RankRow*> by_rank;
    for (RankRow& r : report.ranks) by_rank[r.rank] = &r;
    std::vector<std::pair<int32_t, int64_t>> step_ranks;
    auto close_step = [&] {
      if (step_ranks.size() > 1) {
        auto slowest = std::max_element(step_ranks.begin(), step_ranks.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
        int64_t others = 0;
        for (const auto& [rank, duration] : step_ranks) others += duration;
        others -= slowest->second;
        const int64_t mean_others = others / static_cast<int64_t>(step_ranks.size() - 1);
        if (auto it = by_rank.find(slowest->first); it != by_rank.end()) {
          ++it->second->slowest_steps;
          it->second->held_back_ns += slowest->second - mean_others;
        }
      }
      step_ranks.clear();
    };
    std::optional<int64_t> current;
    while (st.step()) {
      const int64_t step = st.i64(0);
      if (current && *current != step) close_step();
      current = step;
      step_ranks.emplace_back(static_cast<int32_t>(st.i64(1)), st.i64(2));
    }
    close_step();
  }
  return report;
}

}  // namespace fpscope::analysis
