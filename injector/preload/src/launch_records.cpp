// The records a launch writes (launch_path.h): under the session lock, Launch, then per tensor
// TensorStats (+ TensorFormats and TensorHistogram with full statistics, Nonfinite for outputs
// holding NaN/Inf, Dump), then LossScale; and the .npy file of a dumped tensor.
#include <cstdio>
#include <string>

#include "launch_path.h"
#include "npy_writer.h"
#include "tensor_view.h"

namespace fpscope::inject {
namespace {

uint8_t role_slot(wire::Role role, uint8_t slot) { return contract::pack_role_slot(role, slot); }

std::string safe_file_part(const char* text) {
  std::string s = text ? text : "";
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      c = '_';
  return s.empty() ? "unnamed" : s;
}

}  // namespace

void Session::dump_tensor(const LaunchPlan& p, Measurement* m) {
  const mpt_tensor& t = *m->tensor;
  char seq[24];
  std::snprintf(seq, sizeof seq, "%08llu", static_cast<unsigned long long>(p.seq));
  const std::string step = p.step >= 0 ? "step" + std::to_string(p.step) : "nostep";
  const std::string file = dump_prefix_ + step + "-launch" + seq + "-" + safe_file_part(p.kernel) + "-" +
                           (m->role == wire::Role::Input ? "in" : "out") + std::to_string(m->slot) +
                           "-" + safe_file_part(t.name) + ".npy";
  std::string error;
  const size_t bytes = element_count(t) * dtype_bytes(t.dtype);
  if (write_npy(options_.dump_dir + "/" + file, npy_descr(t.dtype), t.shape, t.ndim, t.data, bytes,
                &error)) {
    m->dump_file = file;
  } else {
    std::fprintf(stderr, "fpscope: dump: %s\n", error.c_str());
  }
}

void Session::write_launch_records(const mpt_launch_desc* d, const LaunchPlan& p,
                                   const Attribution& where, const std::vector<Measurement>& measured,
                                   bool finite_in, const LossScaleProbe& probe,
                                   const mpt_launch_report* report) {
  wire::LaunchRecord l{};
  l.seq = p.seq;
  l.start_ns = p.start_ns;
  l.end_ns = p.end_ns;
  l.layer = where.layer_id;
  l.phase = where.phase_id;
  l.status = p.status;
  l.step = where.step;
  l.n_inputs = static_cast<uint8_t>(d->n_inputs > 255 ? 255 : d->n_inputs);
  l.n_outputs = static_cast<uint8_t>(d->n_outputs > 255 ? 255 : d->n_outputs);
  l.device = p.device;
  l.sampled = p.sampled ? 1 : 0;
  const uint32_t thread = this_thread_number();
  std::lock_guard lock(mutex_);
  l.kernel = intern_locked(p.kernel);
  writer_.put(l, thread);
  for (const Measurement& m : measured) write_tensor_records(p.seq, m, finite_in, report);
  if (report != nullptr && (report->filled & MPT_REPORTED_UPDATE) != 0 && d->n_outputs >= 1) {
    const mpt_tensor& param = d->outputs[0];
    const mpt_update_counts& u = report->update;
    wire::ParamUpdateRecord r{};
    r.seq = p.seq;
    r.tensor_id = param.id;
    r.name = intern_locked(param.name ? param.name : "");
    r.dtype = static_cast<uint8_t>(param.dtype);
    r.computed_known = 1;
    r.nonzero_from = wire::NonzeroFrom::Update;
    r.step = where.step;
    r.elements = u.elements;
    r.nonzero = u.nonzero;
    r.changed = u.changed;
    r.lost = u.lost;
    r.computed_abs_sum = u.computed_abs_sum;
    r.computed_sq_sum = u.computed_sq_sum;
    r.applied_abs_sum = u.applied_abs_sum;
    r.applied_sq_sum = u.applied_sq_sum;
    r.weight_sq_sum = u.weight_sq_sum;
    writer_.put(r, thread);
  }
  if (probe.valid) {
    wire::LossScaleRecord r{};
    r.seq = p.seq;
    r.t_ns = p.end_ns;
    r.step = where.step;
    r.scale_before = probe.scale_before;
    r.scale_after = probe.scale_after;
    r.growth_tracker = probe.tracker_after;
    r.found_inf = probe.found_inf ? 1 : 0;
    r.event = probe.scale_after > probe.scale_before   ? wire::ScaleEvent::Growth
              : probe.scale_after < probe.scale_before ? wire::ScaleEvent::Backoff
                                                       : wire::ScaleEvent::Unchanged;
    writer_.put(r, thread);
  }
}

void Session::write_tensor_records(uint64_t seq, const Measurement& m, bool finite_in,
                                   const mpt_launch_report* report) {
  const mpt_tensor& t = *m.tensor;
  const TensorStats& s = m.stats;
  const uint32_t thread = this_thread_number();
  const uint8_t rs = role_slot(m.role, m.slot);
  wire::TensorStatsRecord r{};
  r.seq = seq;
  r.tensor_id = t.id;
  r.name = intern_locked(t.name ? t.name : "");
  r.role = m.role;
  r.slot = m.slot;
  r.dtype = static_cast<uint8_t>(t.dtype);
  r.ndim = static_cast<uint8_t>(t.ndim < 0 ? 0 : t.ndim > MPT_MAX_DIMS ? MPT_MAX_DIMS : t.ndim);
  for (int i = 0; i < r.ndim; ++i) r.shape[i] = t.shape[i];
  r.count = s.count;
  r.nan = s.nan;
  r.pos_inf = s.pos_inf;
  r.neg_inf = s.neg_inf;
  r.zero = s.zero;
  r.subnormal = s.subnormal;
  r.min = s.min;
  r.max = s.max;
  r.absmax = s.absmax;
  r.min_nonzero = s.min_nonzero;
  r.mean = s.mean;
  r.rms = s.rms;
  writer_.put(r, thread);

  if (options_.stats == StatsLevel::Full) {
    wire::TensorFormatsRecord f{};
    f.seq = seq;
    f.role_slot = rs;
    for (int i = 0; i < wire::kFormatCount; ++i)
      f.formats[i] = {s.cast[i].overflow, s.cast[i].underflow, s.cast[i].subnormal, s.cast[i].near_max};
    writer_.put(f, thread);

    // The nonzero bins of the populated span, in order: each bin of the span is written and the
    // next one overwrites it unless it counts, so the loop has no branch to mispredict.
    wire::HistogramBin bins[kHistBins];
    uint32_t n = 0;
    const HistSpan span = populated_bins(s.hist);
    for (int b = span.first; b < span.end; ++b) {
      bins[n] = {b + kHistMinExponent, 0, s.hist[b]};
      n += s.hist[b] != 0 ? 1u : 0u;
    }
    wire::TensorHistogramRecord h{};
    h.seq = seq;
    h.role_slot = rs;
    h.bins = n;
    h.below = s.hist_below;
    h.above = s.hist_above;
    writer_.put_with_tail(h, bins, n * sizeof(wire::HistogramBin), thread);
  }

  if (m.has_recipes) {
    wire::TensorRecipesRecord rr{};
    rr.seq = seq;
    rr.role_slot = rs;
    rr.operand = static_cast<uint8_t>(m.operand);
    rr.amax = m.recipes.amax;
    for (int i = 0; i < contract::kRecipeCount; ++i) {
      const RecipeOutcome& o = m.recipes.outcomes[static_cast<std::size_t>(i)];
      rr.recipes[i] = {o.values, o.underflow, o.subnormal, o.saturated, o.blocks,
                       o.blocks_lost, o.blocks_nonfinite, o.sse, o.signal, o.scale};
    }
    writer_.put(rr, thread);
  }

  if (report != nullptr && m.role == wire::Role::Output && (report->filled & MPT_REPORTED_STORES) != 0 &&
      m.slot < MPT_MAX_REPORTED_OUTPUTS && report->stores[m.slot].narrowed != 0) {
    const mpt_store_counts& c = report->stores[m.slot];
    wire::TensorStoreRecord st{};
    st.seq = seq;
    st.role_slot = rs;
    st.results = c.results;
    st.flushed = c.flushed;
    st.subnormal = c.subnormal;
    st.overflowed = c.overflowed;
    writer_.put(st, thread);
  }

  if (m.role == wire::Role::Output && s.nonfinite() > 0) {
    const ElementType type = *float_type(t.dtype);
    wire::NonfiniteRecord nf{};
    nf.seq = seq;
    nf.first_index = static_cast<uint64_t>(s.first_nonfinite);
    nf.first_bits = static_cast<uint32_t>(s.first_nonfinite_bits);
    nf.first_bits_high = static_cast<uint32_t>(s.first_nonfinite_bits >> 32);
    nf.role_slot = rs;
    nf.kind = nonfinite_kind(type, s.first_nonfinite_bits);
    nf.origin = finite_in ? 1 : 0;
    nf.allowed = m.allowed ? 1 : 0;
    nf.dtype = static_cast<uint8_t>(t.dtype);
    writer_.put(nf, thread);
  }

  if (!m.dump_file.empty()) {
    wire::DumpRecord dr{};
    dr.seq = seq;
    dr.path = intern_locked(m.dump_file);
    dr.role_slot = rs;
    writer_.put(dr, thread);
  }
}

}  // namespace fpscope::inject
