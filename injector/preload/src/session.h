// The tracing state of one traced process: its options, the ring it writes, interned strings,
// live allocations and launch numbering. The hooks and NVTX callbacks hand their calls to the one
// Session (see runtime.h); everything here runs with the real kernel library's call around it.
//
// Locking: one mutex guards the record writer (ring and string table) and the allocation map.
// Tensor statistics, finiteness scans and .npy files are computed before the lock is taken, so a
// launch holds the lock only while it copies its finished records into the ring.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "amax_history.h"
#include "device_results.h"
#include "fpscope/common/launcher_rank.h"
#include "fpscope/fp8_recipes.h"
#include "fpscope/tensor_stats.h"
#include "fpscope/contract/wire.h"
#include "mpt/abi.h"
#include "device_stats.h"
#include "options.h"
#include "output_memo.h"
#include "range_stack.h"
#include "record_writer.h"
#include "stats_workers.h"
#include "update_copies.h"

namespace fpscope::inject {

// The rank this process traces under, announced when its session starts: the one a front end set
// (set_process_rank: a rank torch.multiprocessing.spawn started learns it from
// init_process_group), else its launcher's (fpscope/common/launcher_rank.h).
common::LauncherRank process_rank();
void set_process_rank(const common::LauncherRank& rank, std::string source);

using LaunchFn = int (*)(const mpt_launch_desc*);

// One NVTX range as the callbacks decoded it.
struct RangeEvent {
  std::string_view message;
  uint32_t category = 0;
  uint32_t payload_kind = 0;  // 0 none, 1 int64, 2 double (as in wire::NvtxPushRecord)
  int64_t payload_i = 0;
  double payload_f = 0;
};

// A domain created through nvtxDomainCreateA; handles are never freed.
struct NvtxDomainInfo {
  std::string name;
  bool trainer = false;  // the "mptrain" domain
};

// One measured tensor of a launch.
struct Measurement {
  const mpt_tensor* tensor = nullptr;
  wire::Role role = wire::Role::Input;
  uint8_t slot = 0;
  TensorStats stats;
  bool allowed = false;   // an output whose NaN/Inf an allow rule covers (intended values)
  uint8_t intended_in = 0;  // an input: the kinds its last measured write made as intended values
  std::string dump_file;  // relative to FPSCOPE_DUMP_DIR, empty if not dumped
  // The fp8 recipe forecast, for the tensors FPSCOPE_RECIPES covers.
  bool has_recipes = false;
  contract::Operand operand = contract::Operand::Activation;
  RecipeResult recipes;
};

// The loss-scaler state around one amp_update_scale launch.
struct LossScaleProbe {
  bool valid = false;
  double scale_before = 0, scale_after = 0;
  int32_t tracker_after = 0;
  bool found_inf = false;
};

// Small per-process thread number, from 1, for record headers.
uint32_t this_thread_number();
// A number from the same sequence for a producer that is not one program thread (CUPTI's).
uint32_t new_thread_number();

// Text records whose key starts with this are the injector's own state, not the program's
// configuration: the collector stores them in meta under their key as is (injector.cupti_status).
inline constexpr const char* kInjectorStatusPrefix = "injector.";
int64_t monotonic_ns();

class Session {
 public:
  Session(Options options, std::unique_ptr<RecordSink> sink);

  const Options& options() const { return options_; }
  // Writes the Process record; the first record of the trace.
  void announce();
  // The last record of a process that exits normally (ProcessExit).
  void exiting();
  // Put before the names of this process's dump files, so that the processes of one run never
  // write the same file: "rank1-" for a ranked process, "pid<pid>-" for another unranked one.
  void set_dump_prefix(std::string prefix) { dump_prefix_ = std::move(prefix); }

