// Kernels and NVTX ranges in a time window (the GUI's timeline, the chrome-trace export), the
// tensors of one launch, and the exponent histogram of one tensor.
#include "report_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace fpscope::analysis {


std::optional<std::pair<int64_t, int64_t>> time_bounds(const Trace& trace) {
  auto& impl = detail::impl(trace);
  auto start = impl.count("start_ns");
  auto end = impl.count("end_ns");
  if (!start || !end) return std::nullopt;
  return std::make_pair(*start, *end);
}

TimelineWindow timeline(const Trace& trace, int64_t t0, int64_t t1, std::size_t max_kernels) {
  TimelineWindow w;
  w.t0 = t0;
  w.t1 = t1;
  const auto& db = detail::db(trace);
  // Kernels are short: one that overlaps the window started at most its duration before t0. The
  // longest launch bounds how far back to look, so the start_ns index does the work.
  const int64_t longest = detail::impl(trace).count("longest_kernel_ns").value_or(0);
  sql::Statement ks(db,
          "SELECT k.id, k.start_ns, k.end_ns, sk.value, sl.value, sp.value, k.step, k.thread, k.device, "
          "  k.status, k.sampled, EXISTS (SELECT 1 FROM nonfinite n WHERE n.kernel_id = k.id AND n.allowed = 0), k.rank "
          "FROM kernels k JOIN strings sk ON sk.id = k.name_id LEFT JOIN strings sl ON sl.id = k.layer_id "
          "LEFT JOIN strings sp ON sp.id = k.phase_id "
          "WHERE k.start_ns >= ?1 AND k.start_ns < ?2 AND k.end_ns >= ?3 ORDER BY k.start_ns, k.id LIMIT ?4");
  ks.bind(1, t0 - longest).bind(2, t1).bind(3, t0).bind(4, static_cast<int64_t>(max_kernels) + 1);
  while (ks.step()) {
    if (w.kernels.size() == max_kernels) {
      w.truncated = true;
      break;
    }
    KernelSpan k;
    k.id = ks.i64(0);
    k.start_ns = ks.i64(1);
    k.end_ns = ks.i64(2);
    k.kernel = ks.text(3);
    k.layer = ks.opt_text(4);
    k.phase = ks.opt_text(5);
    k.step = ks.opt_i64(6);
    k.thread = ks.i64(7);
    k.device = static_cast<int>(ks.i64(8));
    k.status = static_cast<int>(ks.i64(9));
    k.sampled = ks.i64(10) != 0;
    k.nonfinite = ks.i64(11) != 0;
    k.rank = static_cast<int32_t>(ks.i64(12));
    w.kernels.push_back(std::move(k));
  }
  sql::Statement rs(db,
          "SELECT r.id, r.start_ns, r.end_ns, r.thread, r.depth, r.kind, sn.value, sd.value, r.step, r.rank "
          "FROM nvtx_ranges r JOIN strings sn ON sn.id = r.name_id LEFT JOIN strings sd ON sd.id = r.domain_id "
          "WHERE r.start_ns < ?1 AND (r.end_ns IS NULL OR r.end_ns >= ?2) ORDER BY r.start_ns, r.id");
  rs.bind(1, t1).bind(2, t0);
  while (rs.step()) {
    RangeSpan r;
    r.id = rs.i64(0);
    r.start_ns = rs.i64(1);
    r.end_ns = rs.opt_i64(2);
    r.thread = rs.i64(3);
    r.depth = static_cast<int>(rs.i64(4));
    r.kind = rs.text(5);
    r.name = rs.text(6);
    r.domain = rs.opt_text(7);
    r.step = rs.opt_i64(8);
    r.rank = static_cast<int32_t>(rs.i64(9));
    w.ranges.push_back(std::move(r));
  }
  return w;
}

