// The launch path: what the injector does around one mpt_launch().
//
//   1. plan: is the launch selected (options), on which device, is it the loss scaler's update?
//   2. before the real kernel: measure the inputs (in-place kernels overwrite them), read the loss
//      scale, and when only outputs are measured, check the in-place inputs for finiteness;
//   3. call the real kernel; after it, measure the outputs and read the loss scale again;
//   4. under the session lock, write Launch, then per tensor TensorStats (+ TensorFormats and
//      TensorHistogram with full statistics, Nonfinite for outputs holding NaN/Inf, Dump), then
//      LossScale;
//   5. --trap: stop at the first output whose non-finite values this launch made.
// Launches with device tensors take launch_on_device() instead (end of this file).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "fpscope/common/allow_rules.h"
#include "fpscope/contract/loss_scaler.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/inject_api.h"
#include "npy_writer.h"

#include "session.h"
#include "tensor_view.h"

namespace fpscope::inject {

struct Session::LaunchPlan {
  uint64_t seq = 0;
  const char* kernel = "";
  int64_t step = -1;
  int64_t start_ns = 0, end_ns = 0;
  int32_t status = 0;
  uint8_t device = MPT_DEVICE_CPU;
  bool sampled = false;      // its tensors are measured
  bool dump = false;         // FPSCOPE_DUMP's launch keys match
  bool inputs = false, outputs = false;
  bool loss_scale = false;   // the loss scaler's update, its scalars readable
  bool memo = false;         // inputs may take remembered statistics (mpt_launch only)
};

// What a launch carries from before its kernel to after it.
struct Session::LaunchState {
  LaunchPlan p;
  Attribution where;
  std::vector<Measurement> measured;
  bool in_place_finite = true;
  LossScaleProbe probe;
  bool front_end = false;          // a front end's op: a trap goes back through end_op
  std::string trap_message;        // ... held for it: a device result that trapped meanwhile
  uint64_t trap_seq = 0;
};

namespace {

constexpr int kMaxSlots = static_cast<int>(contract::kMaxSlots);  // role_slot keeps the slot in 7 bits

uint8_t launch_device(const mpt_launch_desc* d) {
  for (int i = 0; i < d->n_inputs; ++i)
    if (d->inputs[i].device == MPT_DEVICE_CUDA) return MPT_DEVICE_CUDA;
  for (int i = 0; i < d->n_outputs; ++i)
    if (d->outputs[i].device == MPT_DEVICE_CUDA) return MPT_DEVICE_CUDA;
  return MPT_DEVICE_CPU;
}

// A scalar the injector can read: on the host, or on the device when `device` is allowed (through
// the GPU library).
bool scalar_readable(const mpt_tensor& t, int32_t dtype, bool device) {
  return (t.device == MPT_DEVICE_CPU || (device && t.device == MPT_DEVICE_CUDA)) && t.data != nullptr &&
         t.dtype == dtype && element_count(t) >= 1;
}

// The loss scaler's update (contract/loss_scaler.h): inputs scale (f32), growth_tracker (i32),
// found_inf (f32); outputs scale and growth_tracker, in place. `device`: device tensors can be read.
bool loss_scale_inputs_readable(const mpt_launch_desc* d, bool device) {
  return contract::is_scale_update_kernel(d->kernel) && d->n_inputs >= 3 &&
         scalar_readable(d->inputs[0], MPT_DTYPE_F32, device) && scalar_readable(d->inputs[1], MPT_DTYPE_I32, device) &&
         scalar_readable(d->inputs[2], MPT_DTYPE_F32, device);
}

bool loss_scale_outputs_readable(const mpt_launch_desc* d, bool device) {
  return d->n_outputs >= 2 && scalar_readable(d->outputs[0], MPT_DTYPE_F32, device) &&
         scalar_readable(d->outputs[1], MPT_DTYPE_I32, device);
}

uint8_t role_slot(wire::Role role, uint8_t slot) { return contract::pack_role_slot(role, slot); }

uint8_t kinds_of(const TensorStats& s) { return contract::nonfinite_kinds(s.nan, s.pos_inf, s.neg_inf); }

// Inputs that the kernel overwrites (those sharing memory with an output or, where the caller
// knows it before the outputs exist, those it marks `written`): true if all are finite.
bool in_place_inputs_finite(const mpt_launch_desc* d, const uint8_t* written) {
  for (int i = 0; i < d->n_inputs; ++i) {
    const mpt_tensor& in = d->inputs[i];
    if (!measurable_on_host(in)) continue;
    bool overwritten = written != nullptr && written[i] != 0;
    for (int o = 0; o < d->n_outputs && !overwritten; ++o) overwritten = overlaps(in, d->outputs[o]);
    if (overwritten && !all_finite(in.data, *float_type(in.dtype), element_count(in))) return false;
  }
  return true;
}

bool aliases_an_output(const mpt_launch_desc* d, const mpt_tensor& in) {
  for (int o = 0; o < d->n_outputs; ++o)
    if (overlaps(in, d->outputs[o])) return true;
  return false;
}

std::string safe_file_part(const char* text) {
  std::string s = text ? text : "";
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      c = '_';
  return s.empty() ? "unnamed" : s;
}

bool trap_wants(TrapKind trap, const TensorStats& s) {
  switch (trap) {
    case TrapKind::NaN: return s.nan > 0;
    case TrapKind::Inf: return s.pos_inf + s.neg_inf > 0;
    case TrapKind::Nonfinite: return s.nonfinite() > 0;
    default: return false;
  }
}

std::string place_of(const Attribution& where) {
  std::string place;
  auto add = [&](const std::string& part) { place += (place.empty() ? "" : ", ") + part; };
  if (where.layer) add(std::string("layer ") + where.layer);
  if (where.step >= 0) add("step " + std::to_string(where.step));
  if (where.phase) add(std::string("phase ") + where.phase);
  return place.empty() ? "" : " (" + place + ")";
}

}  // namespace

Session::LaunchPlan Session::plan(const mpt_launch_desc* d, const Attribution& where) {
  LaunchPlan p;
  p.kernel = d->kernel ? d->kernel : "";
  p.step = where.step;
  p.device = launch_device(d);
  const bool selected = options_.selects(p.kernel, where.layer, where.step);
  p.dump = options_.dump.matches_launch(p.kernel, where.layer, where.step);
  // Device tensors are measured by libfpscope_gpu.so; without it their launches stay unmeasured.
  p.sampled = (selected || p.dump) && (p.device == MPT_DEVICE_CPU || gpu() != nullptr);
  p.inputs = p.sampled && options_.measures_inputs();
  p.outputs = p.sampled && options_.measures_outputs();
  // The loss scaler's scalars: read on the host, or through the GPU library for device tensors.
  p.loss_scale = d->kernel != nullptr && loss_scale_inputs_readable(d, true) &&
                 (loss_scale_inputs_readable(d, false) || gpu() != nullptr);
  return p;
}

template <typename T>
bool Session::read_scalar(const mpt_tensor& t, void* stream, T* out) {
  static_assert(sizeof(T) == 4, "the loss scaler's scalars are f32 and i32");
  if (t.device == MPT_DEVICE_CPU) {
    std::memcpy(out, t.data, sizeof *out);
    return true;
  }
  const fpscope_gpu_api* api = gpu();
  if (api == nullptr || api->read == nullptr) return false;
  if (api->read(out, t.data, sizeof *out, stream) == 0) return true;
  if (!scalar_read_failed_.exchange(true))  // said once: after a CUDA error every step would fail
    std::fprintf(stderr, "fpscope: cannot read %s from the device (%s); loss-scale events are not recorded\n",
                 t.name ? t.name : "a loss-scaler scalar", api->last_error ? api->last_error() : "unknown error");
  return false;
}

void Session::probe_loss_scale_before(const mpt_launch_desc* d, LaunchPlan& p, LossScaleProbe* probe) {
  *probe = LossScaleProbe{};
  float scale = 0.0f, found = 0.0f;
  if (p.loss_scale && read_scalar(d->inputs[0], d->stream, &scale) && read_scalar(d->inputs[2], d->stream, &found)) {
    probe->scale_before = scale;
    probe->found_inf = found != 0.0f;
  } else {
    p.loss_scale = false;
  }
}

void Session::probe_loss_scale_after(const mpt_launch_desc* d, const LaunchPlan& p, LossScaleProbe* probe) {
  float scale = 0.0f;
  probe->valid = p.loss_scale && loss_scale_outputs_readable(d, true) && read_scalar(d->outputs[0], d->stream, &scale) &&
                 read_scalar(d->outputs[1], d->stream, &probe->tracker_after);
  probe->scale_after = scale;
}

int Session::launch(const mpt_launch_desc* d, LaunchFn real) {
  if (d == nullptr || d->kernel == nullptr || d->n_inputs < 0 || d->n_outputs < 0) return real(d);
  const int64_t entered = monotonic_ns();
  thread_local LaunchState state;
  state.where = this_thread_ranges().attribution();
  LaunchPlan& p = state.p;
  p = plan(d, state.where);
  p.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  p.memo = memo_on_.load(std::memory_order_relaxed);
  if (p.device == MPT_DEVICE_CUDA && p.sampled) {
    outputs_written(d);
    return launch_on_device(d, &state, entered, real);
  }

  before_kernel(d, nullptr, &state);
  outputs_written(d);  // after the inputs were measured: an in-place input is still unchanged then
  p.start_ns = monotonic_ns();
  p.status = real(d);
  p.end_ns = monotonic_ns();
  const std::string trapped = after_kernel(d, &state);
  add_own_time((p.start_ns - entered) + (monotonic_ns() - p.end_ns));
  if (!trapped.empty()) raise_trap(trapped);
  return p.status;
}

void Session::before_kernel(const mpt_launch_desc* d, const uint8_t* written, LaunchState* s) {
  LaunchPlan& p = s->p;
  s->measured.clear();
  if (p.inputs) measure(d, p, wire::Role::Input, &s->measured);
  s->in_place_finite = p.outputs && !p.inputs ? in_place_inputs_finite(d, written) : true;
  probe_loss_scale_before(d, p, &s->probe);
}

namespace {

// What the memo knows a measured tensor by: its bytes, read as its element type.
OutputMemo::Key memo_key(const mpt_tensor& t) { return {t.data, *float_type(t.dtype), element_count(t)}; }

}  // namespace

std::string Session::after_kernel(const mpt_launch_desc* d, LaunchState* s) {
  LaunchPlan& p = s->p;
  bool outputs_nonfinite = false;  // an output holds NaN/Inf
  bool outputs_unintended = false; // ... that no allow rule covers
  if (p.outputs) {
    const size_t first_output = s->measured.size();
    // The intended values the measured inputs bring in: kinds that the launch which last wrote an
    // input made as intended values (known for inputs that reuse its statistics). An output
    // holding only those kinds passes them on (triu of a -inf mask, the matmul that adds it to
    // attention scores), intended as they were.
    uint8_t carried = 0;
    for (size_t i = 0; i < first_output; ++i)
      if (s->measured[i].role == wire::Role::Input) carried |= kinds_of(s->measured[i].stats) & s->measured[i].intended_in;
    measure(d, p, wire::Role::Output, &s->measured);
    for (size_t i = first_output; i < s->measured.size(); ++i) {
      Measurement& m = s->measured[i];
      if (m.stats.nonfinite() == 0) continue;
      const uint8_t kinds = kinds_of(m.stats);
      m.allowed = (carried != 0 && (kinds & ~carried) == 0) ||
                  common::allowed_by(options_.allow, p.kernel, s->where.layer, kinds);
      if (m.allowed && p.memo)
        memo_.intended(memo_key(*m.tensor), options_.stats, kinds);
      outputs_nonfinite = true;
      outputs_unintended |= !m.allowed;
    }
  }
  probe_loss_scale_after(d, p, &s->probe);
  // Origin is only needed for outputs that hold NaN/Inf, so inputs are looked at only then (a
  // device launch's host outputs: its device inputs' results too, which this waits for).
  const bool finite_in = outputs_nonfinite && s->in_place_finite && inputs_finite(d, p, s->measured) &&
                         (p.device != MPT_DEVICE_CUDA || device_inputs_finite(s));
  write_launch_records(d, p, s->where, s->measured, finite_in, s->probe);
  if (!(outputs_unintended && finite_in && options_.trap != TrapKind::None)) return {};
  std::string message = trap_message(p, s->where, s->measured);
  if (message.empty() || !record_trap(p.seq, message)) return {};
  return message;
}

void Session::measure(const mpt_launch_desc* d, const LaunchPlan& p, wire::Role role,
                      std::vector<Measurement>* out) {
  const bool inputs = role == wire::Role::Input;
  const mpt_tensor* tensors = inputs ? d->inputs : d->outputs;
  const int n = inputs ? d->n_inputs : d->n_outputs;
  for (int i = 0; i < n && i < kMaxSlots; ++i) {
    const mpt_tensor& t = tensors[i];
    if (!measurable_on_host(t)) continue;
    Measurement& m = out->emplace_back();
    m.tensor = &t;
    m.role = role;
    m.slot = static_cast<uint8_t>(i);
    m.dump_file.clear();
    m.intended_in = 0;
    measure_tensor(p, role, t, &m.stats, &m.intended_in);
    if (p.dump && options_.dump.matches_tensor(t.name ? t.name : "")) dump_tensor(p, &m);
  }
}

void Session::measure_tensor(const LaunchPlan& p, wire::Role role, const mpt_tensor& t, TensorStats* out,
                             uint8_t* intended_in) {
  const OutputMemo::Key key = memo_key(t);
  if (!p.memo) {
    compute_stats(t.data, key.type, key.count, options_.stats, out, stats_workers_);
  } else if (role == wire::Role::Input) {
    if (!memo_.recall(key, options_.stats, out, intended_in))
      compute_stats(t.data, key.type, key.count, options_.stats, out, stats_workers_);
  } else {
    const uint64_t generation = memo_.generation(key);
    compute_stats(t.data, key.type, key.count, options_.stats, out, stats_workers_);
    memo_.remember(key, options_.stats, generation, *out);
  }
}

void Session::outputs_written(const mpt_launch_desc* d) {
  if (!memo_on_.load(std::memory_order_relaxed)) return;  // nothing will be recalled
  for (int o = 0; o < d->n_outputs; ++o) tensor_written(d->outputs[o]);
}

void Session::tensor_written(const mpt_tensor& t) {
  if (t.device == MPT_DEVICE_CPU && t.data != nullptr) memo_.written(t.data, element_count(t) * dtype_bytes(t.dtype));
}

// With inputs measured, their statistics answer; otherwise the inputs the kernel did not
// overwrite are scanned now (in-place ones were checked before the call).
bool Session::inputs_finite(const mpt_launch_desc* d, const LaunchPlan& p,
                            const std::vector<Measurement>& measured) const {
  if (p.inputs) {
    // Values of a kind some allow rule permits pass through as intended values, not as damage.
    for (const Measurement& m : measured)
      if (m.role == wire::Role::Input && (kinds_of(m.stats) & ~intended_kinds_) != 0) return false;
    return true;
  }
  for (int i = 0; i < d->n_inputs; ++i) {
    const mpt_tensor& in = d->inputs[i];
    if (!measurable_on_host(in) || aliases_an_output(d, in)) continue;
    if (!all_finite(in.data, *float_type(in.dtype), element_count(in))) return false;
  }
  return true;
}

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
                                   bool finite_in, const LossScaleProbe& probe) {
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
  for (const Measurement& m : measured) write_tensor_records(p.seq, m, finite_in);
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

void Session::write_tensor_records(uint64_t seq, const Measurement& m, bool finite_in) {
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

// The first output (in slot order) holding values of the trapped kind names the place; the index
// is that of the first such value, which may lie after a non-finite value of another kind.
std::string Session::trap_message(const LaunchPlan& p, const Attribution& where,
                                  const std::vector<Measurement>& measured) const {
  for (const Measurement& m : measured) {
    if (m.role != wire::Role::Output || m.allowed || !trap_wants(options_.trap, m.stats)) continue;
    const mpt_tensor& t = *m.tensor;
    const ElementType type = *float_type(t.dtype);
    wire::NonfiniteKind kind = nonfinite_kind(type, m.stats.first_nonfinite_bits);
    int64_t index = m.stats.first_nonfinite;
    const bool kind_matches = options_.trap == TrapKind::Nonfinite ||
                              (options_.trap == TrapKind::NaN) == (kind == wire::NonfiniteKind::NaN);
    if (!kind_matches) {
      index = first_of_kind(t.data, type, element_count(t), options_.trap == TrapKind::NaN);
      kind = nonfinite_kind(type, element_bits(t.data, type, static_cast<size_t>(index)));
    }
    return std::string(contract::kTrapMessagePrefix) + "first " + nonfinite_word(kind) + " made by " + p.kernel +
           place_of(where) + " in " + (t.name && *t.name ? t.name : "output " + std::to_string(m.slot)) +
           " at index " + std::to_string(index);
  }
  return {};
}

void Session::trap(uint64_t seq, const std::string& message) {
  if (record_trap(seq, message)) raise_trap(message);
}

// The first trap of the process only: writes its record and lets the collector read everything.
bool Session::record_trap(uint64_t seq, const std::string& message) {
  if (trapped_.exchange(true)) return false;
  {
    std::lock_guard lock(mutex_);
    wire::TrapRecord r{};
    r.seq = seq;
    r.t_ns = monotonic_ns();
    r.reason = intern_locked(message);
    writer_.put(r, this_thread_number());
  }
  sink_->wait_drained(std::chrono::seconds(10));
  return true;
}

// Stops the program with SIGTRAP's default action (a handler the program installed is bypassed on
// purpose).
void Session::raise_trap(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  signal(SIGTRAP, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTRAP);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(SIGTRAP);
  std::_Exit(128 + SIGTRAP);  // not reached: SIGTRAP's default action ends the process
}

// [SECTION] Operations a front end runs itself (fpscope/inject_api.h) ---------------------------
//
// The same path as a launch, split at the kernel: begin_op() plans and measures the inputs,
// end_op() the outputs and writes the records. The op owns copies of everything the records need
// later (names, tensor descriptions, the attribution's names), since the caller's memory and the
// range stack may change in between.

namespace {

// Host float inputs of a device launch (copies from the host): all finite?
bool host_inputs_finite(const mpt_launch_desc* d) {
  for (int i = 0; i < d->n_inputs; ++i) {
    const mpt_tensor& in = d->inputs[i];
    if (measurable_on_host(in) && !all_finite(in.data, *float_type(in.dtype), element_count(in))) return false;
  }
  return true;
}

// The device scan reads fp32, fp16 and bf16; an fp64 device tensor goes unmeasured.
bool on_device(const mpt_tensor& t) {
  const auto type = float_type(t.dtype);
  return t.device == MPT_DEVICE_CUDA && t.data != nullptr && type.has_value() && *type != ElementType::F64;
}

}  // namespace

struct Session::ForeignOp {
  LaunchState state;
  std::string kernel, layer, phase;
  std::vector<mpt_tensor> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  int32_t n_inputs = 0;
};

namespace {

void copy_tensors(const mpt_tensor* from, int32_t n, std::vector<mpt_tensor>* to,
                  std::vector<std::string>* names) {
  to->assign(from, from + n);
  names->resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    (*names)[i] = from[i].name ? from[i].name : "";
    (*to)[i].name = (*names)[i].c_str();
  }
}

}  // namespace

int Session::plan_op(const char* kernel) {
  mpt_launch_desc d{};
  d.kernel = kernel;
  thread_local std::string phase, layer;  // reused: no allocation per op
  const LaunchPlan p = plan(&d, front_end_attribution(&phase, &layer));
  return (p.inputs ? FPSCOPE_MEASURE_INPUTS : 0) | (p.outputs ? FPSCOPE_MEASURE_OUTPUTS : 0);
}

Session::ForeignOp* Session::begin_op(const char* kernel, const mpt_tensor* inputs, int32_t n_inputs,
                                      const uint8_t* written, bool measure) {
  const int64_t entered = monotonic_ns();
  // A front end that does not report the writes its ops' tensors do not show gets no reuse.
  if (!front_end_reports_writes_.load(std::memory_order_relaxed)) memo_on_.store(false, std::memory_order_relaxed);
  auto owned = std::make_unique<ForeignOp>();  // the caller's once this returns
  ForeignOp* op = owned.get();
  op->kernel = kernel ? kernel : "";
  op->n_inputs = n_inputs < 0 ? 0 : n_inputs;
  if (inputs != nullptr) copy_tensors(inputs, op->n_inputs, &op->inputs, &op->input_names);
  Attribution& where = op->state.where;
  where = front_end_attribution(&op->phase, &op->layer);

  mpt_launch_desc d{};
  d.kernel = op->kernel.c_str();
  d.inputs = op->inputs.data();
  d.n_inputs = static_cast<int32_t>(op->inputs.size());
  LaunchPlan& p = op->state.p;
  p = plan(&d, where);
  p.kernel = op->kernel.c_str();
  if (!measure || inputs == nullptr) p.sampled = p.inputs = p.outputs = p.dump = p.loss_scale = false;
  p.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  p.memo = memo_on_.load(std::memory_order_relaxed);
  op->state.front_end = true;
  // An op on device tensors: measured on its (the default) stream by the GPU library, as a launch.
  if (p.device == MPT_DEVICE_CUDA && p.sampled) before_device_kernel(&d, &op->state);
  else before_kernel(&d, written, &op->state);
  // After the inputs were measured: an input the op overwrites is still unchanged then.
  if (p.memo && written != nullptr) {
    for (int32_t i = 0; i < d.n_inputs; ++i)
      if (written[i]) tensor_written(op->inputs[i]);
  }
  p.start_ns = monotonic_ns();  // the op runs once this returns
  add_own_time(p.start_ns - entered);
  return owned.release();
}

void Session::discard_op(ForeignOp* op) { delete op; }

int Session::end_op(ForeignOp* op, const mpt_tensor* outputs, int32_t n_outputs, int32_t status,
                    std::string* trapped) {
  std::unique_ptr<ForeignOp> owned(op);
  LaunchPlan& p = op->state.p;
  p.end_ns = monotonic_ns();
  struct OwnTime {
    Session* session;
    int64_t since;
    ~OwnTime() { session->add_own_time(monotonic_ns() - since); }
  } own_time{this, p.end_ns};
  p.status = status;
  if (n_outputs < 0) n_outputs = 0;
  if (outputs != nullptr) copy_tensors(outputs, n_outputs, &op->outputs, &op->output_names);
  else p.outputs = false;
  mpt_launch_desc d{};
  d.kernel = op->kernel.c_str();
  d.inputs = op->inputs.data();
  d.n_inputs = op->n_inputs;
  d.outputs = op->outputs.data();
  d.n_outputs = n_outputs;
  // An op counted without its tensors still says how many it had.
  std::vector<mpt_tensor> none;
  if (op->inputs.empty() && op->n_inputs > 0) {
    none.assign(static_cast<size_t>(op->n_inputs), mpt_tensor{});
    d.inputs = none.data();
  }
  std::vector<mpt_tensor> no_outputs;
  if (outputs == nullptr && n_outputs > 0) {
    no_outputs.assign(static_cast<size_t>(n_outputs), mpt_tensor{});
    d.outputs = no_outputs.data();
  }
  // The outputs hold new values: forget what was remembered of their memory before measuring them
  // (a fresh output may sit where a freed tensor the front end never saw go was remembered).
  if (p.memo)
    for (const mpt_tensor& t : op->outputs) tensor_written(t);
  std::string message;
  bool device_results = p.device == MPT_DEVICE_CUDA && p.sampled;
  if (device_results) {
    message = after_device_kernel(&d, &op->state);
  } else {
    // Host inputs, device outputs (a factory op on the device, a copy to it): a device launch,
    // its outputs measured by the GPU library, the rest as on the host.
    p.device = launch_device(&d);
    device_results = p.device == MPT_DEVICE_CUDA && p.sampled && p.outputs && gpu() != nullptr;
    if (device_results) {
      device_launch_begins(p.seq, p.kernel, op->state.where);
      submit_device(&d, p, wire::Role::Output, true);
    }
    message = after_kernel(&d, &op->state);
    if (device_results)
      device_launch_written(p.seq, op->state.in_place_finite && inputs_finite(&d, p, op->state.measured));
  }
  if (!message.empty()) {
    if (trapped) *trapped = std::move(message);
    return FPSCOPE_TRAPPED;
  }
  // With --trap, an op with device results waits for them, so that the front end raises at the op
  // that made a NaN/Inf rather than at a later one.
  return device_results ? front_end_device_trap(&op->state, trapped) : 0;
}

// [SECTION] Device tensors ---------------------------------------------------------------------

const fpscope_gpu_api* Session::gpu() {
  std::call_once(gpu_once_, [this] {
    std::string why;
    gpu_ = gpu_loader_ ? gpu_loader_(&why) : nullptr;
    if (gpu_ == nullptr)
      std::fprintf(stderr, "fpscope: device tensors are not measured (%s); their launches are recorded\n",
                   why.c_str());
  });
  return gpu_;
}

// Device tensors are queued on the GPU: inputs before the kernel, outputs after it, all on the
// launch's stream. Host tensors of a mixed launch (a copy from or to the host) are measured on the
// host. Dumps of device tensors are not written.
int Session::launch_on_device(const mpt_launch_desc* d, LaunchState* s, int64_t entered, LaunchFn real) {
  LaunchPlan& p = s->p;
  before_device_kernel(d, s);
  p.start_ns = monotonic_ns();
  try {
    p.status = real(d);
  } catch (...) {  // the kernel's own exception, on its way to the program: the launch is given up
    std::lock_guard lock(mutex_);
    pending_launches_.erase(p.seq);  // its queued results are dropped as they arrive
    throw;
  }
  p.end_ns = monotonic_ns();
  const std::string trapped = after_device_kernel(d, s);
  add_own_time((p.start_ns - entered) + (monotonic_ns() - p.end_ns));
  if (!trapped.empty()) raise_trap(trapped);
  return p.status;
}

void Session::before_device_kernel(const mpt_launch_desc* d, LaunchState* s) {
  LaunchPlan& p = s->p;
  poll_device(false, s);
  device_launch_begins(p.seq, p.kernel, s->where);
  s->measured.clear();
  if (p.inputs) measure(d, p, wire::Role::Input, &s->measured);  // host inputs: a copy from the host
  // The host inputs' part of the origin (the device inputs' part arrives with their results).
  s->in_place_finite = !p.outputs || (p.inputs ? inputs_finite(d, p, s->measured) : host_inputs_finite(d));
  // Inputs are needed for the outputs' origin even when only outputs are recorded.
  if (p.inputs || p.outputs) submit_device(d, p, wire::Role::Input, p.inputs);
  probe_loss_scale_before(d, p, &s->probe);
}

std::string Session::after_device_kernel(const mpt_launch_desc* d, LaunchState* s) {
  LaunchPlan& p = s->p;
  if (p.outputs) {
    submit_device(d, p, wire::Role::Output, true);
    // A copy to the host may still be on its way (into pinned memory): wait for the stream
    // before its host outputs are read (not measured if the wait fails).
    const bool host_outputs = std::any_of(d->outputs, d->outputs + d->n_outputs, measurable_on_host);
    if (host_outputs && gpu_->read(nullptr, nullptr, 0, d->stream) != 0) p.outputs = false;
  }
  // Host tensors, their origin, the allow rules, the trap and the records: as for a host launch.
  std::string message = after_kernel(d, s);
  device_launch_written(p.seq, s->in_place_finite);
  return message;
}

void Session::device_launch_begins(uint64_t seq, const char* kernel, const Attribution& where) {
  std::lock_guard lock(mutex_);
  PendingLaunch& pending = pending_launches_[seq];
  pending.kernel = kernel;
  pending.where = place_of(where);
  if (where.layer) pending.layer = where.layer;
}

void Session::device_launch_written(uint64_t seq, bool host_inputs_finite) {
  std::lock_guard lock(mutex_);
  PendingLaunch& pending = pending_launches_[seq];
  pending.launch_written = true;
  pending.inputs_finite = pending.inputs_finite && host_inputs_finite;
  auto early = std::move(pending.early);
  for (auto& [tensor, stats] : early) device_result_locked(std::move(tensor), stats);
  auto it = pending_launches_.find(seq);
  if (it != pending_launches_.end() && it->second.outstanding == 0) pending_launches_.erase(it);
}

bool Session::device_inputs_finite(LaunchState* s) {
  poll_device(true, s);
  for (int round = 0;; ++round) {
    {
      std::lock_guard lock(mutex_);
      auto it = pending_launches_.find(s->p.seq);
      if (it == pending_launches_.end()) return true;
      for (const auto& [tensor, stats] : it->second.early)
        if (tensor.role == wire::Role::Input && (kinds_of(stats) & ~intended_kinds_) != 0) return false;
      // Results another thread has taken from the library but not handed over yet.
      bool in_flight = false;
      for (const auto& [token, tensor] : pending_tensors_)
        in_flight |= tensor.seq == s->p.seq && tensor.role == wire::Role::Input;
      if (!in_flight || round == 1000) return true;
    }
    std::this_thread::yield();
  }
}

void Session::submit_device(const mpt_launch_desc* d, const LaunchPlan& p, wire::Role role, bool recorded) {
  const bool inputs = role == wire::Role::Input;
  const mpt_tensor* tensors = inputs ? d->inputs : d->outputs;
  const int n = inputs ? d->n_inputs : d->n_outputs;
  for (int i = 0; i < n && i < kMaxSlots; ++i) {
    const mpt_tensor& t = tensors[i];
    if (!on_device(t)) continue;
    uint64_t token;
    {
      std::lock_guard lock(mutex_);
      token = next_token_++;
      PendingTensor& pt = pending_tensors_[token];
      pt.seq = p.seq;
      pt.role = role;
      pt.slot = static_cast<uint8_t>(i);
      pt.recorded = recorded;
      pt.meta = t;
      pt.meta.data = nullptr;  // the device memory may be gone when the result arrives
      pt.name = t.name ? t.name : "";
      ++pending_launches_[p.seq].outstanding;
    }
    const int rc = gpu_->submit(t.data, static_cast<int>(*float_type(t.dtype)), element_count(t),
                                static_cast<int>(options_.stats), d->stream, token);
    if (rc != 0) {
      std::fprintf(stderr, "fpscope: device statistics of %s failed: %s\n", (t.name ? t.name : "a tensor"),
                   gpu_->last_error ? gpu_->last_error() : "unknown error");
      std::lock_guard lock(mutex_);
      pending_tensors_.erase(token);
      --pending_launches_[p.seq].outstanding;
    }
  }
}

void Session::poll_device(bool wait) { poll_device(wait, nullptr); }

void Session::poll_device(bool wait, LaunchState* s) {
  uint64_t seq = 0;
  std::string message = collect_device(wait, &seq);
  if (message.empty()) return;
  if (s != nullptr && s->front_end) {  // the front end raises it when its op ends
    if (s->trap_message.empty()) s->trap_message = std::move(message), s->trap_seq = seq;
    return;
  }
  trap(seq, message);
}

std::string Session::collect_device(bool wait, uint64_t* seq) {
  if (gpu_ == nullptr) return {};
  gpu_->poll(wait ? 1 : 0, &Session::on_device_result, this);
  std::string message;
  std::lock_guard lock(mutex_);
  message.swap(trap_message_);
  *seq = trap_seq_;
  return message;
}

int Session::front_end_device_trap(LaunchState* s, std::string* trapped) {
  std::string message = std::move(s->trap_message);
  uint64_t seq = s->trap_seq;
  if (message.empty() && options_.trap != TrapKind::None) message = collect_device(true, &seq);
  if (message.empty() || !record_trap(seq, message)) return 0;
  if (trapped) *trapped = std::move(message);
  return FPSCOPE_TRAPPED;
}

void Session::on_device_result(uint64_t token, const TensorStats* stats, void* session) {
  auto* self = static_cast<Session*>(session);
  std::lock_guard lock(self->mutex_);
  auto it = self->pending_tensors_.find(token);
  if (it == self->pending_tensors_.end() || stats == nullptr) return;
  PendingTensor tensor = std::move(it->second);
  self->pending_tensors_.erase(it);
  self->device_result_locked(std::move(tensor), *stats);
}

// Writes a device tensor's records once its launch's Launch record is in the ring.
void Session::device_result_locked(PendingTensor t, const TensorStats& stats) {
  auto it = pending_launches_.find(t.seq);
  if (it == pending_launches_.end()) return;
  PendingLaunch& launch = it->second;
  if (!launch.launch_written) {
    launch.early.emplace_back(std::move(t), stats);
    return;
  }
  // As on the host: values of a kind some allow rule permits pass through as intended values, and
  // an output whose NaN/Inf a rule covers is flagged and kept from the trap.
  const uint8_t kinds = kinds_of(stats);
  if (t.role == wire::Role::Input && (kinds & ~intended_kinds_) != 0)
    launch.inputs_finite = false;
  const bool allowed = t.role == wire::Role::Output && kinds != 0 &&
                       common::allowed_by(options_.allow, launch.kernel.c_str(),
                                            launch.layer ? launch.layer->c_str() : nullptr, kinds);
  if (t.recorded) {
    t.meta.name = t.name.c_str();
    Measurement m;
    m.tensor = &t.meta;
    m.role = t.role;
    m.slot = t.slot;
    m.stats = stats;
    m.allowed = allowed;
    write_tensor_records(t.seq, m, launch.inputs_finite);
  }
  if (t.role == wire::Role::Output && !allowed && launch.inputs_finite && trap_wants(options_.trap, stats) &&
      trap_message_.empty() && !trapped_.load()) {
    const ElementType type = *float_type(t.meta.dtype);
    const wire::NonfiniteKind first = nonfinite_kind(type, stats.first_nonfinite_bits);
    const char* wanted = options_.trap == TrapKind::NaN ? "NaN" : options_.trap == TrapKind::Inf ? "Inf" : nullptr;
    const bool first_is_wanted = wanted == nullptr || (options_.trap == TrapKind::NaN) == (first == wire::NonfiniteKind::NaN);
    trap_seq_ = t.seq;
    trap_message_ = std::string(contract::kTrapMessagePrefix) + "first " + (first_is_wanted ? nonfinite_word(first) : wanted) +
                    " made by " + launch.kernel + launch.where + " in " + t.name +
                    (first_is_wanted ? " at index " + std::to_string(stats.first_nonfinite)
                                     : " (its first non-finite value, " + std::string(nonfinite_word(first)) +
                                           ", is at index " + std::to_string(stats.first_nonfinite) + ")");
  }
  if (--launch.outstanding <= 0) pending_launches_.erase(it);
}

}  // namespace fpscope::inject
