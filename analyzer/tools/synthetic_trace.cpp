// Writes synthetic traces of the reference CNN: see synthetic_trace.h. The numbers are made up but
// consistent (magnitudes per layer, gradients scaled by the loss scale, NaN propagating through the
// launches that read it), so every report can be checked against plain SQL on the same file.
#include "synthetic_trace.h"

#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/nvtx.h"
#include "fpscope/collector/trace_writer.h"
#include "fpscope/contract/wire.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fpscope::synthetic {
namespace {

// Frames wire records as the injector does and hands them to the collector's trace writer, one at
// a time, all from producer thread 1.
class RecordSender {
 public:
  explicit RecordSender(TraceWriter& writer) : writer_(writer) {}

  template <typename R>
  void put(R record) {
    record.h = {wire::record_type_v<R>, static_cast<uint16_t>(sizeof(R) / wire::kSlotBytes), kThread};
    writer_.on_record(&record.h);
  }

  // A record followed by `tail_bytes` more; `fixed_bytes` of the struct go first.
  template <typename R>
  void put_with_tail(R record, std::size_t fixed_bytes, const void* tail, std::size_t tail_bytes) {
    const uint16_t slots = wire::slots_for(fixed_bytes, tail_bytes);
    buffer_.assign(std::max<std::size_t>(slots, sizeof(R) / wire::kSlotBytes), Slot{});
    record.h = {wire::record_type_v<R>, slots, kThread};
    std::memcpy(buffer_.data(), &record, fixed_bytes);
    if (tail_bytes) std::memcpy(reinterpret_cast<unsigned char*>(buffer_.data()) + fixed_bytes, tail, tail_bytes);
    writer_.on_record(reinterpret_cast<const wire::RecordHeader*>(buffer_.data()));
  }

  // The string's id, sending its String record the first time.
  uint32_t str(const std::string& text) {
    auto [it, inserted] = strings_.try_emplace(text, static_cast<uint32_t>(strings_.size()) + 1);
    if (inserted) {
      wire::StringRecord r{};
      r.id = it->second;
      r.length = static_cast<uint32_t>(text.size());
      put_with_tail(r, offsetof(wire::StringRecord, bytes), text.data(), text.size());
    }
    return it->second;
  }

 private:
  static constexpr uint32_t kThread = 1;
  struct alignas(8) Slot {
    unsigned char bytes[wire::kSlotBytes];
  };
  TraceWriter& writer_;
  std::vector<Slot> buffer_;
  std::map<std::string, uint32_t> strings_;
};

struct TensorSpec {
  int64_t uid;
  std::string name;
  int dtype;
  int64_t elements;
  double absmax;     // magnitude of the finite values
  bool all_nan = false;
  bool one_nan = false;
  bool one_inf = false;
};

struct KernelSpec {
  std::string kernel;
  std::vector<TensorSpec> in, out;
};

// Format limits from the trace contract: max_finite, smallest normal, smallest subnormal.
constexpr std::array<std::array<double, 3>, contract::kCastFormatCount> kLimits = [] {
  std::array<std::array<double, 3>, contract::kCastFormatCount> l{};
  for (int f = 0; f < contract::kCastFormatCount; ++f) {
    const contract::FloatFormat& b = contract::kCastFormats[static_cast<std::size_t>(f)].bits;
    l[static_cast<std::size_t>(f)] = {b.max_finite(), b.min_normal(), b.min_subnormal()};
  }
  return l;
}();

// Tensor records one step writes without loss scaling (with it: 5 more).
constexpr int64_t kTensorsPerStep = 118;

class Writer {
 public:
  Writer(RecordSender& out, const Options& o) : out_(out), o_(o) {
    low_ = o.precision == "fp16" || o.precision == "amp-fp16" ? 1 : o.precision == "fp32" ? 0 : 2;
    amp_ = o.precision.rfind("amp-", 0) == 0;
    scaled_ = o.loss_scale != "none";
    dynamic_ = o.loss_scale == "dynamic";
    scale_ = o.loss_scale.rfind("static:", 0) == 0 ? std::stod(o.loss_scale.substr(7)) : o.scale_init;
    domain_ = out_.str(contract::kTrainerNvtxDomain);
  }