std::vector<TensorRecord> tensors_of_kernel(const Trace& trace, int64_t kernel_id) {
  sql::Statement st(detail::db(trace),
          "SELECT t.id, t.kernel_id, t.role, t.slot, t.tensor_uid, s.value, d.name, t.shape, t.count, t.nan, "
          "  t.pos_inf, t.neg_inf, t.zero, t.subnormal, t.min, t.max, t.absmax, t.min_nonzero, t.mean, t.rms, "
          "  t.f16_overflow, t.f16_underflow, t.f16_subnormal, t.f16_near_max, "
          "  t.bf16_overflow, t.bf16_underflow, t.bf16_subnormal, t.bf16_near_max, "
          "  t.e4m3_overflow, t.e4m3_underflow, t.e4m3_subnormal, t.e4m3_near_max, "
          "  t.e5m2_overflow, t.e5m2_underflow, t.e5m2_subnormal, t.e5m2_near_max "
          "FROM tensors t JOIN strings s ON s.id = t.name_id LEFT JOIN dtypes d ON d.id = t.dtype "
          "WHERE t.kernel_id = ?1 ORDER BY t.role DESC, t.slot");
  st.bind(1, kernel_id);
  std::vector<TensorRecord> out;
  while (st.step()) {
    TensorRecord t;
    t.id = st.i64(0);
    t.kernel_id = st.i64(1);
    t.role = st.text(2);
    t.slot = static_cast<int>(st.i64(3));
    t.tensor_uid = st.opt_i64(4);
    t.name = st.text(5);
    t.dtype = st.text(6);
    t.shape = st.text(7);
    t.count = st.i64(8);
    t.nan = st.i64(9);
    t.pos_inf = st.i64(10);
    t.neg_inf = st.i64(11);
    t.zero = st.i64(12);
    t.subnormal = st.i64(13);
    t.min = st.opt_f64(14);
    t.max = st.opt_f64(15);
    t.absmax = st.opt_f64(16);
    t.min_nonzero = st.opt_f64(17);
    t.mean = st.opt_f64(18);
    t.rms = st.opt_f64(19);
    for (int f = 0; f < kFormatCount; ++f) t.formats[f] = make_outcome(st, 20 + 4 * f, t.count);
    out.push_back(std::move(t));
  }
  return out;
}

ExponentHistogram exponent_histogram(const Trace& trace, int64_t tensor_id) {
  sql::Statement st(detail::db(trace),
          "SELECT s.value, sk.value, d.name, t.exp_hist, t.zero, t.nan, t.pos_inf + t.neg_inf "
          "FROM tensors t JOIN strings s ON s.id = t.name_id JOIN kernels k ON k.id = t.kernel_id "
          "JOIN strings sk ON sk.id = k.name_id LEFT JOIN dtypes d ON d.id = t.dtype WHERE t.id = ?1");
  st.bind(1, tensor_id);
  if (!st.step()) {
    throw TraceError(TraceErrorKind::Query, "no tensor with id " + std::to_string(tensor_id) + " in this trace");
  }
  ExponentHistogram h;
  h.tensor_id = tensor_id;
  h.tensor = st.text(0);
  h.kernel = st.text(1);
  h.dtype = st.text(2);
  h.zero = st.i64(4);
  h.nan = st.i64(5);
  h.inf = st.i64(6);
  if (auto text = st.opt_text(3)) {
    auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
      throw TraceError(TraceErrorKind::Corrupt, "tensor " + std::to_string(tensor_id) + ": its exponent histogram is not valid JSON");
    }
    h.measured = true;
    for (const auto& [key, count] : json.items()) {
      try {
        h.bins.emplace_back(std::stoi(key), count.get<int64_t>());
      } catch (const std::exception&) {
        throw TraceError(TraceErrorKind::Corrupt, "tensor " + std::to_string(tensor_id) + ": bad exponent histogram entry '" + key + "'");
      }
    }
    std::sort(h.bins.begin(), h.bins.end());
  }
  return h;
}

}  // namespace fpscope::analysis
