// Writes synthetic traces of the reference CNN: see synthetic_trace.h. The numbers are made up but
// consistent (magnitudes per layer, gradients scaled by the loss scale, NaN propagating through the
// launches that read it), so every report can be checked against plain SQL on the same file.
#include "synthetic_trace.h"

#include "fpscope/contract/number_formats.h"
#include "fpscope/embedded_sql.h"

#include <sqlite3.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fpscope::synthetic {
namespace {

void check(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    throw std::runtime_error(std::string(what) + ": " + sqlite3_errmsg(db));
  }
}

struct Stmt {
  sqlite3* db;
  sqlite3_stmt* st = nullptr;
  Stmt(sqlite3* d, const char* sql) : db(d) { check(db, sqlite3_prepare_v2(db, sql, -1, &st, nullptr), sql); }
  ~Stmt() { sqlite3_finalize(st); }
  template <typename... Args>
  void run(const Args&... args) {
    int i = 0;
    (bind(++i, args), ...);
    check(db, sqlite3_step(st), "insert");
    sqlite3_reset(st);
  }
  void bind(int i, int64_t v) { sqlite3_bind_int64(st, i, v); }
  void bind(int i, int v) { sqlite3_bind_int64(st, i, v); }
  void bind(int i, long long v) { sqlite3_bind_int64(st, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(st, i, v); }
  void bind(int i, const std::string& v) { sqlite3_bind_text(st, i, v.c_str(), -1, SQLITE_TRANSIENT); }
  void bind(int i, const char* v) { sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT); }
  void bind(int i, std::nullptr_t) { sqlite3_bind_null(st, i); }
  void bind(int i, const std::optional<int64_t>& v) { v ? bind(i, *v) : bind(i, nullptr); }
  void bind(int i, const std::optional<double>& v) { v ? bind(i, *v) : bind(i, nullptr); }
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
  Writer(sqlite3* db, const Options& o) : db_(db), o_(o) {
    low_ = o.precision == "fp16" || o.precision == "amp-fp16" ? 1 : o.precision == "fp32" ? 0 : 2;
    amp_ = o.precision.rfind("amp-", 0) == 0;
    scaled_ = o.loss_scale != "none";
    dynamic_ = o.loss_scale == "dynamic";
    scale_ = o.loss_scale.rfind("static:", 0) == 0 ? std::stod(o.loss_scale.substr(7)) : o.scale_init;
  }

  int64_t run(int64_t steps);

 private:
  int64_t str(const std::string& s) {
    auto [it, inserted] = strings_.try_emplace(s, static_cast<int64_t>(strings_.size()) + 1);
    if (inserted) ins_string_.run(it->second, s);
    return it->second;
  }
  int bytes_of(int dtype) const { return dtype == 0 ? 4 : 2; }
  int64_t alloc(const std::string& name, int category, int64_t bytes, std::optional<int64_t> step) {
    const int64_t id = ++alloc_id_;
    ins_memory_.run(t_ += 100, "alloc", id, bytes, category, str(name), 0, step);
    live_[id] = {bytes, category, name};
    return id;
  }
  void free_alloc(int64_t id, std::optional<int64_t> step) {
    auto it = live_.find(id);
    ins_memory_.run(t_ += 100, "free", id, std::get<0>(it->second), std::get<1>(it->second),
                    str(std::get<2>(it->second)), 0, step);
    live_.erase(it);
  }
  int64_t push(const std::string& kind, const std::string& name, std::optional<int64_t> step) {
    open_.push_back({++range_id_, t_ += 200, kind, name, step});
    return range_id_;
  }
  void pop() {
    auto r = open_.back();
    open_.pop_back();
    ins_range_.run(r.id, r.start, t_ += 200, 1, static_cast<int64_t>(open_.size()), r.kind, str(r.name), str("mptrain"),
                   r.kind == "step" ? r.step : std::nullopt);
  }
  void launch(const KernelSpec& k, std::optional<std::string> layer, const std::string& phase, int64_t step);
  void tensor(int64_t kernel_id, const char* role, int slot, const TensorSpec& t, bool origin);
  void forward(int64_t step);
  void backward(int64_t step);
  bool scaler(int64_t step);
  void optimizer(int64_t step);

