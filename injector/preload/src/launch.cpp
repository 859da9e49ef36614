// The launch path: what the injector does around one mpt_launch().
//
//   1. plan: is the launch selected (options), on which device, is it the loss scaler's update?
//   2. before the real kernel: measure the inputs (in-place kernels overwrite them), read the loss
//      scale, and when only outputs are measured, check the in-place inputs for finiteness;
//   3. call the real kernel; after it, measure the outputs and read the loss scale again;
//   4. under the session lock, write Launch, then per tensor TensorStats (+ TensorFormats and
//      TensorHistogram with full statistics, Nonfinite for outputs holding NaN/Inf, Dump), then
//      LossScale;
//   5. --trap: stop at the first output whose non-finite values this launch made (verdict.h decides).
// The records are written by launch_records.cpp, a front end's own operations take the same path
// through front_end_ops.cpp, and launches with device tensors take launch_on_device()
// (device_launch.cpp).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "fpscope/contract/loss_scaler.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/inject_api.h"

#include "launch_path.h"
#include "tensor_view.h"
#include "verdict.h"

namespace fpscope::inject {

namespace {

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

using verdict::kinds_of;

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

// `d` as a version 2 descriptor that asks for the launch report into `report`. Only the fields of
// d's own version are read: a version 1 descriptor ends before `report`.
mpt_launch_desc asking_for_report(const mpt_launch_desc* d, mpt_launch_report* report) {
  mpt_launch_desc asked{};
  asked.abi_version = 2;
  asked.flags = d->flags | MPT_LAUNCH_REPORT;
  asked.kernel = d->kernel;
  asked.inputs = d->inputs;
  asked.n_inputs = d->n_inputs;
  asked.n_outputs = d->n_outputs;
  asked.outputs = d->outputs;
  asked.scalars = d->scalars;
  asked.n_scalars = d->n_scalars;
  asked.reserved = d->reserved;
  asked.stream = d->stream;
  asked.report = report;
  return asked;
}

bool aliases_an_output(const mpt_launch_desc* d, const mpt_tensor& in) {
  for (int o = 0; o < d->n_outputs; ++o)
    if (overlaps(in, d->outputs[o])) return true;
  return false;
}

}  // namespace

Session::LaunchPlan Session::plan(const mpt_launch_desc* d, const Attribution& where) {
  LaunchPlan p;
  p.kernel = d->kernel ? d->kernel : "";
  p.layer = where.layer;
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

int Session::launch(const mpt_launch_desc* d, LaunchFn real, uint32_t library_abi) {
  if (d == nullptr || d->kernel == nullptr || d->n_inputs < 0 || d->n_outputs < 0) return real(d);
  const int64_t entered = monotonic_ns();
  thread_local LaunchState state;
  state.where = this_thread_ranges().attribution();
  LaunchPlan& p = state.p;
  p = plan(d, state.where);
  p.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  p.memo = memo_on_.load(std::memory_order_relaxed);
  if (p.device == MPT_DEVICE_CUDA && p.sampled) return launch_on_device(d, &state, entered, real);

  before_kernel(d, nullptr, &state);
  outputs_written(d);  // after the inputs were measured: an in-place input is still unchanged then
  // A measured launch asks the kernel for its own counts (narrowing stores, parameter updates),
  // unless the program asked itself: then the program's report is read.
  const mpt_launch_desc* call = d;
  mpt_launch_desc asked;
  state.reported = nullptr;
  if (p.sampled && options_.updates && library_abi >= 2 && d->abi_version >= 1 && d->abi_version <= MPT_ABI_VERSION) {
    if (d->abi_version >= 2 && (d->flags & MPT_LAUNCH_REPORT) != 0) {
      state.reported = d->report;
    } else {
      asked = asking_for_report(d, &state.report);
      state.report.filled = 0;
      state.reported = &state.report;
      call = &asked;
    }
  }
  p.start_ns = monotonic_ns();
  p.status = real(call);
  p.end_ns = monotonic_ns();
  if (p.status != MPT_OK) state.reported = nullptr;
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
      m.allowed = verdict::output_allowed(kinds, carried, options_.allow, p.kernel, s->where.layer);
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
  write_launch_records(d, p, s->where, s->measured, finite_in, s->probe, s->reported);
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
    forecast_recipes(p, &m);
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
  if (t.data != nullptr) memo_.written(t.data, element_count(t) * dtype_bytes(t.dtype));
}

// With inputs measured, their statistics answer; otherwise the inputs the kernel did not
// overwrite are scanned now (in-place ones were checked before the call).
bool Session::inputs_finite(const mpt_launch_desc* d, const LaunchPlan& p,
                            const std::vector<Measurement>& measured) const {
  if (p.inputs) {
    // Values of a kind some allow rule permits pass through as intended values, not as damage.
    for (const Measurement& m : measured)
      if (m.role == wire::Role::Input && verdict::damages(kinds_of(m.stats), intended_kinds_)) return false;
    return true;
  }
  for (int i = 0; i < d->n_inputs; ++i) {
    const mpt_tensor& in = d->inputs[i];
    if (!measurable_on_host(in) || aliases_an_output(d, in)) continue;
    if (!all_finite(in.data, *float_type(in.dtype), element_count(in))) return false;
  }
  return true;
}

// The first output (in slot order) holding values of the trapped kind names the place; the index
// is that of the first such value, which may lie after a non-finite value of another kind.
std::string Session::trap_message(const LaunchPlan& p, const Attribution& where,
                                  const std::vector<Measurement>& measured) const {
  for (const Measurement& m : measured) {
    if (m.role != wire::Role::Output || m.allowed || !verdict::trap_wants(options_.trap, m.stats)) continue;
    const mpt_tensor& t = *m.tensor;
    const ElementType type = *float_type(t.dtype);
    const wire::NonfiniteKind first = nonfinite_kind(type, m.stats.first_nonfinite_bits);
    std::optional<verdict::WantedValue> wanted;
    if (!verdict::first_is_wanted(options_.trap, first)) {  // the data is at hand: find the trapped kind
      const int64_t index = first_of_kind(t.data, type, element_count(t), options_.trap == TrapKind::NaN);
      wanted = verdict::WantedValue{nonfinite_kind(type, element_bits(t.data, type, static_cast<size_t>(index))), index};
    }
    return std::string(contract::kTrapMessagePrefix) +
           verdict::trap_text(options_.trap, p.kernel, verdict::place_of(where), verdict::tensor_label(t.name, m.slot),
                              first, m.stats.first_nonfinite, wanted);
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

}  // namespace fpscope::inject