  // `library_abi`: the newest descriptor version the real kernel library takes (mpt_abi_version);
  // from 2 on, a measured host launch asks it for its launch report (mpt/abi.h).
  int launch(const mpt_launch_desc* launch, LaunchFn real, uint32_t library_abi = 1);
  // `remembered`: statistics of tensors in it may be reused (output_memo.h). `made_in_backward`
  // (a front end's memory, for the fp8 forecast): whether it appeared in a backward phase.
  void allocated(void* ptr, size_t bytes, int32_t device, int32_t category, const char* name, uint64_t id,
                 bool remembered = true, std::optional<bool> made_in_backward = std::nullopt);
  void freed(void* ptr);
  // The program wrote these bytes itself (mpt_host_written, fpscope_memory_written).
  void host_written(const void* data, size_t bytes);
  // Memory anywhere may have been written unseen (fpscope_memory_written(NULL, ...)).
  void written_anywhere();
  // Whether inputs may take an earlier output's statistics (output_memo.h).
  bool reuses_statistics() const { return memo_on_.load(std::memory_order_relaxed); }
  // A front end declares that it reports every write its ops' tensors do not show
  // (fpscope_report_writes); returns whether reuse is on. Without it, its first op turns reuse off.
  bool front_end_reports_writes() {
    front_end_reports_writes_.store(true, std::memory_order_relaxed);
    return reuses_statistics();
  }
  // No more reuse in this process (fpscope_stop_reuse); what was remembered is forgotten.
  void stop_reuse();
  void log_scalar(const char* name, double value, int64_t step);
  void log_text(const char* key, const char* value);
  // A front end's parameter update (fpscope_param_update), as a ParamUpdate record of no launch.
  void param_update(const char* name, int32_t dtype, int64_t step, uint64_t elements, uint64_t changed,
                    int64_t nonzero, int64_t lost, double applied_abs_sum, double applied_sq_sum,
                    double weight_sq_sum);
  // A front end's parameters copied before an optimizer step (fpscope_update_before/after).
  UpdateCopies& update_copies() { return update_copies_; }

  // Operations a front end runs itself (fpscope/inject_api.h, front_end_ops.cpp).
  struct ForeignOp;
  int plan_op(const char* kernel);
  ForeignOp* begin_op(const char* kernel, const mpt_tensor* inputs, int32_t n_inputs,
                      const uint8_t* written, bool measure);
  // Ends `op`, which the caller must not use again (it is kept for a later op on this thread);
  // returns FPSCOPE_TRAPPED with the message in *trapped, or 0.
  int end_op(ForeignOp* op, const mpt_tensor* outputs, int32_t n_outputs, int32_t status,
             std::string* trapped);
  // Takes back an op that can no longer be ended (tracing stopped between its begin and its end);
  // the caller must not use it again.
  static void discard_op(ForeignOp* op);
  // Memory a front end saw appear, with an id of the session's own; and what it turned out to hold.
  uint64_t allocation_seen(const void* ptr, uint64_t bytes, int32_t device, int32_t category,
                           const char* name);
  void relabel(uint64_t id, int32_t category, const char* name);
  // Whether any op of optimizer step `step` may be measured (step filters, --dump).
  bool watches_step(int64_t step) const;

  // NVTX on the calling thread; the return values are what NVTX hands back to the program.
  int range_push(const NvtxDomainInfo* domain, const RangeEvent& event);
  int range_pop(const NvtxDomainInfo* domain);
  void mark(const NvtxDomainInfo* domain, const RangeEvent& event);
  // A front end's ranges (fpscope_range_push) describe the program, not one thread: its ops may
  // run on threads working for the program's (the autograd engine's device threads in backward),
  // so they share one stack, recorded as the ranges of the thread that opened the first. A front
  // end's op takes its step, phase and layer from that stack while it holds any range, else from
  // the calling thread's NVTX ranges.
  int front_end_range_push(const NvtxDomainInfo* domain, const RangeEvent& event);
  int front_end_range_pop(const NvtxDomainInfo* domain);

  // A Text record "injector.<name>" = value: how the injector itself fared (meta, see schema.md).
  void injector_status(const std::string& name, const std::string& value);
  // For producers outside the hooks (CUPTI's threads): interning and publishing a record that is
  // already framed (header type, slots and thread filled in), both under the producer mutex.
  uint32_t intern_string(std::string_view text, uint32_t thread);
  void publish_framed(const wire::RecordHeader* record);

  uint64_t launches() const { return next_seq_.load(std::memory_order_relaxed) - 1; }
  // Nanoseconds the program's threads spent in the injector around their launches and a front
  // end's ops (measuring tensors, the loss scale, writing the records): what tracing held them up.
  uint64_t own_ns() const { return own_ns_.load(std::memory_order_relaxed); }
  // Inputs that took an earlier output's statistics instead of a scan (output_memo.h), on the
  // host or the device, the device inputs that took a result still on its way included.
  uint64_t reused_inputs();

  // Replaces how libfpscope_gpu.so is found (tests hand in a fake one).
  void set_gpu_loader(GpuLoader loader) { gpu_loader_ = std::move(loader); }
  // Hands every finished device measurement to the ring; with wait, first waits for all. A
  // result that trapped stops the program.
  void poll_device(bool wait);
  // The program is exiting: waits, for at most 5 s, for the device measurements still in flight
  // and writes them (a NaN or Inf among them is recorded as any other, and traps nothing: the
  // program has ended).
  // Runs from an exit handler registered when libfpscope_gpu.so is loaded, after the program's
  // first CUDA call, so before the CUDA runtime's own exit handler.
  void device_results_at_exit(std::chrono::milliseconds deadline = std::chrono::seconds(5)) noexcept;
  // The session of this process (runtime.cpp), whose device results the exit handler collects;
  // sessions of tests are never it.
  static void set_process_session(Session* session);

