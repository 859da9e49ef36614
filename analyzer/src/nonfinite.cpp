// Non-finite values: the first NaN/Inf a kernel made from finite inputs, the chain of launches that
// passed it on (followed through tensor ids), and the count of non-finite outputs by kernel.
#include "report_util.h"

#include "fpscope/contract/collectives.h"

#include <algorithm>
#include <set>

namespace fpscope::analysis {


namespace {

constexpr const char* kEventColumns =
    "SELECT n.kernel_id, n.tensor_id, sk.value, sl.value, sp.value, k.step, st.value, d.name, t.shape, "
    "n.kind, n.first_index, n.first_bits, n.origin, t.nan, t.pos_inf, t.neg_inf, k.start_ns, t.tensor_uid, k.rank "
    "FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id JOIN tensors t ON t.id = n.tensor_id "
    "JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id "
    "LEFT JOIN strings sp ON sp.id = k.phase_id LEFT JOIN strings st ON st.id = t.name_id "
    "LEFT JOIN dtypes d ON d.id = t.dtype ";

NonfiniteEvent read_event(const sql::Statement& st) {
  NonfiniteEvent e;
  e.kernel_id = st.i64(0);
  e.tensor_id = st.i64(1);
  e.kernel = st.text(2);
  e.op = op_of_kernel(e.kernel);
  e.layer = st.opt_text(3);
  e.phase = st.opt_text(4);
  e.step = st.opt_i64(5);
  e.tensor = st.text(6);
  e.dtype = st.text(7);
  e.shape = st.text(8);
  e.kind = st.text(9);
  e.first_index = st.i64(10);
  e.first_bits = st.i64(11);
  e.origin = st.i64(12) != 0;
  e.nan = st.i64(13);
  e.pos_inf = st.i64(14);
  e.neg_inf = st.i64(15);
  e.start_ns = st.i64(16);
  e.rank = static_cast<int32_t>(st.i64(18));
  return e;
}

std::optional<NonfiniteEvent> first_event(const Trace& trace, bool origins_only) {
  sql::Statement st(detail::db(trace), std::string(kEventColumns) + "WHERE n.allowed = 0 " +
                                 (origins_only ? "AND n.origin = 1 " : "") +
                                 "ORDER BY k.start_ns, n.kernel_id, t.role, t.slot LIMIT 1");
  if (!st.step()) return std::nullopt;
  return read_event(st);
}

// Follows the origin's tensors forward: a later launch with a non-finite output that read a tainted
// tensor passed it on, and its non-finite outputs become tainted too. Without tensor ids, every later
// non-finite output of the origin's step is taken instead. Within the origin's process: its launch
// numbers and allocation ids are its own (processes.id << 40 and up).
void follow_propagation(const Trace& trace, const NonfiniteEvent& origin, size_t max_chain, NonfiniteReport& report) {
  const auto& db = detail::db(trace);
  std::set<int64_t> tainted;
  {
    sql::Statement st(db, "SELECT t.tensor_uid FROM nonfinite n JOIN tensors t ON t.id = n.tensor_id "
                "WHERE n.kernel_id = ?1 AND t.tensor_uid IS NOT NULL");
    st.bind(1, origin.kernel_id);
    while (st.step()) tainted.insert(st.i64(0));
  }
  const bool by_uid = !tainted.empty();
  sql::Statement events(db, std::string(kEventColumns) + "WHERE n.kernel_id > ?1 AND n.kernel_id >> 40 = ?1 >> 40 AND n.allowed = 0 "
                                 "ORDER BY n.kernel_id, t.slot LIMIT 200000");
  events.bind(1, origin.kernel_id);
  sql::Statement inputs(db, "SELECT tensor_uid FROM tensors WHERE kernel_id = ?1 AND role = 'in' AND tensor_uid IS NOT NULL");
  int64_t last_kernel = -1;
  bool last_kernel_passed = false;
  while (events.step()) {
    NonfiniteEvent e = read_event(events);
    bool passed = false;
    if (e.kernel_id == last_kernel) {
      passed = last_kernel_passed;
    } else if (by_uid) {
      inputs.reset();
      inputs.bind(1, e.kernel_id);
      while (inputs.step()) passed = passed || tainted.count(inputs.i64(0)) > 0;
    } else {
      passed = e.step == origin.step;
    }
    if (e.kernel_id != last_kernel && !passed && !by_uid && e.step != origin.step) break;
    last_kernel = e.kernel_id;
    last_kernel_passed = passed;
    if (!passed) continue;
    if (!events.is_null(17)) tainted.insert(events.i64(17));
    if (!report.propagation.empty() && report.propagation.back().kernel_id == e.kernel_id) continue;  // one entry a launch
    if (report.propagation.size() == max_chain) {
      report.propagation_truncated = true;
      return;
    }
    report.propagation.push_back(std::move(e));
  }
}

void count_by_kernel(const Trace& trace, NonfiniteReport& report) {
  sql::Statement st(detail::db(trace),
          "SELECT sk.value, sl.value, n.tensors, n.origins, n.first_step, n.first_kernel_id, "
          "  coalesce(r.nan, 0), coalesce(r.pos_inf, 0), coalesce(r.neg_inf, 0) "
          "FROM summary_nonfinite n JOIN strings sk ON sk.id = n.kernel_name_id "
          "LEFT JOIN strings sl ON sl.id = n.layer_id "
          "LEFT JOIN (SELECT kernel_name_id, layer_id, sum(nan) AS nan, sum(pos_inf) AS pos_inf, "
          "           sum(neg_inf) AS neg_inf FROM summary_ranges WHERE role = 'out' "
          "           GROUP BY kernel_name_id, layer_id) r "
          "  ON r.kernel_name_id = n.kernel_name_id AND r.layer_id IS n.layer_id "
          "ORDER BY coalesce(r.nan, 0) + coalesce(r.pos_inf, 0) + coalesce(r.neg_inf, 0) DESC, "
          "         n.first_kernel_id");
  int64_t first_kernel = -1;
  while (st.step()) {
    NonfiniteByKernel row;
    row.kernel = st.text(0);
    row.op = op_of_kernel(row.kernel);
    row.layer = st.opt_text(1);
    row.tensors = st.i64(2);
    row.origins = st.i64(3);
    row.first_step = st.opt_i64(4);
    row.first_kernel_id = st.i64(5);
    row.nan = st.i64(6);
    row.pos_inf = st.i64(7);
    row.neg_inf = st.i64(8);
    report.tensors += row.tensors;
    report.origins += row.origins;
    if (first_kernel < 0 || row.first_kernel_id < first_kernel) {
      first_kernel = row.first_kernel_id;
      report.first_step = row.first_step;
    }
    report.by_kernel.push_back(std::move(row));
  }
  sql::Statement totals(detail::db(trace),
              "SELECT coalesce(sum(nan), 0), coalesce(sum(pos_inf), 0), coalesce(sum(neg_inf), 0) "
              "FROM summary_ranges WHERE role = 'out'");
  if (totals.step()) {
    report.nan = totals.i64(0);
    report.pos_inf = totals.i64(1);
    report.neg_inf = totals.i64(2);
  }
  if (first_kernel >= 0) {  // the step of the very first non-finite output, not the smallest step
    sql::Statement step(detail::db(trace), "SELECT step FROM kernels WHERE id = ?1");
    step.bind(1, first_kernel);
    if (step.step()) report.first_step = step.opt_i64(0);
  }
}


// Whether the launch's measured inputs were all finite (nullopt: none measured). Values an allow
// rule covers count as non-finite here: they are in the input all the same.
std::optional<bool> inputs_finite(const Trace& trace, int64_t kernel_id) {
  sql::Statement st(detail::db(trace),
                    "SELECT count(*), coalesce(sum(nan + pos_inf + neg_inf), 0) FROM tensors "
                    "WHERE kernel_id = ?1 AND role = 'in'");
  st.bind(1, kernel_id);
  if (!st.step() || st.i64(0) == 0) return std::nullopt;
  return st.i64(1) == 0;
}

}  // namespace

IntendedNonfinite intended_nonfinite(const Trace& trace) {
  IntendedNonfinite r;
  sql::Statement values(detail::db(trace),
                        "SELECT coalesce(sum(intended_nan), 0), coalesce(sum(intended_pos_inf), 0), "
                        "  coalesce(sum(intended_neg_inf), 0) FROM summary_ranges WHERE role = 'out'");
  if (values.step()) {
    r.nan = values.i64(0);
    r.pos_inf = values.i64(1);
    r.neg_inf = values.i64(2);
  }
  r.tensors = detail::impl(trace).count("allowed_nonfinite_tensors").value_or(0);
  sql::Statement made_by(detail::db(trace),
                         "SELECT sk.value FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id "
                         "JOIN strings sk ON sk.id = k.name_id WHERE n.allowed = 1 AND n.origin = 1 "
                         "GROUP BY k.name_id ORDER BY min(n.kernel_id)");
  while (made_by.step()) {
    std::string op = op_of_kernel(made_by.text(0));
    if (op.empty()) op = made_by.text(0);
    if (std::find(r.made_by.begin(), r.made_by.end(), op) == r.made_by.end()) r.made_by.push_back(std::move(op));
  }
  return r;
}

std::string intended_text(const IntendedNonfinite& intended) {
  if (intended.values() == 0) return "";
  std::string counts;
  const std::pair<int64_t, const char*> kinds[] = {{intended.nan, "NaN"}, {intended.pos_inf, "+Inf"}, {intended.neg_inf, "-Inf"}};
  for (const auto& [n, kind] : kinds) {
    if (n == 0) continue;
    counts += (counts.empty() ? "" : ", ") + human_count(n) + " intended " + kind;
  }
  std::string ops;
  for (const std::string& op : intended.made_by) ops += (ops.empty() ? "" : ", ") + op;
  return fmt::format("{}{} in {} output tensor{} (an allow rule covers them; left out of every other count)", counts,
                     ops.empty() ? "" : " (" + ops + ")", human_count(intended.tensors), intended.tensors == 1 ? "" : "s");
}

FirstNonfinite how_it_came(const NonfiniteEvent& e) {
  if (e.origin) return FirstNonfinite::Made;
  if (!contract::is_collective_kernel(e.kernel)) return FirstNonfinite::Returned;
  if (!e.inputs_finite) return FirstNonfinite::ReceivedOrOwnInput;
  return *e.inputs_finite ? FirstNonfinite::ReceivedFromAnotherRank : FirstNonfinite::Returned;
}

const char* how_it_came_words(FirstNonfinite how) {
  switch (how) {
    case FirstNonfinite::Made: return "made by";
    case FirstNonfinite::ReceivedFromAnotherRank: return "received from another rank by";
    case FirstNonfinite::ReceivedOrOwnInput: return "(from another rank or its own unmeasured inputs) returned by";
    case FirstNonfinite::Returned: return "(no origin measured) returned by";
  }
  return "returned by";
}

NonfiniteReport nonfinite(const Trace& trace, std::size_t max_chain) {
  NonfiniteReport report;
  count_by_kernel(trace, report);
  report.intended = intended_nonfinite(trace);
  report.first_origin = first_event(trace, true);
  if (!report.first_origin) report.first_origin = first_event(trace, false);
  if (report.first_origin) {
    report.first_origin->inputs_finite = inputs_finite(trace, report.first_origin->kernel_id);
    follow_propagation(trace, *report.first_origin, max_chain, report);
  }
  return report;
}

}  // namespace fpscope::analysis