  int64_t run(int64_t steps);

 private:
  uint32_t str(const std::string& s) { return out_.str(s); }
  int bytes_of(int dtype) const { return dtype == 0 ? 4 : 2; }
  int64_t alloc(const std::string& name, int category, int64_t bytes) {
    const int64_t id = ++alloc_id_;
    wire::AllocRecord r{};
    r.t_ns = t_ += 100;
    r.id = static_cast<uint64_t>(id);
    r.bytes = static_cast<uint64_t>(bytes);
    r.name = str(name);
    r.category = static_cast<uint8_t>(category);
    out_.put(r);
    live_[id] = category;
    return id;
  }
  void free_alloc(int64_t id) {
    wire::FreeRecord r{};
    r.t_ns = t_ += 100;
    r.id = static_cast<uint64_t>(id);
    out_.put(r);
    live_.erase(id);
  }
  void free_all_of(int category) {
    for (auto it = live_.begin(); it != live_.end();) {
      auto next = std::next(it);
      if (it->second == category) free_alloc(it->first);
      it = next;
    }
  }
  void push(contract::NvtxCategory category, const std::string& name, std::optional<int64_t> step) {
    wire::NvtxPushRecord r{};
    r.t_ns = t_ += 200;
    r.message = str(name);
    r.domain = domain_;
    r.category = static_cast<uint32_t>(category);
    if (step) {
      r.payload_kind = 1;
      r.payload_i = *step;
    }
    out_.put(r);
  }
  void pop() {
    wire::NvtxPopRecord r{};
    r.t_ns = t_ += 200;
    r.domain = domain_;
    out_.put(r);
  }
  void scalar(int64_t step, const std::string& name, double value) {
    wire::ScalarRecord r{};
    r.t_ns = t_ += 100;
    r.step = step;
    r.name = str(name);
    r.value = value;  // NaN: no value (NULL)
    out_.put(r);
  }
  void launch(const KernelSpec& k, std::optional<std::string> layer, const std::string& phase, int64_t step);
  void tensor(int64_t kernel_id, contract::Role role, int slot, const TensorSpec& t, bool origin);
  void forward(int64_t step);
  void backward(int64_t step);
  bool scaler(int64_t step);
  void optimizer(int64_t step);