  struct OpenRange {
    int64_t id, start;
    std::string kind, name;
    std::optional<int64_t> step;
  };
  sqlite3* db_;
  const Options& o_;
  int low_ = 0;
  bool amp_ = false, scaled_ = false, dynamic_ = false;
  double scale_ = 1;
  int64_t tracker_ = 0;
  int64_t t_ = 1000000, kernel_id_ = 0, alloc_id_ = 0, range_id_ = 0, tensors_ = 0;
  bool params_nan_ = false, step_nan_ = false, step_inf_ = false;
  std::map<std::string, int64_t> strings_;
  std::map<int64_t, std::tuple<int64_t, int, std::string>> live_;
  std::vector<OpenRange> open_;
  std::map<std::string, int64_t> params_, grads_, momenta_;
  std::map<std::string, int64_t> param_elements_;
  std::vector<std::pair<std::string, int64_t>> saved_;  // activations of this step: (layer, uid)
  Stmt ins_string_{db_, "INSERT INTO strings(id, value) VALUES (?,?)"};
  Stmt ins_memory_{db_, "INSERT INTO memory_events(t_ns, kind, alloc_id, bytes, category, name_id, device, step) VALUES (?,?,?,?,?,?,?,?)"};
  Stmt ins_range_{db_, "INSERT INTO nvtx_ranges(id, start_ns, end_ns, thread, depth, kind, name_id, domain_id, step) VALUES (?,?,?,?,?,?,?,?,?)"};
  Stmt ins_kernel_{db_, "INSERT INTO kernels(id, start_ns, end_ns, name_id, layer_id, phase_id, step, thread, device, status, sampled) VALUES (?,?,?,?,?,?,?,1,0,0,1)"};
  Stmt ins_tensor_{db_,
                   "INSERT INTO tensors(kernel_id, role, slot, tensor_uid, name_id, dtype, shape, count, nan, pos_inf, "
                   "neg_inf, zero, subnormal, min, max, absmax, min_nonzero, mean, rms, f16_overflow, f16_underflow, "
                   "f16_subnormal, f16_near_max, bf16_overflow, bf16_underflow, bf16_subnormal, bf16_near_max, "
                   "e4m3_overflow, e4m3_underflow, e4m3_subnormal, e4m3_near_max, e5m2_overflow, e5m2_underflow, "
                   "e5m2_subnormal, e5m2_near_max, exp_hist) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"};
  Stmt ins_nonfinite_{db_, "INSERT INTO nonfinite(tensor_id, kernel_id, kind, first_index, first_bits, origin) VALUES (?,?,?,?,?,?)"};
  Stmt ins_scale_{db_, "INSERT INTO loss_scale(kernel_id, t_ns, step, scale_before, scale_after, found_inf, skipped, event, growth_tracker) VALUES (?,?,?,?,?,?,?,?,?)"};
  Stmt ins_scalar_{db_, "INSERT INTO scalars(t_ns, step, name_id, value) VALUES (?,?,?,?)"};
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

void Writer::tensor(int64_t kernel_id, const char* role, int slot, const TensorSpec& t, bool origin) {
  const int64_t nan = t.all_nan ? t.elements : t.one_nan ? 1 : 0;
  const int64_t inf = t.one_inf ? 1 : 0;
  const bool finite_any = nan + inf < t.elements;
  const double absmax = t.absmax;
  const double min_nonzero = absmax * std::ldexp(1.0, -18);
  const int64_t zero = t.elements / 50;
  const int64_t finite = t.elements - nan - inf;
  std::optional<double> fmin, fmax, fabsmax, fminnz, fmean, frms;
  if (finite_any) {
    fmin = -absmax, fmax = absmax, fabsmax = absmax, fminnz = min_nonzero, fmean = absmax / 16, frms = absmax / 4;
  }
  std::vector<std::optional<int64_t>> formats(16);
  if (!o_.basic_stats) {
    for (int f = 0; f < 4; ++f) {
      const bool over = finite_any && absmax > kLimits[f][0];
      formats[4 * f + 0] = over ? std::max<int64_t>(1, finite / 100) : 0;
      formats[4 * f + 1] = finite_any && min_nonzero < kLimits[f][2] / 2 ? std::max<int64_t>(1, finite / 1000) : 0;
      formats[4 * f + 2] = finite_any && min_nonzero < kLimits[f][1] ? std::max<int64_t>(1, finite / 500) : 0;
      formats[4 * f + 3] = finite_any && !over && absmax >= kLimits[f][0] / 2 ? 1 : 0;
    }
  }
  const int subnormal = t.dtype == 1 && finite_any && min_nonzero < kLimits[0][1] ? 1 : 0;
  std::optional<std::string> hist;
  if (!o_.basic_stats && finite_any) {
    const int top = static_cast<int>(std::floor(std::log2(absmax)));
    hist = "{\"" + std::to_string(top - 18) + "\":1,\"" + std::to_string(top - 2) + "\":" +
           std::to_string(std::max<int64_t>(0, finite - zero - 2)) + ",\"" + std::to_string(top) + "\":1}";
  }
  const std::string shape = "[" + std::to_string(t.elements) + "]";
  sqlite3_stmt* st = ins_tensor_.st;
  int i = 0;
  ins_tensor_.bind(++i, kernel_id);
  ins_tensor_.bind(++i, role);
  ins_tensor_.bind(++i, slot);
  ins_tensor_.bind(++i, t.uid);
  ins_tensor_.bind(++i, str(t.name));
  ins_tensor_.bind(++i, t.dtype);
  ins_tensor_.bind(++i, shape);
  ins_tensor_.bind(++i, t.elements);
  ins_tensor_.bind(++i, nan);
  ins_tensor_.bind(++i, inf);
  ins_tensor_.bind(++i, int64_t{0});
  ins_tensor_.bind(++i, finite_any ? zero : 0);
  ins_tensor_.bind(++i, subnormal);
  for (const auto& v : {fmin, fmax, fabsmax, fminnz, fmean, frms}) ins_tensor_.bind(++i, v);
  for (const auto& v : formats) ins_tensor_.bind(++i, v);
  if (hist) {
    ins_tensor_.bind(++i, *hist);
  } else {
    ins_tensor_.bind(++i, nullptr);
  }
  check(db_, sqlite3_step(st), "tensor");
  sqlite3_reset(st);
  ++tensors_;
  if (std::string(role) == "out" && nan + inf > 0) {
    ins_nonfinite_.run(sqlite3_last_insert_rowid(db_), kernel_id, nan ? "nan" : "+inf", int64_t{0},
                       nan ? int64_t{0x7e00} : int64_t{0x7c00}, origin ? 1 : 0);
  }
}

void Writer::launch(const KernelSpec& k, std::optional<std::string> layer, const std::string& phase, int64_t step) {
  const int64_t id = ++kernel_id_;
  const int64_t start = t_ += 500;
  int64_t elements = 0;
  for (const auto& t : k.out) elements += t.elements;
  const int64_t end = t_ += 2000 + elements / 16;
  ins_kernel_.run(id, start, end, str(k.kernel), layer ? std::optional<int64_t>(str(*layer)) : std::nullopt,
                  std::optional<int64_t>(str(phase)), step);
  bool inputs_finite = true;
  for (size_t s = 0; s < k.in.size(); ++s) {
    tensor(id, "in", static_cast<int>(s), k.in[s], false);
    inputs_finite = inputs_finite && !k.in[s].all_nan && !k.in[s].one_nan && !k.in[s].one_inf;
  }
  for (size_t s = 0; s < k.out.size(); ++s) tensor(id, "out", static_cast<int>(s), k.out[s], inputs_finite);
  t_ += 300;
}

void Writer::forward(int64_t step) {
  push("phase", "forward", step);
  TensorSpec x{alloc("batch", 6, 32 * 784 * bytes_of(low_), step), "input", low_, 32 * 784, 1.0, params_nan_};
  saved_.clear();
  saved_.emplace_back("data", x.uid);
  for (const auto& layer : layers()) {
    push("layer", layer.name, step);
    for (const auto& [kernel, elements] : layer.forward) {
      const bool fp32_op = amp_ && (std::string(layer.name) == "loss" || std::string(layer.name) == "norm");
      const int dtype = fp32_op ? 0 : low_;
      KernelSpec k{kernel, {x}, {}};
      for (const auto& [p, n] : layer.params) {
        if (std::string(kernel).find("relu") == std::string::npos) k.in.push_back({params_[p], p, low_, n, 0.5, params_nan_});
      }
      const bool plant = o_.nan_at_step && *o_.nan_at_step == step && std::string(layer.name) == "fc1" &&
                         std::string(kernel) == "linear_forward";
      TensorSpec y{alloc(std::string(layer.name) + "." + kernel, 3, elements * bytes_of(dtype), step),
                   std::string(layer.name) + ".out", dtype, elements, layer.magnitude * o_.activation_scale};
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
  ins_scalar_.run(t_ += 100, step, str("loss"), step_nan_ || params_nan_ ? std::optional<double>() : std::optional<double>(2.3 / (1.0 + 0.05 * step)));
  ins_scalar_.run(t_ += 100, step, str("train_accuracy"), 100.0 * (0.1 + 0.8 * (1.0 - 1.0 / (1.0 + 0.1 * step))));
  ins_scalar_.run(t_ += 100, step, str("lr"), 0.01);
  pop();
}

void Writer::backward(int64_t step) {
  push("phase", "backward", step);
  const double g = 1e-3 * (scaled_ ? scale_ : 1.0);
  const bool bad = step_nan_ || params_nan_;
  TensorSpec dy{alloc("grad_out", 3, 320 * bytes_of(low_), step), "dlogp", low_, 320, g, bad};
  const auto& ls = layers();
  for (auto it = ls.rbegin(); it != ls.rend(); ++it) {
    push("layer", it->name, step);
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
        TensorSpec dx{alloc(std::string(it->name) + "." + kernel, 3, 3200 * bytes_of(low_), step),
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
    if (live_.count(uid)) free_alloc(uid, step);
  }
  for (auto it = live_.begin(); it != live_.end();) {  // the backward temporaries
    auto next = std::next(it);
    if (std::get<1>(it->second) == 3) free_alloc(it->first, step);
    it = next;
  }
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
  std::string event = "unchanged";
  if (dynamic_) {
    if (found_inf) {
      scale_ *= 0.5, tracker_ = 0, event = "backoff";
    } else if (++tracker_ >= o_.growth_interval) {
      scale_ *= 2.0, tracker_ = 0, event = "growth";
    }
  }
  launch({"amp_update_scale", {scale, tracker, flag}, {scale, tracker}}, std::nullopt, "optimizer", step);
  ins_scale_.run(kernel_id_, t_, step, before, scale_, found_inf ? 1 : 0, found_inf ? 1 : 0, event, tracker_);
  return found_inf;
}

void Writer::optimizer(int64_t step) {
  push("phase", "optimizer", step);
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
      params_[p] = alloc(p, 0, n * bytes_of(low_), std::nullopt);
      if (amp_) alloc(p + ".master", 1, n * 4, std::nullopt);
      grads_[p] = alloc(p + ".grad", 2, n * bytes_of(low_), std::nullopt);
      momenta_[p] = alloc(p + ".momentum", 4, n * 4, std::nullopt);
      param_elements_[p] = n;
    }
  }
  params_["scaler.scale"] = alloc("loss_scale", 5, 4, std::nullopt);
  params_["scaler.tracker"] = alloc("growth_tracker", 5, 4, std::nullopt);
  params_["scaler.found_inf"] = alloc("found_inf", 5, 4, std::nullopt);
  for (int64_t step = 0; step < steps; ++step) {
    step_nan_ = step_inf_ = false;
    push("step", "step", step);
    forward(step);
    backward(step);
    optimizer(step);
    for (auto it = live_.begin(); it != live_.end();) {  // the batch
      auto next = std::next(it);
      if (std::get<1>(it->second) == 6) free_alloc(it->first, step);
      it = next;
    }
    pop();
  }
  ins_scalar_.run(t_ += 1000, std::optional<int64_t>(), str("test_accuracy"),
                  params_nan_ ? 10.0 : 84.0 - (low_ == 0 ? 0.0 : 0.4));
  return tensors_;
}

void exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "?";
    sqlite3_free(error);
    throw std::runtime_error(message);
  }
}

}  // namespace

