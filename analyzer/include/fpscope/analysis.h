// libfpscope_analysis: the one place where fpscope turns a trace (an SQLite file written by
// `fpscope run`, schema in contract/schema/trace_schema.sql) into numbers. The command line
// (`fpscope report|compare|advise|export|query`) and fpscope-gui are thin front ends over this API,
// so both always show the same values.
//
// Usage:
//   auto trace = fpscope::analysis::Trace::open("runs/fp16.sqlite");   // throws TraceError
//   RunSummary s = summary(*trace);
//   NonfiniteReport nf = nonfinite(*trace);
//
// Threads: a Trace may be opened on one thread (a background loader, with a progress callback that
// can cancel) and used on another. Its connection is serialized, so calls from several threads are
// safe but run one at a time; Trace::interrupt() stops a long call from any thread.
//
// Speed: reports read the summary tables that contract/schema/trace_finalize.sql adds when a run
// ends. When they are absent (a trace still being written, a collector that was killed), open()
// computes the same tables into temporary tables of its own connection, which scans the trace once.
//
// Conventions: times in integer nanoseconds (the traced process's monotonic clock); std::nullopt
// where the trace has NULL (unknown or not measured), never zero.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/contract/embedded_sql.h"

namespace fpscope::analysis {

// [SECTION] Versions and formats ------------------------------------------------------------------

// PRAGMA application_id as trace_schema.sql sets it: 0x46505343, "FPSC".
inline constexpr int32_t kApplicationId = embedded::kTraceApplicationId;
inline constexpr int kOldestSchemaVersion = 1;                                // oldest schema this library reads
inline constexpr int kNewestSchemaVersion = embedded::kTraceSchemaVersion;  // the one this build writes

// The narrower formats whose cast outcome a trace counts, in the schema's column order (the
// trace contract's list: fpscope/contract/number_formats.h).
using Format = contract::CastFormat;
inline constexpr int kFormatCount = contract::kCastFormatCount;

struct FormatLimits {
  const char* name;          // "fp16", "bf16", "fp8-e4m3", "fp8-e5m2"
  const char* column;        // column prefix in `tensors`: "f16", "bf16", "e4m3", "e5m2"
  double max_finite;         // largest finite value
  double min_normal;         // smallest positive normal value
  double min_subnormal;      // smallest positive subnormal value
};
const FormatLimits& format_limits(Format format);

// Powers of two between a magnitude and a format's edge: headroom below its largest finite value
// (negative: beyond it) and footroom above its smallest subnormal (negative: flushes to zero).
// nullopt for a missing, zero or negative magnitude.
std::optional<double> headroom_log2(std::optional<double> absmax, Format format);
std::optional<double> footroom_log2(std::optional<double> min_nonzero, Format format);

// The memory categories of the kernel library (table `categories`), in id order.
inline constexpr int kCategoryCount = contract::kMemoryCategoryCount;
inline constexpr const auto& kCategoryNames = contract::kMemoryCategoryNames;

// The trainer's op name ("conv2d", "linear", ...) of a kernel ("conv2d_backward_data"), or "" for
// kernels that no precision list governs (cast, fill, optimizers, the loss scaler, ...).
std::string op_of_kernel(std::string_view kernel);

// Every op name the trainer's precision lists accept that its model uses, in model order.
const std::vector<std::string>& model_op_names();

// [SECTION] Errors ---------------------------------------------------------------------------------

// Why a trace could not be read. Each kind has its own process exit code (docs/cli.md).
enum class TraceErrorKind {
  NotFound,      // no such file, or it cannot be read                       exit 3
  NotSqlite,     // the file is not an SQLite database                       exit 4
  NotATrace,     // an SQLite database, but not an fpscope trace             exit 5
  NewerSchema,   // written by a newer fpscope than this one reads          exit 6
  Corrupt,       // truncated or damaged                                     exit 7
  Query,         // an SQL statement failed or was refused (query verb)      exit 8
  Cancelled,     // the progress callback or interrupt() stopped the call   exit 130
  NoSuchRank,    // OpenOptions::rank names a rank the trace does not hold   exit 2
};
int exit_code_of(TraceErrorKind kind);

class TraceError : public std::runtime_error {
 public:
  TraceError(TraceErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  TraceErrorKind kind() const { return kind_; }

 private:
  TraceErrorKind kind_;
};

// [SECTION] Opening a trace ------------------------------------------------------------------------

struct LoadProgress {
  std::string stage;    // what is being done: "validating", "computing summaries", ...
  double fraction = 0;  // 0..1 over the whole open, rough
};
// Return false to cancel: open() then throws TraceError(Cancelled).
using ProgressCallback = std::function<bool(const LoadProgress&)>;

struct OpenOptions {
  ProgressCallback progress;
  // Compute the summary tables into temporary tables when the trace lacks them. With false, the
  // report functions still work but run live aggregates over the whole trace each time.
  bool build_missing_summaries = true;
  // Only this rank of a multi-process trace: every table, view, summary and report then reads that
  // rank's rows alone (temporary views of the same names filter them), as if it were traced alone.
  std::optional<int32_t> rank;
};

// How the traced run ended: the trace contract's endings (fpscope/contract/run_end.h), read from
// meta end_reason and exit_code; a trace still 'running' whose collector no longer runs is
// CollectorLost. contract::label() names an ending, contract::is_failure() says how to show it.
using RunEnd = contract::RunEnd;

// A single cell of a query result.
using Value = std::variant<std::monostate, int64_t, double, std::string>;
std::string value_text(const Value& value);  // "" for NULL, shortest round-trip for doubles

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
  bool truncated = false;  // more rows existed than max_rows
};

class Trace {
 public:
  // Opens read-only and validates: an SQLite file, application_id, a meta table, a schema version
  // this library reads, the tables and columns the reports need, a file not shorter than its
  // header says. Throws TraceError with a message that says what is wrong and what to do.
  static std::unique_ptr<Trace> open(const std::string& path, const OpenOptions& options = {});
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  const std::string& path() const;
  int schema_version() const;
  RunEnd state() const;
  // The run had not ended when the trace was read: it is still being written (Running) or its
  // collector died (CollectorLost).
  bool unfinished() const { return contract::is_unfinished(state()); }
  // True when the summary tables were written by trace_finalize.sql (not computed at open).
  bool summaries_precomputed() const;
  const std::map<std::string, std::string>& meta() const;
  std::optional<std::string> meta_value(std::string_view key) const;