  RecordSender& out_;
  const Options& o_;
  uint32_t domain_ = 0;
  int low_ = 0;
  bool amp_ = false, scaled_ = false, dynamic_ = false;
  double scale_ = 1;
  int64_t tracker_ = 0;
  int64_t t_ = 1000000, kernel_id_ = 0, alloc_id_ = 0, tensors_ = 0;
  bool params_nan_ = false, step_nan_ = false, step_inf_ = false;
  std::map<int64_t, int> live_;  // allocation id -> category
  std::map<std::string, int64_t> params_, grads_, momenta_;
  std::vector<std::pair<std::string, int64_t>> saved_;  // activations of this step: (layer, uid)
};

// The CNN's layers: name, forward kernels, output elements per kernel, parameters, magnitude.
struct Layer {
  const char* name;
  std::vector<std::pair<const char*, int64_t>> forward;  // kernel, output elements
  std::vector<std::pair<std::string, int64_t>> params;   // name, elements
  std::vector<const char*> backward;
  double magnitude;
};
const std::vector<Layer>& layers() {
  static const std::vector<Layer> l = {
      {"conv1", {{"conv2d_forward", 108160}, {"relu_forward", 108160}, {"maxpool2d_forward", 27040}},
       {{"conv1.weight", 45}, {"conv1.bias", 5}}, {"maxpool2d_backward", "relu_backward", "conv2d_backward_weight"}, 3.0},
      {"conv2", {{"conv2d_forward", 31104}}, {{"conv2.weight", 1500}, {"conv2.bias", 12}},
       {"conv2d_backward_data", "conv2d_backward_weight"}, 12.0},
      {"norm", {{"group_norm_forward", 31104}, {"relu_forward", 31104}}, {{"norm.weight", 12}, {"norm.bias", 12}},
       {"relu_backward", "group_norm_backward"}, 4.0},
      {"fc1", {{"linear_forward", 3200}, {"relu_forward", 3200}}, {{"fc1.weight", 97200}, {"fc1.bias", 100}},
       {"relu_backward", "linear_backward_data", "linear_backward_weight"}, 20.0},
      {"fc2", {{"linear_forward", 320}}, {{"fc2.weight", 1000}, {"fc2.bias", 10}},
       {"linear_backward_data", "linear_backward_weight"}, 30.0},
      {"loss", {{"log_softmax_forward", 320}, {"nll_loss_forward", 1}}, {}, {"nll_loss_backward", "log_softmax_backward"}, 8.0},
  };
  return l;
}

void Writer::tensor(int64_t kernel_id, contract::Role role, int slot, const TensorSpec& t, bool origin) {
  const int64_t nan = t.all_nan ? t.elements : t.one_nan ? 1 : 0;
  const int64_t inf = t.one_inf ? 1 : 0;
  const bool finite_any = nan + inf < t.elements;
  const double absmax = t.absmax;
  const double min_nonzero = absmax * std::ldexp(1.0, -18);
  const int64_t zero = t.elements / 50;
  const int64_t finite = t.elements - nan - inf;
  const double none = std::nan("");

  wire::TensorStatsRecord st{};
  st.seq = static_cast<uint64_t>(kernel_id);
  st.tensor_id = static_cast<uint64_t>(t.uid);
  st.name = str(t.name);
  st.role = role;
  st.slot = static_cast<uint8_t>(slot);
  st.dtype = static_cast<uint8_t>(t.dtype);
  st.ndim = 1;
  st.shape[0] = t.elements;
  st.count = static_cast<uint64_t>(t.elements);
  st.nan = static_cast<uint64_t>(nan);
  st.pos_inf = static_cast<uint64_t>(inf);
  st.zero = static_cast<uint64_t>(finite_any ? zero : 0);
  st.subnormal = t.dtype == 1 && finite_any && min_nonzero < kLimits[0][1] ? 1 : 0;
  st.min = finite_any ? -absmax : none;
  st.max = finite_any ? absmax : none;
  st.absmax = finite_any ? absmax : none;
  st.min_nonzero = finite_any ? min_nonzero : none;
  st.mean = finite_any ? absmax / 16 : none;
  st.rms = finite_any ? absmax / 4 : none;
  out_.put(st);
  const uint8_t role_slot = contract::pack_role_slot(role, static_cast<uint8_t>(slot));

  if (!o_.basic_stats) {
    wire::TensorFormatsRecord f{};
    f.seq = st.seq;
    f.role_slot = role_slot;
    for (std::size_t i = 0; i < 4; ++i) {
      const bool over = finite_any && absmax > kLimits[i][0];
      wire::FormatCounts& c = f.formats[i];
      c.overflow = over ? static_cast<uint64_t>(std::max<int64_t>(1, finite / 100)) : 0;
      c.underflow = finite_any && min_nonzero < kLimits[i][2] / 2 ? static_cast<uint64_t>(std::max<int64_t>(1, finite / 1000)) : 0;
      c.subnormal = finite_any && min_nonzero < kLimits[i][1] ? static_cast<uint64_t>(std::max<int64_t>(1, finite / 500)) : 0;
      c.near_max = finite_any && !over && absmax >= kLimits[i][0] / 2 ? 1 : 0;
    }
    out_.put(f);
    if (finite_any) {
      const int top = static_cast<int>(std::floor(std::log2(absmax)));
      const wire::HistogramBin bins[] = {
          {top - 18, 0, 1}, {top - 2, 0, static_cast<uint64_t>(std::max<int64_t>(0, finite - zero - 2))}, {top, 0, 1}};
      wire::TensorHistogramRecord h{};
      h.seq = st.seq;
      h.role_slot = role_slot;
      h.bins = 3;
      out_.put_with_tail(h, sizeof h, bins, sizeof bins);
    }
  }
  ++tensors_;
  if (role == contract::Role::Output && nan + inf > 0) {
    wire::NonfiniteRecord r{};
    r.seq = st.seq;
    r.first_index = 0;
    r.first_bits = nan ? 0x7e00 : 0x7c00;
    r.role_slot = role_slot;
    r.kind = nan ? wire::NonfiniteKind::NaN : wire::NonfiniteKind::PosInf;
    r.origin = origin ? 1 : 0;
    r.dtype = st.dtype;
    out_.put(r);
  }
}

void Writer::launch(const KernelSpec& k, std::optional<std::string> layer, const std::string& phase, int64_t step) {
  const int64_t id = ++kernel_id_;
  const int64_t start = t_ += 500;
  int64_t elements = 0;
  for (const auto& t : k.out) elements += t.elements;
  const int64_t end = t_ += 2000 + elements / 16;
  wire::LaunchRecord l{};
  l.seq = static_cast<uint64_t>(id);
  l.start_ns = start;
  l.end_ns = end;
  l.kernel = str(k.kernel);
  l.layer = layer ? str(*layer) : 0;
  l.phase = str(phase);
  l.step = step;
  l.n_inputs = static_cast<uint8_t>(k.in.size());
  l.n_outputs = static_cast<uint8_t>(k.out.size());
  l.sampled = 1;
  out_.put(l);
  bool inputs_finite = true;
  for (size_t s = 0; s < k.in.size(); ++s) {
    tensor(id, contract::Role::Input, static_cast<int>(s), k.in[s], false);
    inputs_finite = inputs_finite && !k.in[s].all_nan && !k.in[s].one_nan && !k.in[s].one_inf;
  }
  for (size_t s = 0; s < k.out.size(); ++s) tensor(id, contract::Role::Output, static_cast<int>(s), k.out[s], inputs_finite);
  t_ += 300;
}

void Writer::forward(int64_t step) {
  push(contract::NvtxCategory::Phase, "forward", step);
  TensorSpec x{alloc("batch", 6, 32 * 784 * bytes_of(low_)), "input", low_, 32 * 784, 1.0, params_nan_};
  saved_.clear();
  saved_.emplace_back("data", x.uid);
  for (const auto& layer : layers()) {
    push(contract::NvtxCategory::Layer, layer.name, step);
    for (const auto& [kernel, elements] : layer.forward) {
      const bool fp32_op = amp_ && (std::string(layer.name) == "loss" || std::string(layer.name) == "norm");
      const int dtype = fp32_op ? 0 : low_;
      KernelSpec k{kernel, {x}, {}};
      for (const auto& [p, n] : layer.params) {
        if (std::string(kernel).find("relu") == std::string::npos) k.in.push_back({params_[p], p, low_, n, 0.5, params_nan_});
      }
      const bool plant = o_.nan_at_step && *o_.nan_at_step == step && std::string(layer.name) == "fc1" &&
                         std::string(kernel) == "linear_forward";
      TensorSpec y{alloc(std::string(layer.name) + "." + kernel, 3, elements * bytes_of(dtype)),
                   std::string(layer.name) + ".out", dtype, elements,
                   layer.magnitude * o_.activation_scale * std::pow(o_.activation_growth, static_cast<double>(step))};
      if (step_nan_ || params_nan_ || x.all_nan || x.one_nan) y.all_nan = true;
      if (plant) {
        y.all_nan = false;
        y.one_nan = true;
        step_nan_ = true;
      }
      if (y.absmax > kLimits[low_ == 1 ? 0 : 1][0] && dtype != 0) {  // overflowed in the 16-bit type
        y.absmax = kLimits[0][0];
        y.one_inf = true;
      }
      k.out.push_back(y);
      launch(k, std::string(layer.name), "forward", step);
      saved_.emplace_back(layer.name, y.uid);
      x = y;
    }
    pop();
  }
  scalar(step, "loss", step_nan_ || params_nan_ ? std::nan("") : 2.3 / (1.0 + 0.05 * step));
  scalar(step, "train_accuracy", 100.0 * (0.1 + 0.8 * (1.0 - 1.0 / (1.0 + 0.1 * step))));
  scalar(step, "lr", 0.01);
  pop();
}

void Writer::backward(int64_t step) {
  push(contract::NvtxCategory::Phase, "backward", step);
  const double g = 1e-3 * (scaled_ ? scale_ : 1.0);
  const bool bad = step_nan_ || params_nan_;
  TensorSpec dy{alloc("grad_out", 3, 320 * bytes_of(low_)), "dlogp", low_, 320, g, bad};
  const auto& ls = layers();
  for (auto it = ls.rbegin(); it != ls.rend(); ++it) {
    push(contract::NvtxCategory::Layer, it->name, step);
    for (const char* kernel : it->backward) {
      KernelSpec k{kernel, {dy}, {}};
      const bool weight = std::string(kernel).find("backward_weight") != std::string::npos ||
                          std::string(kernel) == "group_norm_backward";
      if (weight) {
        for (const auto& [p, n] : it->params) {
          TensorSpec gw{grads_[p], p + ".grad", low_, n, g * 4, bad};
          if (o_.overflow_at_step && *o_.overflow_at_step == step && std::string(it->name) == "fc1") {
            gw.absmax = kLimits[0][0];
            gw.one_inf = true;
            step_inf_ = true;
          }
          k.out.push_back(gw);
        }
      }
      if (!weight || std::string(kernel) == "group_norm_backward") {
        TensorSpec dx{alloc(std::string(it->name) + "." + kernel, 3, 3200 * bytes_of(low_)),
                      std::string(it->name) + ".grad_in", low_, 3200, g, bad || step_inf_};
        k.out.insert(k.out.begin(), dx);
        launch(k, std::string(it->name), "backward", step);
        dy = dx;
      } else {
        launch(k, std::string(it->name), "backward", step);
      }
    }
    pop();
  }
  for (const auto& [layer, uid] : saved_) {
    if (live_.count(uid)) free_alloc(uid);
  }
  free_all_of(3);  // the backward temporaries
  pop();
}

// Returns true when the optimizer step is skipped.
bool Writer::scaler(int64_t step) {
  const bool found_inf = step_nan_ || step_inf_ || params_nan_;
  TensorSpec scale{params_["scaler.scale"], "loss_scale", 0, 1, scale_};
  TensorSpec tracker{params_["scaler.tracker"], "growth_tracker", 3, 1, static_cast<double>(tracker_ + 1)};
  TensorSpec flag{params_["scaler.found_inf"], "found_inf", 0, 1, 1.0};
  launch({"amp_unscale_check", {scale}, {flag}}, std::nullopt, "optimizer", step);
  const double before = scale_;
  wire::ScaleEvent event = wire::ScaleEvent::Unchanged;
  if (dynamic_) {
    if (found_inf) {
      scale_ *= 0.5, tracker_ = 0, event = wire::ScaleEvent::Backoff;
    } else if (++tracker_ >= o_.growth_interval) {
      scale_ *= 2.0, tracker_ = 0, event = wire::ScaleEvent::Growth;
    }
  }
  launch({"amp_update_scale", {scale, tracker, flag}, {scale, tracker}}, std::nullopt, "optimizer", step);
  wire::LossScaleRecord r{};
  r.seq = static_cast<uint64_t>(kernel_id_);
  r.t_ns = t_;
  r.step = step;
  r.scale_before = before;
  r.scale_after = scale_;
  r.growth_tracker = static_cast<int32_t>(tracker_);
  r.found_inf = found_inf ? 1 : 0;
  r.event = event;
  out_.put(r);
  return found_inf;
}

void Writer::optimizer(int64_t step) {
  push(contract::NvtxCategory::Phase, "optimizer", step);
  const bool skip = scaled_ && scaler(step);
  if (!skip) {
    if (step_nan_) params_nan_ = true;
    for (const auto& layer : layers()) {
      for (const auto& [p, n] : layer.params) {
        TensorSpec param{params_[p], p, amp_ ? 0 : low_, n, 0.5, params_nan_};
        TensorSpec grad{grads_[p], p + ".grad", low_, n, 4e-3, params_nan_};
        TensorSpec mom{momenta_[p], p + ".momentum", 0, n, 1e-2, params_nan_};
        launch({"sgd_step", {param, grad, mom}, {param, mom}}, std::string(layer.name), "optimizer", step);
      }
    }
  }
  pop();
}

int64_t Writer::run(int64_t steps) {
  for (const auto& layer : layers()) {
    for (const auto& [p, n] : layer.params) {
      params_[p] = alloc(p, 0, n * bytes_of(low_));
      if (amp_) alloc(p + ".master", 1, n * 4);
      grads_[p] = alloc(p + ".grad", 2, n * bytes_of(low_));
      momenta_[p] = alloc(p + ".momentum", 4, n * 4);
    }
  }
  params_["scaler.scale"] = alloc("loss_scale", 5, 4);
  params_["scaler.tracker"] = alloc("growth_tracker", 5, 4);
  params_["scaler.found_inf"] = alloc("found_inf", 5, 4);
  for (int64_t step = 0; step < steps; ++step) {
    step_nan_ = step_inf_ = false;
    push(contract::NvtxCategory::Step, "step", step);
    forward(step);
    backward(step);
    optimizer(step);
    free_all_of(6);  // the batch
    pop();
  }
  t_ += 900;
  scalar(-1, "test_accuracy", params_nan_ ? 10.0 : 84.0 - (low_ == 0 ? 0.0 : 0.4));
  return tensors_;
}

}  // namespace