int64_t write_trace(const std::string& path, const Options& options) {
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string message = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error(path + ": " + message);
  }
  int64_t tensors = 0;
  try {
    exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;");
    exec(db, embedded::kTraceSchemaSql);
    exec(db, "BEGIN");
    {
      int64_t steps = options.steps;
      if (options.tensor_target > 0) steps = std::max<int64_t>(1, options.tensor_target / kTensorsPerStep);
      Writer writer(db, options);
      Stmt meta(db, "INSERT INTO meta(key, value) VALUES (?,?)");
      const std::string command = "[\"mptrain\",\"--model\",\"cnn\",\"--precision\",\"" + options.precision +
                                  "\",\"--loss-scale\",\"" + options.loss_scale + "\"]";
      for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
               {"schema_version", "1"}, {"command", command}, {"config.model", "cnn"},
               {"config.precision", options.precision}, {"config.loss_scale", options.loss_scale},
               {"config.batch_size", "32"}, {"end_reason", options.end_reason},
               {"exit_code", options.end_reason == "exited" ? "0" : ""}, {"generator", "fpscope-gen-trace"}}) {
        if (!v.empty()) meta.run(k, v);
      }
      tensors = writer.run(steps);
    }
    exec(db, "COMMIT");
    if (options.finalize) {
      // The summaries sort every tensor record once: keep the sorter in memory where it fits.
      exec(db, "PRAGMA temp_store = MEMORY; PRAGMA cache_size = -1048576;");
      exec(db, "BEGIN");
      exec(db, embedded::kTraceFinalizeSql);
      exec(db, "COMMIT");
    }
    if (options.end_reason != "running") exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;");
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  sqlite3_close(db);
  return tensors;
}

}  // namespace fpscope::synthetic
