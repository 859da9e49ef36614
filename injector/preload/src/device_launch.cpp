// Launches with device tensors: their tensors are measured on the GPU (libfpscope_gpu.so), inputs
// before the kernel and outputs after it on the launch's stream; the results come back
// asynchronously and are written, judged and trapped on as they arrive.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "fpscope/contract/run_end.h"
#include "fpscope/inject_api.h"
#include "launch_path.h"
#include "tensor_view.h"
#include "verdict.h"

namespace fpscope::inject {

namespace {

// Host float inputs of a device launch (copies from the host): all finite?
bool host_inputs_finite(const mpt_launch_desc* d) {
  for (int i = 0; i < d->n_inputs; ++i) {
    const mpt_tensor& in = d->inputs[i];
    if (measurable_on_host(in) && !all_finite(in.data, *float_type(in.dtype), element_count(in))) return false;
  }
  return true;
}

// The device scan reads fp32, fp16 and bf16; an fp64 or 8-bit device tensor goes unmeasured.
bool on_device(const mpt_tensor& t) {
  const auto type = float_type(t.dtype);
  return t.device == MPT_DEVICE_CUDA && t.data != nullptr && type.has_value() && *type != ElementType::F64 &&
         !is_byte_type(*type);
}

std::atomic<Session*> g_process_session{nullptr};

void collect_device_results_at_exit() {
  if (Session* session = g_process_session.load(std::memory_order_acquire)) session->device_results_at_exit();
}

}  // namespace

void Session::set_process_session(Session* session) { g_process_session.store(session, std::memory_order_release); }

const fpscope_gpu_api* Session::gpu() {
  std::call_once(gpu_once_, [this] {
    std::string why;
    gpu_ = gpu_loader_ ? gpu_loader_(&why) : nullptr;
    if (gpu_ == nullptr) {
      std::fprintf(stderr, "fpscope: device tensors are not measured (%s); their launches are recorded\n",
                   why.c_str());
      return;
    }
    // Registered after the CUDA runtime's own handler (the program has made its first CUDA call),
    // so it runs first, while the runtime still works.
    static std::once_flag registered;
    std::call_once(registered, [] { std::atexit(collect_device_results_at_exit); });
  });
  return gpu_;
}

void Session::device_results_at_exit(std::chrono::milliseconds deadline) noexcept {
  // Without waiting on the device: a stream that never finishes (a collective whose peer is gone)
  // must not keep the program from exiting. What has not come back by the deadline stays
  // unmeasured, as in a killed program.
  try {
    if (gpu_ == nullptr) return;
    const auto until = std::chrono::steady_clock::now() + deadline;
    for (;;) {
      uint64_t seq = 0;
      collect_device(false, &seq);  // a trap message it returns is dropped: the program has ended
      {
        std::lock_guard lock(mutex_);
        if (device_results_.none_queued()) return;
      }
      if (std::chrono::steady_clock::now() >= until) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (...) {  // nothing more can be written: those tensors stay unmeasured
  }
}

// Device tensors are queued on the GPU: inputs before the kernel, outputs after it, all on the
// launch's stream. Host tensors of a mixed launch (a copy from or to the host) are measured on the
// host. Dumps of device tensors are not written.
int Session::launch_on_device(const mpt_launch_desc* d, LaunchState* s, int64_t entered, LaunchFn real) {
  LaunchPlan& p = s->p;
  before_device_kernel(d, s);
  outputs_written(d);  // after the inputs were queued: an in-place input is still unchanged then
  p.start_ns = monotonic_ns();
  try {
    p.status = real(d);
  } catch (...) {  // the kernel's own exception, on its way to the program: the launch is given up
    std::lock_guard lock(mutex_);
    device_results_.drop(p.seq);  // its queued results are dropped as they arrive
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
  device_results_.begin(seq, kernel, verdict::place_of(where), where.layer);
}

void Session::device_launch_written(uint64_t seq, bool host_inputs_finite) {
  std::lock_guard lock(mutex_);
  for (auto& [tensor, stats] : device_results_.written(seq, host_inputs_finite))
    device_result_locked(std::move(tensor), stats);
  device_results_.settle(seq);
}

bool Session::device_inputs_finite(LaunchState* s) {
  poll_device(true, s);
  for (int round = 0;; ++round) {
    {
      std::lock_guard lock(mutex_);
      const DeviceResults::Launch* launch = device_results_.launch(s->p.seq);
      if (launch == nullptr) return true;
      for (const auto& [tensor, stats] : launch->early)
        if (tensor.role == wire::Role::Input && verdict::damages(verdict::kinds_of(stats), intended_kinds_)) return false;
      // Results another thread has taken from the library but not handed over yet.
      if (!device_results_.input_queued(s->p.seq) || round == 1000) return true;
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
    DeviceResults::Tensor queued;
    queued.seq = p.seq;
    queued.role = role;
    queued.slot = static_cast<uint8_t>(i);
    queued.recorded = recorded;
    queued.meta = t;
    queued.meta.data = nullptr;  // the device memory may be gone when the result arrives
    queued.name = t.name ? t.name : "";
    const OutputMemo::Key key = memo_key(t);
    if (p.memo && inputs && reuse_on_device(&queued, key)) continue;
    // An output's bytes are followed while its result is on its way, from the write generation
    // the kernel's write left them at.
    if (p.memo && !inputs) {
      queued.key = key;
      queued.generation = memo_.generation(key);
    }
    uint64_t token;
    {
      std::lock_guard lock(mutex_);
      token = device_results_.queue(std::move(queued));
    }
    const int rc = gpu_->submit(t.data, static_cast<int>(*float_type(t.dtype)), element_count(t),
                                static_cast<int>(options_.stats), d->stream, token);
    std::lock_guard lock(mutex_);
    if (rc != 0) {
      std::fprintf(stderr, "fpscope: device statistics of %s failed: %s\n", (t.name ? t.name : "a tensor"),
                   gpu_->last_error ? gpu_->last_error() : "unknown error");
      device_results_.unqueue(token);
    } else if (const DeviceResults::Tensor* still = device_results_.queued(token); still && still->generation != 0) {
      device_outputs_in_flight_[t.data] = token;
    }
  }
}

// An input is the bytes an earlier launch's output left, unwritten since (the memo's rules,
// output_memo.h): the output's statistics are the input's. Remembered, they are handed over at
// once; still on their way, the input is queued as the output's follower and takes them when
// they come. The output was scanned on its own launch's stream after its kernel: a later kernel
// that reads those bytes, on any stream, reads what that scan read, as the program must have
// ordered it after the write to read it at all. (A front end's op is scanned on the default
// stream: an op on a stream that does not wait for it is measured as racily as before, and its
// readers take those numbers.)
bool Session::reuse_on_device(DeviceResults::Tensor* queued, const OutputMemo::Key& key) {
  TensorStats stats;
  const bool remembered = memo_.recall(key, options_.stats, &stats);
  const uint64_t generation = remembered ? 0 : memo_.generation(key);
  if (!remembered && generation == 0) return false;  // outside every allocation the memo follows
  std::lock_guard lock(mutex_);
  if (remembered) {
    const uint64_t token = device_results_.queue(std::move(*queued));
    if (auto t = device_results_.take(token)) device_result_locked(std::move(*t), stats);
    return true;
  }
  const auto in_flight = device_outputs_in_flight_.find(key.data);
  if (in_flight == device_outputs_in_flight_.end()) return false;
  DeviceResults::Tensor* leader = device_results_.queued(in_flight->second);
  if (leader == nullptr || leader->generation != generation || leader->key != key) {
    // Written since the leader was queued (generations only grow; the generation above was read
    // before the lock, so a newer leader may have taken the place meanwhile: it stays).
    if (leader == nullptr || leader->generation < generation) device_outputs_in_flight_.erase(in_flight);
    return false;
  }
  leader->followers.push_back(device_results_.queue(std::move(*queued)));  // map nodes stay put
  ++device_inputs_followed_;
  return true;
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
  std::optional<DeviceResults::Tensor> tensor = self->device_results_.take(token);
  if (!tensor) return;
  const std::vector<uint64_t> followers = std::move(tensor->followers);
  if (tensor->generation != 0) {
    if (auto it = self->device_outputs_in_flight_.find(tensor->key.data);
        it != self->device_outputs_in_flight_.end() && it->second == token)
      self->device_outputs_in_flight_.erase(it);
    // Unwritten since, the bytes' statistics answer the next reader at once.
    if (stats != nullptr) self->memo_.remember(tensor->key, self->options_.stats, tensor->generation, *stats);
  }
  if (stats == nullptr) {  // no result: the tensor and its followers go unmeasured
    self->device_results_.handled(tensor->seq);
    for (uint64_t f : followers) self->device_results_.unqueue(f);
    return;
  }
  self->device_result_locked(std::move(*tensor), *stats);
  for (uint64_t f : followers)
    if (auto follower = self->device_results_.take(f)) self->device_result_locked(std::move(*follower), *stats);
}

// Writes a device tensor's records once its launch's Launch record is in the ring.
void Session::device_result_locked(DeviceResults::Tensor t, const TensorStats& stats) {
  DeviceResults::Launch* found = device_results_.launch(t.seq);
  if (found == nullptr) return;  // given up, its kernel having thrown
  DeviceResults::Launch& launch = *found;
  if (!launch.written) {
    launch.early.emplace_back(std::move(t), stats);
    return;
  }
  // The host's verdict (verdict.h), without carried intended kinds: a device input's last writer
  // is not known here.
  const uint8_t kinds = verdict::kinds_of(stats);
  if (t.role == wire::Role::Input && verdict::damages(kinds, intended_kinds_)) launch.inputs_finite = false;
  const bool allowed = t.role == wire::Role::Output &&
                       verdict::output_allowed(kinds, 0, options_.allow, launch.kernel.c_str(),
                                               launch.layer ? launch.layer->c_str() : nullptr);
  if (t.recorded) {
    t.meta.name = t.name.c_str();
    Measurement m;
    m.tensor = &t.meta;
    m.role = t.role;
    m.slot = t.slot;
    m.stats = stats;
    m.allowed = allowed;
    write_tensor_records(t.seq, m, launch.inputs_finite, nullptr);
  }
  if (t.role == wire::Role::Output && !allowed && launch.inputs_finite && verdict::trap_wants(options_.trap, stats) &&
      trap_message_.empty() && !trapped_.load()) {
    const ElementType type = *float_type(t.meta.dtype);
    trap_seq_ = t.seq;
    trap_message_ = std::string(contract::kTrapMessagePrefix) +
                    verdict::trap_text(options_.trap, launch.kernel, launch.where, verdict::tensor_label(t.name.c_str(), t.slot),
                                       nonfinite_kind(type, stats.first_nonfinite_bits), stats.first_nonfinite,
                                       std::nullopt);  // the device memory may be gone: no search
  }
  device_results_.handled(t.seq);
}

}  // namespace fpscope::inject
