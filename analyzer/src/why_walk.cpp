// The lineage walk behind why() (why_walk.h).
#include "why_walk.h"

#include "fpscope/units.h"
#include "report_util.h"

namespace fpscope::analysis::lineage {

constexpr const char* kRowColumns =
    "SELECT t.id, t.kernel_id, t.role, s.value, d.name, t.tensor_uid, t.absmax, t.min_nonzero, t.zero, t.count, "
    "       t.nan + t.pos_inf + t.neg_inf, t.min, t.max, t.slot "
    "FROM tensors t JOIN strings s ON s.id = t.name_id JOIN dtypes d ON d.id = t.dtype ";

Row read_row(const sql::Statement& st) {
  Row r;
  r.id = st.i64(0);
  r.kernel_id = st.i64(1);
  r.role = st.text(2);
  r.name = st.text(3);
  r.dtype = st.text(4);
  r.uid = st.opt_i64(5);
  r.absmax = st.opt_f64(6);
  r.min_nonzero = st.opt_f64(7);
  r.zero = st.i64(8);
  r.count = st.i64(9);
  r.nonfinite = st.i64(10);
  r.min = st.opt_f64(11);
  r.max = st.opt_f64(12);
  r.slot = st.i64(13);
  return r;
}

Launch Walker::launch(int64_t id) {
  sql::Statement st(db_, "SELECT id, kernel, layer, phase, step FROM v_kernels WHERE id = ?1");
  st.bind(1, id);
  Launch l;
  if (!st.step()) return l;
  l.id = st.i64(0);
  l.kernel = st.text(1);
  l.layer = st.opt_text(2);
  l.phase = st.opt_text(3);
  l.step = st.opt_i64(4);
  return l;
}

std::vector<Row> Walker::rows(int64_t kernel_id, contract::Role role) {
  sql::Statement st(db_, std::string(kRowColumns) + "WHERE t.kernel_id = ?1 AND t.role = ?2 ORDER BY t.slot");
  st.bind(1, kernel_id).bind(2, std::string_view(contract::role_name(role)));
  std::vector<Row> out;
  while (st.step()) out.push_back(read_row(st));
  return out;
}

std::optional<Row> Walker::first_row(const char* tail, int64_t p1, int64_t p2) {
  sql::Statement st(db_, std::string(kRowColumns) + tail + " LIMIT 1");
  st.bind(1, p1).bind(2, p2);
  if (!st.step()) return std::nullopt;
  return read_row(st);
}

std::optional<Row> Walker::writer(int64_t uid, int64_t before) {
  return first_row("WHERE t.tensor_uid = ?1 AND t.role = 'out' AND t.kernel_id < ?2 ORDER BY t.kernel_id DESC",
                   uid, before);
}

std::optional<Row> Walker::previous(int64_t uid, int64_t writer) {
  return first_row("WHERE t.tensor_uid = ?1 AND (t.kernel_id < ?2 OR (t.kernel_id = ?2 AND t.role = 'in')) "
                   "ORDER BY t.kernel_id DESC, t.role = 'out' DESC",
                   uid, writer);
}

std::optional<Row> Walker::previous_of_kernel(const Row& written) {
  return first_row("JOIN kernels k ON k.id = t.kernel_id JOIN kernels w ON w.id = ?1 "
                   "WHERE t.role = 'out' AND t.slot = (SELECT slot FROM tensors WHERE id = ?2) "
                   "  AND k.name_id = w.name_id AND k.layer_id IS w.layer_id AND k.phase_id IS w.phase_id "
                   "  AND k.id < ?1 ORDER BY k.id DESC",
                   written.kernel_id, written.id);
}

std::optional<int64_t> Walker::category(int64_t uid) {
  sql::Statement st(db_, "SELECT category FROM memory_events WHERE alloc_id = ?1 AND kind = 'alloc' LIMIT 1");
  st.bind(1, uid);
  if (!st.step()) return std::nullopt;
  return st.i64(0);
}

Walker::Gap Walker::unmeasured_between(int64_t after, int64_t before) {
  sql::Statement st(db_, "SELECT step, count(*) FROM kernels WHERE id > ?1 AND id < ?2 AND sampled = 0 GROUP BY step");
  st.bind(1, after).bind(2, before);
  Gap g;
  while (st.step()) {
    const std::optional<int64_t> step = st.opt_i64(0);
    if (!ops_filtered_ && step && measured_steps_.count(*step)) continue;
    g.launches += st.i64(1);
    if (step) {
      g.first_step = std::min(g.first_step.value_or(*step), *step);
      g.last_step = std::max(g.last_step.value_or(*step), *step);
    }
  }
  return g;
}

void Walker::walk(int64_t kernel_id, int depth, WhyReport& report) {
  if (depth > kMaxDepth) return;
  for (const Row& in : rows(kernel_id, contract::Role::Input)) {
    if (report.chain.size() >= kMaxLinks) return;
    if (!is_float(in.dtype)) continue;
    CauseLink link;
    link.depth = depth;
    link.reader_kernel_id = kernel_id;
    link.tensor = in.name;
    link.tensor_uid = in.uid;
    link.count = in.count;
    if (!in.uid) {
      link.note = "no allocation id: the launch that wrote it cannot be told";
      report.chain.push_back(std::move(link));
      continue;
    }
    if (!visited_.insert(*in.uid).second) continue;  // one link per tensor
    const std::optional<Row> w = writer(*in.uid, kernel_id);
    if (filtered_) {
      const Gap gap = unmeasured_between(w ? w->kernel_id : 0, kernel_id);
      if (gap.launches > 0) {
        link.note = fmt::format(
            "its last writer may be one of {} launches left unmeasured (steps {} to {}: --every, --steps or "
            "--ops left them out), so the walk stops here",
            gap.launches, gap.first_step ? std::to_string(*gap.first_step) : "-",
            gap.last_step ? std::to_string(*gap.last_step) : "-");
        report.chain.push_back(std::move(link));
        continue;
      }
    }
    if (!w) {
      ++report.ordinary_links;  // an initial value or input data: nothing wrote it in the trace
      continue;
    }
    const Launch wl = launch(w->kernel_id);
    std::optional<Row> before = previous(*in.uid, w->kernel_id);
    if (!before) before = previous_of_kernel(*w);
    link.writer_kernel_id = w->kernel_id;
    link.writer_tensor_id = w->id;
    link.writer_kernel = wl.kernel;
    link.writer_layer = wl.layer;
    link.writer_phase = wl.phase;
    link.writer_step = wl.step;
    link.absmax_after = w->absmax;
    link.min_nonzero_after = w->min_nonzero;
    link.zero_after = w->zero;
    if (before) {
      link.absmax_before = before->absmax;
      link.min_nonzero_before = before->min_nonzero;
      link.zero_before = before->zero;
    }
    if (link.absmax_before && link.absmax_after && *link.absmax_before > 0 && *link.absmax_after > 0)
      link.jump_log2 = std::log2(*link.absmax_after / *link.absmax_before);
    const bool jumped = link.jump_log2 && *link.jump_log2 >= kJumpLog2;
    // Zeros come and go (a ReLU's output): they count as flushed only in a 16-bit tensor whose
    // smallest values already sat below the format's smallest normal number.
    const int64_t new_zeros = before ? w->zero - before->zero : 0;
    const auto format = format_of_dtype(w->dtype);
    const bool near_underflow = format && before && before->min_nonzero &&
                                *before->min_nonzero < format_limits(*format).min_normal;
    const bool flushed = near_underflow && new_zeros > 0 && new_zeros * 100 >= std::max<int64_t>(w->count, 1);
    if (!jumped && !flushed && w->nonfinite == 0) {
      ++report.ordinary_links;
      continue;
    }
    if (jumped) {
      link.note = fmt::format("absmax {} -> {} ({} in one write)", human_number(*link.absmax_before),
                              human_number(*link.absmax_after), binades(*link.jump_log2));
    } else if (flushed) {
      link.note = fmt::format("{} values became zero ({} of {} zero after)", new_zeros, w->zero, w->count);
    } else {
      link.note = fmt::format("written holding {} NaN/Inf", w->nonfinite);
    }
    report.chain.push_back(std::move(link));
    walk(w->kernel_id, depth + 1, report);
  }
}

void Walker::read_filters() {
  const MeasuredSelection selection = measured_selection(trace_);
  ops_filtered_ = selection.ops;
  filtered_ = selection.any();
  if (!filtered_) return;
  sql::Statement st(db_, "SELECT DISTINCT step FROM kernels WHERE sampled = 1 AND step IS NOT NULL");
  while (st.step()) measured_steps_.insert(st.i64(0));
}

}  // namespace fpscope::analysis::lineage