 private:
  struct Allocation {
    uint64_t id;
    uint64_t bytes;
  };
  // What a front end's allocation holds, for telling a matrix product's operands apart: its
  // category (relabelled as the front end learns it) and whether it appeared in a backward phase.
  struct Origin {
    int32_t category = 0;
    bool made_in_backward = false;
    bool weight_copy = false;  // a copy of a weight (contract::is_weight_copy)
    bool holds_weight() const { return category == MPT_CAT_WEIGHT || category == MPT_CAT_MASTER_WEIGHT || weight_copy; }
  };
  std::unordered_map<uint64_t, Origin> origins_;  // by allocation id, under mutex_
  // Which operand a front end's tensor of allocation `id` is (kMatrixOperators' rule).
  contract::Operand operand_of(uint64_t id);
  // The outputs of a copy hold what allocation `from` holds, for operand_of.
  void inherit_origin(uint64_t from, const std::vector<mpt_tensor>& outputs);
  struct LaunchPlan;
  struct LaunchState;
  uint32_t intern_locked(std::string_view text) { return writer_.intern(text, this_thread_number()); }
  uint32_t domain_id_locked(const NvtxDomainInfo* domain);

  // The launch path (launch.cpp; its records: launch_records.cpp).
  LaunchPlan plan(const mpt_launch_desc* d, const Attribution& where);
  void measure(const mpt_launch_desc* d, const LaunchPlan& p, wire::Role role,
               std::vector<Measurement>* out);
  bool inputs_finite(const mpt_launch_desc* d, const LaunchPlan& p,
                     const std::vector<Measurement>& measured) const;
  void dump_tensor(const LaunchPlan& p, Measurement* m);
  // The recipe forecast of a measured tensor, when FPSCOPE_RECIPES covers it (recipes.cpp).
  void forecast_recipes(const LaunchPlan& p, Measurement* m);
  void write_launch_records(const mpt_launch_desc* d, const LaunchPlan& p, const Attribution& where,
                            const std::vector<Measurement>& measured, bool inputs_finite,
                            const LossScaleProbe& probe, const mpt_launch_report* report = nullptr);
  void write_tensor_records(uint64_t seq, const Measurement& m, bool inputs_finite,
                            const mpt_launch_report* report);
  // Statistics of one tensor: remembered ones for an input the memo vouches for, else a scan
  // (remembered afterwards for an output).
  void measure_tensor(const LaunchPlan& p, wire::Role role, const mpt_tensor& t, TensorStats* out,
                      uint8_t* intended_in);
  // A launch is about to write its outputs: the memo forgets what it held of their bytes.
  void outputs_written(const mpt_launch_desc* d);
  void tensor_written(const mpt_tensor& t);
  // Around the kernel: inputs (and the loss scale) before it, outputs and the records after it.
  // `written` (may be null) marks the inputs the kernel overwrites when its outputs are not known
  // yet. after_kernel returns the trap message when this launch trapped (its record is written).
  void before_kernel(const mpt_launch_desc* d, const uint8_t* written, LaunchState* state);
  std::string after_kernel(const mpt_launch_desc* d, LaunchState* state);
  // The loss scaler's update: its scale and found_inf before the kernel, its scale and growth
  // tracker after, read on the host or, for device tensors, through the GPU library (which waits
  // for the launch's stream). A read that fails leaves the launch without a LossScale record.
  template <typename T>
  bool read_scalar(const mpt_tensor& t, void* stream, T* out);
  void probe_loss_scale_before(const mpt_launch_desc* d, LaunchPlan& p, LossScaleProbe* probe);
  void probe_loss_scale_after(const mpt_launch_desc* d, const LaunchPlan& p, LossScaleProbe* probe);
  std::string trap_message(const LaunchPlan& p, const Attribution& where,
                           const std::vector<Measurement>& measured) const;
  void trap(uint64_t seq, const std::string& message);
  bool record_trap(uint64_t seq, const std::string& message);
  [[noreturn]] void raise_trap(const std::string& message);