  // Runs one read-only SQL statement. Writing statements are refused (TraceError Query), as is
  // more than one statement. max_rows 0: no limit.
  QueryResult query(std::string_view sql, std::size_t max_rows = 0) const;

  // Stops the call running on another thread; it throws TraceError(Cancelled).
  void interrupt() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Trace(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// [SECTION] Summary --------------------------------------------------------------------------------

struct RunSummary {
  std::string path;
  int schema_version = 0;
  std::string command;                                       // meta `command`
  std::vector<std::pair<std::string, std::string>> config;   // meta config.*, prefix removed
  std::string precision;                                     // config.precision, "" if absent
  RunEnd state = RunEnd::Unknown;
  std::string end_reason;                                    // meta end_reason verbatim
  std::optional<int64_t> collector_pid;                      // meta collector_pid: the `fpscope run` that wrote it
  std::optional<int64_t> exit_status;                        // meta exit_code
  std::optional<int64_t> signal;                             // meta signal_number
  std::string signal_name;                                   // meta signal ("SIGKILL")
  std::string trap;                                          // meta trap.message: what --trap stopped the run at
  bool measured_a_selection = false;                         // meta options: --every, --steps or --ops given
  int64_t steps = 0;                                         // training steps (the tail left out)
  // A step range after the last optimizer step (what the program did after training: PyTorch's
  // front end opens the next step when one ends): its number, not counted in `steps`.
  std::optional<int64_t> tail_step;
  int64_t ranks = 1;                                         // ranks traced (processes of a multi-process run)
  std::optional<int64_t> first_step, last_step;
  std::optional<int64_t> start_ns, end_ns;                   // first and last event
  int64_t kernels = 0, sampled_kernels = 0, tensors = 0, nonfinite_tensors = 0;
  int64_t allowed_nonfinite_tensors = 0;  // intended NaN/Inf an allow rule covers (not in nonfinite_tensors)
  int64_t memory_events = 0;
  std::optional<double> final_loss;                          // last finite 'loss' scalar
  std::optional<int64_t> final_loss_step;
  // Steps after final_loss_step (all steps when there is none) whose loss was NaN (stored NULL)
  // or +-Inf, and the first of them.
  int64_t nonfinite_loss_steps = 0;
  std::optional<int64_t> first_nonfinite_loss_step;
  std::optional<double> final_train_accuracy;                // last 'train_accuracy' (percent, as mptrain logs it)
  std::optional<double> test_accuracy;                       // last 'test_accuracy' (percent)
  // Milliseconds the program's threads spent in the injector around launches and ops (meta
  // injector.own_time_ms): of the process that spent the most, in a trace of several.
  std::optional<double> tracing_own_ms;
  // CPU milliseconds `fpscope run`'s own process used on the trace, draining the rings, storing
  // the records and making the summaries (meta collector_cpu_ms); none for a trace it did not
  // finish.
  std::optional<double> collector_cpu_ms;
  // Why the trace lacks records `fpscope run` received (meta trace_incomplete, incomplete_at_step,
  // records_not_stored), "" when it holds them all: "the disk filled at step 51 (33,144 records
  // were not stored)". The numbers then cover what the trace holds.
  std::string incomplete;
  // Why tracing stopped early in a process (meta injector.failure[.process<N>]), "" if it did not:
  // "fpscope_op_begin: std::bad_alloc".
  std::string tracing_failure;
};
RunSummary summary(const Trace& trace);

// How the run ended, in words, with its exit code or signal: "stopped by --trap at a non-finite
// value (signal SIGTRAP, 5)". Every front end shows this, coloured by contract::is_failure(state).
std::string ending_text(const RunSummary& s);
// The steps in words: "80 (0 .. 79)", "80 (0 .. 79), then the tail (step 80: after the last optimizer
// step)"; "0" without steps.
std::string steps_text(const RunSummary& s);
// The final loss in words: "0.7743 (step 187)", or when the loss turned NaN/Inf for good,
// "2.217 (step 2), then NaN/Inf from step 3 on (17 steps)"; "-" when no loss was logged.
std::string final_loss_text(const RunSummary& s);
// What the report says when no measured output held NaN/Inf: that none did, or why the trace cannot
// tell (no tensor was measured; the loss went NaN/Inf where no measured launch did).
std::string no_nonfinite_text(const RunSummary& s);
// What tracing cost the run, a line for each figure the trace has: the injector's own time on the
// program's threads, with its share of the run's duration ("12.6 ms on the program's threads
// around launches (8.3% of the duration)"), and the collector's CPU time. Every front end shows
// these lines.
struct TracingCost {
  std::string label;  // "tracing's own time", "collector's CPU time"
  std::string text;
  double ms = 0;
};
std::vector<TracingCost> tracing_cost(const RunSummary& s);

// [SECTION] Non-finite values ----------------------------------------------------------------------

struct NonfiniteEvent {
  int64_t kernel_id = 0;   // launch sequence number
  int64_t tensor_id = 0;
  std::string kernel, op;  // op: op_of_kernel(kernel)
  std::optional<std::string> layer, phase;
  std::optional<int64_t> step;
  std::string tensor;      // tensor name
  std::string dtype;
  std::string shape;       // JSON array text
  std::string kind;        // of the first one: "nan", "+inf", "-inf"
  int64_t first_index = 0; // flat, row-major
  int64_t first_bits = 0;
  bool origin = false;     // all inputs finite: this kernel made it
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;  // in the whole tensor
  int64_t start_ns = 0;
  int32_t rank = 0;        // of the process that launched it
  // Whether the kernel's own measured inputs were all finite; nullopt when none was measured.
  // Filled for NonfiniteReport::first_origin (it tells a collective's received value from its own).
  std::optional<bool> inputs_finite;
};

// How the first non-finite output of a run came to be, as the reports word it.
enum class FirstNonfinite {
  Made,                    // origin: the kernel made it from finite inputs
  ReceivedFromAnotherRank, // a collective whose own inputs were finite: another rank's input held it
  ReceivedOrOwnInput,      // a collective whose inputs were not measured: either
  Returned,                // no origin measured: an input held it, or was not measured
};
FirstNonfinite how_it_came(const NonfiniteEvent& e);
// "made by", "received from another rank by", ...: the words between the value's kind and the
// kernel in "first nan made by conv2d_forward" (the HTML report, the GUI).
const char* how_it_came_words(FirstNonfinite how);

struct NonfiniteByKernel {
  std::string kernel, op;
  std::optional<std::string> layer;
  int64_t tensors = 0;     // output tensors holding NaN/Inf
  int64_t origins = 0;     // of which this kernel made the first
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;  // values
  std::optional<int64_t> first_step;
  int64_t first_kernel_id = 0;
};

// NaN/Inf an allow rule covers (an attention mask's -inf): counted apart from every other count
// of non-finite values, which leaves them out.
struct IntendedNonfinite {
  int64_t tensors = 0;                        // output tensors holding them
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;  // values over those tensors
  std::vector<std::string> made_by;           // ops whose outputs made them from finite inputs, first first
  int64_t values() const { return nan + pos_inf + neg_inf; }
};
IntendedNonfinite intended_nonfinite(const Trace& trace);
// "10,321,920 intended -Inf (masked_fill) in 160 output tensors (...)"; "" when there are none.
// Every front end shows this line where it shows the counts of NaN/Inf.
std::string intended_text(const IntendedNonfinite& intended);

struct NonfiniteReport {
  std::optional<NonfiniteEvent> first_origin;
  // How the first origin spread, in launch order: each launch that received a tainted tensor (by
  // tensor id when the trace has them, otherwise every later non-finite output of the same step)
  // and passed NaN/Inf on. Capped at max_chain entries.
  std::vector<NonfiniteEvent> propagation;
  bool propagation_truncated = false;
  std::vector<NonfiniteByKernel> by_kernel;  // most values first
  int64_t tensors = 0, origins = 0;
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;  // values over all output tensors, intended ones left out
  std::optional<int64_t> first_step;          // step of the first non-finite output
  IntendedNonfinite intended;
};
NonfiniteReport nonfinite(const Trace& trace, std::size_t max_chain = 64);

// [SECTION] Value ranges ---------------------------------------------------------------------------

struct FormatOutcome {
  bool measured = false;   // false when the trace has --stats basic (NULL columns)
  int64_t overflow = 0, underflow = 0, subnormal = 0, near_max = 0;  // values
  double overflow_share = 0, underflow_share = 0, subnormal_share = 0, near_max_share = 0;
};

enum class RangeGrouping { LayerKernel, Layer, Kernel, Op };
enum class RoleFilter { Outputs, Inputs, Both };

struct RangeRow {
  std::string kernel;                // "" when grouped by layer only
  std::string op;                    // op_of_kernel, or the op when grouped by op
  std::optional<std::string> layer;  // nullopt: outside any layer range (or grouped by kernel)
  std::string role;                  // "out", "in" or "both"
  int64_t tensors = 0, elements = 0;
  int64_t nan = 0, inf = 0, zero = 0;        // NaN and Inf no allow rule covers
  int64_t intended = 0;                      // NaN/Inf an allow rule covers
  std::optional<double> absmax, min_nonzero;
  std::optional<int> absmax_exponent;        // floor(log2(absmax))
  std::optional<double> headroom_f16_log2;   // log2(65504 / absmax); < 0 overflows
  std::optional<double> headroom_bf16_log2;  // log2(bf16 max / absmax)
  std::optional<double> footroom_f16_log2;   // log2(min_nonzero / 2^-24); < 0 flushes to zero
  std::array<FormatOutcome, kFormatCount> formats;
};
// Side outputs of forward-phase kernels (a normalisation's saved mean and reciprocal deviation,
// pooling's argmax: contract::kMainOutputSlot) are not the layer's activation. Apart: a row counts
// their NaN/Inf and nothing else of them; Included: they count as any output.
enum class SideOutputs { Apart, Included };
std::vector<RangeRow> ranges(const Trace& trace, RangeGrouping grouping = RangeGrouping::LayerKernel,
                             RoleFilter roles = RoleFilter::Outputs, SideOutputs side_outputs = SideOutputs::Apart);

// What a range view shows, by the question a user asks of it. Backward outputs carry the loss
// scale, so mixing phases would colour every layer of a loss-scaled run by its scaled gradients.
enum class RangeView {
  Activations,        // outputs of forward-phase kernels, by layer (the default)
  GradientsScaled,    // outputs of backward-phase kernels as stored, by layer: what overflows
  GradientsUnscaled,  // the same divided by the step's loss scale: what the gradients are
  Weights,            // weights and master weights the optimizer wrote, by parameter tensor
  OptimizerState,     // optimizer state the optimizer wrote (momentum, Adam moments), by tensor
};
inline constexpr int kRangeViewCount = 5;
struct RangeViewInfo {
  RangeView view;
  const char* key;     // on the command line: --view KEY
  const char* title;   // heading and legend: what the cells are
  const char* short_title;  // the same in a few words, for narrow places
  const char* rows;    // what a row is: "layer" or "tensor"
};
const RangeViewInfo& range_view_info(RangeView view);
std::optional<RangeView> parse_range_view(std::string_view key);

// Range of each row (a layer, or a parameter tensor for Weights and OptimizerState) at each step,
// for heat maps. Rows appear in the order they first appear; cells in step order.
struct LayerStepCell {
  std::string layer;  // the row: a layer name, or a tensor name (range_view_info(view).rows)
  int64_t step = 0;
  std::optional<double> absmax, min_nonzero;
  int64_t nonfinite = 0;
};
std::vector<LayerStepCell> layer_step_ranges(const Trace& trace, RangeView view = RangeView::Activations);

// The same cells gathered per row over every step: the range section of `fpscope report --view`.
struct ViewRangeRow {
  std::string row;                          // layer or tensor, in first-seen order
  int64_t steps = 0;                        // steps with a cell
  std::optional<double> absmax, min_nonzero;
  std::optional<double> headroom_f16_log2;  // log2(fp16 max / absmax); < 0: beyond fp16
  std::optional<double> footroom_f16_log2;  // log2(min_nonzero / fp16 smallest subnormal); < 0 flushes
  int64_t nonfinite = 0;
};
std::vector<ViewRangeRow> view_ranges(const Trace& trace, RangeView view = RangeView::Activations);
std::vector<ViewRangeRow> view_ranges(const std::vector<LayerStepCell>& cells);  // the same from cells at hand

// [SECTION] Steps and loss scale -------------------------------------------------------------------

struct StepRow {
  int64_t step = 0;
  std::optional<int64_t> start_ns, end_ns;
  std::optional<double> loss, train_accuracy, lr;
  std::optional<double> loss_scale;    // scale in force during the step
  bool skipped = false;                // the optimizer step was skipped
  int64_t nan_values = 0, inf_values = 0;  // in outputs, intended values left out
  int64_t intended_values = 0;             // NaN/Inf an allow rule covers
};
std::vector<StepRow> steps(const Trace& trace);

struct LossScaleEvent {
  int64_t kernel_id = 0;
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  double scale_before = 0, scale_after = 0;
  bool found_inf = false, skipped = false;
  std::string event;  // "growth", "backoff", "unchanged"
  int64_t growth_tracker = 0;
};

struct LossScaleReport {
  bool used = false;                     // any amp_update_scale launch
  std::vector<LossScaleEvent> events;    // in time order
  int64_t updates = 0, skipped_steps = 0, growths = 0, backoffs = 0;
  std::vector<int64_t> skipped_step_numbers;
  std::optional<double> initial_scale, final_scale, min_scale, max_scale;
};
// Of a multi-rank trace, the lowest rank's loss scaler (ranks(): whether the others agreed).
LossScaleReport loss_scale(const Trace& trace);

// [SECTION] Why: the causes behind the first NaN/Inf and behind skipped steps --------------------
//
// Walks back from the first origin: for each floating input of a launch, the measured launch that
// last wrote that tensor (same allocation, latest earlier output) and how its range moved there
// against the tensor's previous version; unusual moves are followed on through the writer's
// inputs. Everything comes from the trace; where it cannot tell (no allocation id, writers left
// unmeasured by --every/--steps/--ops), the link says so instead of guessing.

struct CauseLink {
  int depth = 0;                       // 0: an input of the origin; 1: an input of that writer; ...
  int64_t reader_kernel_id = 0;        // the launch that read the tensor
  std::string tensor;
  std::optional<int64_t> tensor_uid;
  std::optional<int64_t> writer_kernel_id, writer_step, writer_tensor_id;
  std::string writer_kernel;
  std::optional<std::string> writer_layer, writer_phase;
  std::optional<double> absmax_before, absmax_after, min_nonzero_before, min_nonzero_after;
  int64_t zero_before = 0, zero_after = 0, count = 0;
  std::optional<double> jump_log2;     // log2(absmax after / absmax before)
  std::string note;                    // what is unusual, or why the walk stops here
};

enum class CauseKind {
  LossScale, OptimizerStep, UnderflowIntoDivision, NonfiniteData, OpFromOrdinaryInputs, SkippedStep,
  NotMeasured,  // the walk stopped at writers the trace did not measure: it cannot tell
  RangeJump,    // an input's range jumped at its writer, for no reason the trace names
  OutsideDomain,  // sqrt, log, acos, ... read values where the function is not defined
  ZeroVarianceNorm,  // a normalisation of rows with no variance whose eps is 0 (or too small to count)
};
const char* cause_kind_name(CauseKind kind);  // "loss_scale", "optimizer_step", ... (JSON)
const char* cause_label(CauseKind kind);      // "loss scale too high", ... (for people)

struct Cause {
  CauseKind kind = CauseKind::OpFromOrdinaryInputs;
  std::string summary;                 // one sentence with the numbers
  std::string advice;                  // one line: what to change
  std::optional<int64_t> kernel_id, tensor_id, step;  // the evidence to select
  std::string subject;                 // what it is about, in a few words ("fc1.weight (2^12.6 at step 0)")
};

// A range heading for fp16's edge, and the step where it would cross fp16's largest value if it
// kept growing as it did over the row's last measured steps. How a range grows, as the fitted steps support it: by a factor a step (a straight line through
// log2 of the range: activations feeding on themselves, a loss scale too high) or by an amount a
// step (a straight line through the values: a bias under Adam moves about the learning rate a
// step). The exponential model is taken only when its squared error, measured in log2 over the
// fitted steps, is at most kExponentialFitMargin of the straight line's.
enum class GrowthModel { Exponential, Linear };
inline constexpr double kExponentialFitMargin = 0.5;
// A trend is forecast only while it lasts: the last quarter of the fitted steps must rise at this
// share of the fitted rate or more.
inline constexpr double kRecentRateShare = 0.5;
struct RangeForecast {
  RangeView view = RangeView::Activations;
  std::string row;                       // layer or tensor
  bool upward = true;                    // absmax toward the largest value (the only direction forecast)
  GrowthModel model = GrowthModel::Exponential;
  double log2_per_100_steps = 0;         // the rate over the fitted steps, in binades (either model)
  double per_step = 0;                   // the linear model's growth of absmax a step (0 for the other)
  int64_t points = 0, first_step = 0, last_step = 0;  // the steps fitted
  double log2_now = 0;                   // the fitted value at last_step
  int64_t crossing_step = 0;             // where the line crosses the edge
  std::string summary;
};
inline constexpr int kForecastWindow = 20;  // measured steps fitted
std::vector<RangeForecast> forecast(const Trace& trace, int window = kForecastWindow);

struct WhyReport {
  std::optional<NonfiniteEvent> origin;  // the first origin (or first non-finite output)
  std::vector<CauseLink> chain;          // unusual links and stops, in walk order
  int64_t ordinary_links = 0;            // inputs whose writer left their range ordinary
  std::vector<Cause> causes;             // the first origin's, the likeliest first
  std::vector<Cause> skipped_steps;      // one per step the loss scaler skipped (up to 50)
  std::vector<RangeForecast> forecasts;  // ranges heading for fp16's edge (forecast())
};
WhyReport why(const Trace& trace);

// [SECTION] Memory ---------------------------------------------------------------------------------

// Allocations grouped by (name, category, bytes): an activation allocated every step is one row.
struct Allocation {
  std::string name, category;
  int64_t bytes = 0;            // of one allocation
  int64_t count = 0;            // times allocated
  int64_t first_alloc_id = 0;
  int64_t first_alloc_ns = 0;
  std::optional<int64_t> first_step;
};

struct CategoryMemory {
  std::string category;
  int64_t at_peak = 0;        // live bytes at the moment total live bytes peaked
  int64_t max_live = 0;       // the category's own peak
  int64_t allocated = 0;      // sum over all allocations
  int64_t allocations = 0;
};

struct MemoryReport {
  int64_t peak_bytes = 0;                 // total live bytes at the peak (first moment)
  std::optional<int64_t> peak_ns, peak_step;
  std::array<CategoryMemory, kCategoryCount> by_category;  // in kCategoryNames order
  std::vector<Allocation> largest;        // by bytes, then first allocation
  int64_t live_at_end = 0;
  int64_t events = 0;
};
MemoryReport memory(const Trace& trace, std::size_t largest = 10);

// [SECTION] Ranks ----------------------------------------------------------------------------------
//
// A trace of a multi-process run (MPI ranks, PyTorch DDP) holds every rank; one process is rank 0.

struct RankRow {
  int32_t rank = 0;
  int64_t processes = 0;                 // traced processes with this rank (1 in an MPI run)
  std::optional<int64_t> pid;
  std::string host;
  std::optional<std::string> ended;      // "exited", "vanished" (killed or crashed), unknown
  int64_t kernels = 0, steps = 0;
  int64_t nonfinite_tensors = 0;
  std::optional<int64_t> first_origin_kernel_id, first_origin_step, first_origin_ns;
  std::optional<int64_t> memory_peak_bytes;
  int64_t loss_scale_events = 0, skipped_steps = 0;
  int64_t slowest_steps = 0;  // steps in which this rank's step took longest
  int64_t held_back_ns = 0;   // over those steps: how much longer than the other ranks' mean it took
};

struct RanksReport {
  std::vector<RankRow> ranks;  // by rank
  // The rank whose first NaN/Inf made from finite inputs came first, by time, and how long before
  // the next rank's first origin (nullopt: no other rank made one). Times are each process's
  // monotonic clock: comparable only between ranks of one host (same_host); across hosts the
  // earliest step decides (then the lower rank) and there is no lead.
  std::optional<int32_t> first_origin_rank;
  std::optional<int64_t> first_origin_lead_ns;
  bool same_host = true;
  // Loss scale: steps that more than one rank recorded, and those where the ranks' scales or skip
  // decisions differed.
  int64_t loss_scale_steps_compared = 0, loss_scale_disagreements = 0;
  std::optional<int64_t> first_disagreement_step;
};
RanksReport ranks(const Trace& trace);

// Live bytes over time: one point after each event, thinned to at most max_points (0: all) while
// keeping the peak.
struct MemoryPoint {
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  int64_t total = 0;
  std::array<int64_t, kCategoryCount> by_category{};
};
std::vector<MemoryPoint> memory_timeline(const Trace& trace, std::size_t max_points = 0);

// [SECTION] Timeline -------------------------------------------------------------------------------

struct KernelSpan {
  int64_t id = 0, start_ns = 0, end_ns = 0;
  std::string kernel;
  std::optional<std::string> layer, phase;
  std::optional<int64_t> step;
  int64_t thread = 0;
  int device = 0, status = 0;
  bool sampled = false;
  bool nonfinite = false;  // one of its outputs holds NaN/Inf
  int32_t rank = 0;
};

struct RangeSpan {
  int64_t id = 0, start_ns = 0;
  std::optional<int64_t> end_ns;  // nullopt: never closed
  int64_t thread = 0;
  int depth = 0;
  std::string kind, name;
  std::optional<std::string> domain;
  std::optional<int64_t> step;
  int32_t rank = 0;
};

struct TimelineWindow {
  int64_t t0 = 0, t1 = 0;
  std::vector<KernelSpan> kernels;  // overlapping [t0, t1), by start
  std::vector<RangeSpan> ranges;    // overlapping [t0, t1), by start
  bool truncated = false;           // more than max_kernels kernels overlapped
};
// The time span of the whole trace (first to last event); nullopt for an empty trace.
std::optional<std::pair<int64_t, int64_t>> time_bounds(const Trace& trace);
TimelineWindow timeline(const Trace& trace, int64_t t0, int64_t t1, std::size_t max_kernels = 100000);

// [SECTION] Tensors --------------------------------------------------------------------------------

struct TensorRecord {
  int64_t id = 0, kernel_id = 0;
  std::string role;  // "in", "out"
  int slot = 0;
  std::optional<int64_t> tensor_uid;
  std::string name, dtype, shape;
  int64_t count = 0, nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;
  std::optional<double> min, max, absmax, min_nonzero, mean, rms;
  std::array<FormatOutcome, kFormatCount> formats;
};
std::vector<TensorRecord> tensors_of_kernel(const Trace& trace, int64_t kernel_id);

struct ExponentHistogram {
  int64_t tensor_id = 0;
  std::string tensor, kernel, dtype;
  bool measured = false;                       // false: the trace has no histogram (--stats basic)
  std::vector<std::pair<int, int64_t>> bins;   // (e, count): 2^e <= |x| < 2^(e+1), ascending e
  int64_t zero = 0, nan = 0, inf = 0;
};
ExponentHistogram exponent_histogram(const Trace& trace, int64_t tensor_id);  // throws if no such tensor

// The largest output tensor (by absmax) of one heat-map cell: `row` and `step` as in
// layer_step_ranges(trace, view), the same tensors that cell summarizes. nullopt when the cell has no
// measured output.
struct CellTensor {
  int64_t kernel_id = 0, tensor_id = 0;
  std::string tensor;
  std::optional<double> absmax;  // as stored (not unscaled)
};
std::optional<CellTensor> largest_tensor_of_cell(const Trace& trace, RangeView view, std::string_view row,
                                                 int64_t step);

// [SECTION] Events ---------------------------------------------------------------------------------

// One thing that went wrong, or that the loss scaler did: a non-finite output, an output that would
// overflow or flush to zero in fp16 or bf16, a loss-scale backoff or growth, a skipped step.
// Trap: where `fpscope run --trap` stopped the program (meta trap.*), with the trap's message.
// Forecast: a range heading for fp16's largest value (forecast()), placed at the last step fitted,
// on the launch that wrote the row's largest tensor then.
enum class EventKind : uint8_t { NaN, Inf, Overflow, Underflow, ScaleBackoff, ScaleGrowth, SkippedStep, Trap, Forecast };
inline constexpr int kEventKindCount = 9;
const char* event_kind_name(EventKind kind);  // "NaN", "overflow", "scale backoff", ...

struct Event {
  EventKind kind = EventKind::NaN;
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  int64_t kernel_id = 0;
  std::optional<int64_t> tensor_id;  // for tensor events
  std::string kernel, layer, tensor;
  std::string detail;  // what happened, in words: "first nan at [17]; 1 NaN, 0 Inf of 4096"
  double amount = 0;   // values involved (NaN + Inf, the larger fp16/bf16 count) or the new scale
  bool origin = false; // a non-finite output its launch made from finite inputs
};

struct EventQuery {
  std::array<bool, kEventKindCount> kinds = {true, true, true, true, true, true, true, true, true};  // by EventKind
  std::optional<int64_t> step;  // only this step's events
  std::size_t offset = 0;       // skip this many (in time order) ...
  std::size_t limit = 50'000;   // ... then return at most this many
};

struct EventPage {
  std::vector<Event> events;  // in time order (ties: non-finite, cast, loss scale; then trace order)
  bool more = false;          // events after this page exist
};
EventPage events(const Trace& trace, const EventQuery& query = {});

// [SECTION] Comparing two runs ---------------------------------------------------------------------

struct CompareOptions {
  double loss_tolerance = 0.05;  // relative: |a-b| / max(|a|,|b|)
  // A layer moved when its largest forward output grew or shrank by at least this factor. Not a
  // crossed power of two: 3.98 -> 4.13 changes the exponent and is a change of 4%.
  double move_ratio = 2.0;
};

// A percentage only says something against a base that is not tiny: reduction_pct is set when
// the source holds at least kMinPercentBaseBytes and at least 1% of the target's bytes (8 B against
// 16 MiB is "+16.0 MiB", not "-208859900%").
inline constexpr int64_t kMinPercentBaseBytes = 1024;
struct MemoryDelta {
  std::string category;             // a category name, or "peak" for the total
  int64_t a = 0, b = 0;
  std::optional<double> reduction_pct;  // (a - b) / a * 100; nullopt against a zero or tiny base
};
// The change from source to target as the front ends print it: "-25.0%", or the difference in
// bytes ("+15.93 MiB") when reduction_pct is not set; "0 B" when equal.
std::string change_text(const MemoryDelta& d);

struct LossPoint {
  int64_t step = 0;
  std::optional<double> a, b;                // NaN where the run logged a NaN loss
  std::optional<double> relative_difference;  // both losses finite only
  bool nonfinite_mismatch = false;            // one loss finite and the other not, or opposite infinities
};

struct LayerShift {
  std::string layer;
  std::optional<double> a_absmax, b_absmax;
  std::optional<int> a_exponent, b_exponent;
  std::optional<int> shift;  // b_exponent - a_exponent
  std::optional<double> ratio;  // b_absmax / a_absmax, where both are nonzero
  bool moved = false;           // ratio or its inverse at least CompareOptions::move_ratio, or in one run only
};

struct RunEvent {
  std::string kind;              // "nonfinite", "skipped_step", "backoff"
  std::optional<int64_t> step;
  std::string detail;            // kernel/layer, scale, ...
};

struct Comparison {
  RunSummary a, b;                       // a: source, b: target
  std::vector<MemoryDelta> memory;       // "peak" first, then each category at its run's peak
  std::vector<MemoryDelta> memory_max_live;  // each category's own maximum
  std::optional<double> accuracy_delta;  // b - a in percentage points: test accuracy if both have it, else train
  std::optional<double> final_loss_delta;  // unset where a run's loss went NaN/Inf after its last finite one
  double loss_tolerance = 0;
  std::vector<LossPoint> loss_curve;     // steps present in both runs, ascending, NaN losses included
  int64_t a_steps = 0, b_steps = 0;
  std::optional<int64_t> first_divergent_step;  // beyond the tolerance, or finite against NaN/Inf
  bool diverged_to_nonfinite = false;            // at first_divergent_step one loss is NaN/Inf and the other not
  std::vector<LayerShift> layers;        // every layer of either run
  double move_ratio = 2.0;               // CompareOptions::move_ratio: what "moved" meant
  std::vector<RunEvent> only_in_a, only_in_b;  // matched on (kind, step)
};
Comparison compare(const Trace& a, const Trace& b, const CompareOptions& options = {});

// [SECTION] Advice ---------------------------------------------------------------------------------

enum class OpPlacement { Fp32, LowPrecision };

struct OpAdvice {
  std::string op;
  OpPlacement placement = OpPlacement::LowPrecision;
  std::string reason;   // one line, for the comment in the list file
  bool observed = false;  // the trace has outputs of this op
  std::optional<double> absmax, min_nonzero;
  int64_t nonfinite_origins = 0;
};

struct LossScaleAdvice {
  bool needed = false;
  std::optional<double> initial_scale;   // a power of two
  bool dynamic = true;
  std::string reason;
};

// The 16-bit format a run's advice is for when none is asked: the run's own (bf16 for a bf16 or
// amp-bf16 run; fp16 for an fp16 or amp-fp16 run), fp16 for a run in fp32 or of unknown precision.
Format advice_target_of(const RunSummary& s);

struct AdviceOptions {
  Format target = Format::F16;   // the 16-bit format of the low-precision list
  double underflow_share = 0.01; // more of an op's values flushed to zero than this: keep fp32
  double headroom_log2 = 1.0;    // fewer than this many powers of two below max_finite: keep fp32
};

struct Advice {
  Format target = Format::F16;
  std::vector<OpAdvice> ops;             // model_op_names() order
  LossScaleAdvice loss_scale;
  std::vector<std::string> mptrain_flags;  // suggested flags, list files named as written
};
Advice advise(const Trace& trace, const AdviceOptions& options = {});

// The op list files: one op a line, its reason as a comment. fp32_ops lists OpPlacement::Fp32.
std::string fp32_ops_file_text(const Advice& advice);
std::string low_precision_ops_file_text(const Advice& advice);

}  // namespace fpscope::analysis
