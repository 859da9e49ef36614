// A front end's own operations (fpscope/inject_api.h): the launch path split at the operator.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/inject_api.h"
#include "launch_path.h"
#include "tensor_view.h"

namespace fpscope::inject {

// The same path as a launch, split at the kernel: begin_op() plans and measures the inputs,
// end_op() the outputs and writes the records. The op owns copies of everything the records need
// later (names, tensor descriptions, the attribution's names), since the caller's memory and the
// range stack may change in between.


struct Session::ForeignOp {
  LaunchState state;
  std::string kernel, layer, phase;
  std::vector<mpt_tensor> inputs, outputs;
  std::vector<std::string> input_names, output_names;  // sized by copy_tensors() at each use
  int32_t n_inputs = 0;

  // Ready for the next op, keeping what it allocated: the measurements' room (a few KiB each),
  // the strings' and the vectors'.
  void reuse() {
    std::vector<Measurement> measured = std::move(state.measured);
    measured.clear();
    state = LaunchState{};
    state.measured = std::move(measured);
    kernel.clear();
    layer.clear();
    phase.clear();
    inputs.clear();
    outputs.clear();
    n_inputs = 0;
  }
};

namespace {

// Ops finished on this thread, kept for the next ones: a front end begins and ends an op for every
// operator, and a fresh op would allocate its measurements (a few KiB each) and grow their vector
// again. Nested ops (an operator inside another) each take their own. An op that measured many
// tensors (an optimizer's foreach op over every parameter) is not kept, so that the spares hold
// little memory; nor is one that ends while the thread is being torn down (its spares gone).
thread_local bool spare_ops_gone = false;
struct SpareOps {
  static constexpr size_t kKept = 8;
  static constexpr size_t kLargestKept = 16;  // measurements an op kept has room for
  std::array<std::unique_ptr<Session::ForeignOp>, kKept> ops;
  size_t count = 0;

  ~SpareOps() { spare_ops_gone = true; }
  std::unique_ptr<Session::ForeignOp> take() {
    return count == 0 ? std::make_unique<Session::ForeignOp>() : std::move(ops[--count]);
  }
  void give_back(std::unique_ptr<Session::ForeignOp> op) noexcept {  // deleted when not kept
    if (!op || count == kKept || op->state.measured.capacity() > kLargestKept) return;
    op->reuse();
    ops[count++] = std::move(op);
  }
};
thread_local SpareOps spare_ops;

std::unique_ptr<Session::ForeignOp> take_op() {
  return spare_ops_gone ? std::make_unique<Session::ForeignOp>() : spare_ops.take();
}
void give_back_op(Session::ForeignOp* op) noexcept {
  std::unique_ptr<Session::ForeignOp> owned(op);
  if (!spare_ops_gone) spare_ops.give_back(std::move(owned));
}

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
  std::unique_ptr<ForeignOp> owned = take_op();  // the caller's once this returns
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

void Session::discard_op(ForeignOp* op) { give_back_op(op); }

int Session::end_op(ForeignOp* op, const mpt_tensor* outputs, int32_t n_outputs, int32_t status,
                    std::string* trapped) {
  struct GiveBack {
    ForeignOp* op;
    ~GiveBack() { give_back_op(op); }
  } owned{op};
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
  // A copy of a weight (autocast's cast of a parameter to bf16) is a weight to the fp8 forecast.
  if (options_.forecasts_recipes() && !op->inputs.empty() && contract::is_weight_copy(op->kernel))
    inherit_origin(op->inputs[0].id, op->outputs);
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

}  // namespace fpscope::inject