  // Device tensors (device_launch.cpp).
  const fpscope_gpu_api* gpu();
  int launch_on_device(const mpt_launch_desc* d, LaunchState* state, int64_t entered, LaunchFn real);
  // Around a kernel (or a front end's op) on device tensors: its tensors are queued on the launch's
  // stream for the GPU library before and after it; the records are written after it, the
  // statistics when their results arrive.
  void before_device_kernel(const mpt_launch_desc* d, LaunchState* state);
  // As poll_device(); during a front end's op a result that trapped is held in `state` for the
  // op's end to hand back.
  void poll_device(bool wait, LaunchState* state);
  // Returns the trap message when this launch trapped on a host output (its record is written).
  std::string after_device_kernel(const mpt_launch_desc* d, LaunchState* state);
  // A launch with device results to come: its place for a trap message; then, once its Launch
  // record is written, the results that came early are written too.
  void device_launch_begins(uint64_t seq, const char* kernel, const Attribution& where);
  void device_launch_written(uint64_t seq, bool host_inputs_finite);
  // Waits for the device results queued so far; false if a device input of the launch holds a
  // NaN/Inf of a kind no allow rule permits.
  bool device_inputs_finite(LaunchState* state);
  // Collects finished device results; returns the trap message one raised (and its launch)
  // instead of trapping. poll_device() traps with it.
  std::string collect_device(bool wait, uint64_t* seq);
  // For a front end's op: a trap held for it, or, with --trap, the one its results raise (it waits
  // for them): FPSCOPE_TRAPPED with the message, so that the front end raises in the program; else 0.
  int front_end_device_trap(LaunchState* state, std::string* trapped);
  void submit_device(const mpt_launch_desc* d, const LaunchPlan& p, wire::Role role, bool recorded);
  // A device input's statistics without a scan: remembered, or an output's result still on its
  // way (the input then follows it). False: it must be scanned.
  bool reuse_on_device(DeviceResults::Tensor* queued, const OutputMemo::Key& key);
  static void on_device_result(uint64_t token, const TensorStats* stats, void* session);
  void device_result_locked(DeviceResults::Tensor t, const TensorStats& stats);

  Options options_;
  // The kinds some allow rule permits anywhere (common::allowed_kinds): values of only these
  // kinds pass through a kernel as intended values, not as non-finite input.
  uint8_t intended_kinds_ = 0;
  std::string dump_prefix_;
  std::unique_ptr<RecordSink> sink_;
  StatsWorkers stats_workers_;  // share large tensors' scans (FPSCOPE_STATS_THREADS)
  OutputMemo memo_;             // outputs' statistics, reused for unchanged inputs
  AmaxHistory amax_history_;    // delayed scaling's history, per quantized tensor
  RecipeMemo recipe_memo_;      // the last forecasts, for launches reading the same unwritten bytes
  UpdateCopies update_copies_;
  // Off with --rescan-inputs, and from a front end's first op on: a front end reports neither
  // every write nor every output, so the memo could not vouch for anything.
  std::atomic<bool> memo_on_{true};
  std::atomic<bool> front_end_reports_writes_{false};  // fpscope_report_writes was called
  std::mutex mutex_;
  RecordWriter writer_;
  // The front end's ranges (front_end_range_push); its mutex is taken before mutex_, never after.
  std::mutex front_end_mutex_;
  RangeStack front_end_ranges_;
  uint32_t front_end_thread_ = 0;  // the thread number its range records carry
  // The attribution of a front end's op begun now, its names copied into *phase and *layer.
  Attribution front_end_attribution(std::string* phase, std::string* layer);
  int push_range(RangeStack& stack, uint32_t thread, const NvtxDomainInfo* domain, const RangeEvent& event);
  int pop_range(RangeStack& stack, uint32_t thread, const NvtxDomainInfo* domain, bool* collect);
  std::unordered_map<const void*, Allocation> live_;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> own_ns_{0};  // own_ns()
  void add_own_time(int64_t ns) { own_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed); }
  // Ids of allocations a front end reports; far above any id the kernel library hands out.
  std::atomic<uint64_t> next_seen_id_{uint64_t{1} << 48};
  std::atomic<bool> trapped_{false};

  GpuLoader gpu_loader_ = load_gpu_library;
  std::once_flag gpu_once_;
  const fpscope_gpu_api* gpu_ = nullptr;
  std::atomic<bool> scalar_read_failed_{false};  // a device scalar could not be read (said once)
  // Under mutex_:
  DeviceResults device_results_;  // under mutex_
  // Device outputs whose result is on its way, by their bytes' address: the token to follow.
  std::unordered_map<const void*, uint64_t> device_outputs_in_flight_;
  uint64_t device_inputs_followed_ = 0;  // inputs that took an output's result on its way
  uint64_t trap_seq_ = 0;
  std::string trap_message_;  // a device result asked for a trap, raised after the poll
};

}  // namespace fpscope::inject