int64_t write_trace(const std::string& path, const Options& options) {
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  std::string error;
  std::unique_ptr<TraceWriter> trace = TraceWriter::create(path, "", &error);
  if (!trace) throw std::runtime_error(error);
  const std::string command = "[\"mptrain\",\"--model\",\"cnn\",\"--precision\",\"" + options.precision +
                              "\",\"--loss-scale\",\"" + options.loss_scale + "\"]";
  trace->set_meta("command", command);
  trace->set_meta("generator", "fpscope-gen-trace");
  trace->set_meta("end_reason", "running");
  RecordSender records(*trace);
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"model", "cnn"}, {"precision", options.precision}, {"loss_scale", options.loss_scale},
           {"batch_size", "32"}}) {
    wire::TextRecord r{};
    r.key = records.str(key);
    r.value = records.str(value);
    records.put(r);
  }
  int64_t steps = options.steps;
  if (options.tensor_target > 0) steps = std::max<int64_t>(1, options.tensor_target / kTensorsPerStep);
  const int64_t tensors = Writer(records, options).run(steps);
  if (trace->failed()) throw std::runtime_error(path + ": " + trace->error());
  if (options.end_reason == "running") {  // unfinished: what a reader sees while the run goes on
    if (!trace->commit()) throw std::runtime_error(path + ": " + trace->error());
    return tensors;
  }
  trace->set_meta("end_reason", options.end_reason);
  if (options.end_reason == "exited") trace->set_meta("exit_code", "0");
  if (!trace->finish(options.finalize ? TraceWriter::Summaries::Write : TraceWriter::Summaries::Skip)) {
    throw std::runtime_error(path + ": " + trace->error());
  }
  return tensors;
}

}  // namespace fpscope::synthetic
