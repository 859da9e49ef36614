// The summary of a run: how it ended, its configuration, steps, loss, accuracy, tracing cost and
// counts.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

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

}  // namespace fpscope::analysis
