// How a traced run ended: the one list of endings, the word `fpscope run` writes for each into the
// trace's meta (`end_reason`), how the reports name it, and whether it is a failure.
//
// Part of the trace contract (see contract.h). The collector writes end_reason from this table;
// the analyzer reads it back with run_end_of(); report, compare, the HTML export and the GUI show
// label() and colour by is_failure(), so an ending is never guessed from words in a string.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fpscope::contract {

enum class RunEnd : uint8_t {
  ExitedOk,       // the program exited with status 0
  ExitedError,    // the program exited with a non-zero status
  Signaled,       // a signal killed the program (SIGKILL, SIGSEGV, an abort...)
  Trapped,        // `fpscope run --trap` stopped it at the first non-finite value (SIGTRAP)
  Interrupted,    // the user interrupted `fpscope run` (Ctrl-C, SIGTERM), which passed it on
  Running,        // not ended yet: the trace is still being written
  CollectorLost,  // not ended, and the `fpscope run` that wrote it is gone (killed, or the machine rebooted)
  Unknown,        // no end_reason in meta, or a word this build does not know
};
inline constexpr int kRunEndCount = 8;

struct RunEndInfo {
  RunEnd end;
  std::string_view meta;   // meta end_reason ("" for the endings that are derived when reading)
  std::string_view label;  // how reports and the GUI name it
  bool failure;            // shown in the failure colour; `fpscope report` says the run failed
};

inline constexpr std::array<RunEndInfo, kRunEndCount> kRunEnds = {{
    {RunEnd::ExitedOk, "exited", "exited normally", false},
    {RunEnd::ExitedError, "exited", "exited with an error status", true},
    {RunEnd::Signaled, "signaled", "killed by a signal", true},
    {RunEnd::Trapped, "trapped", "stopped by --trap at a non-finite value", true},
    {RunEnd::Interrupted, "collector_interrupted", "interrupted", true},
    {RunEnd::Running, "running", "still running (the trace is being written)", false},
    {RunEnd::CollectorLost, "", "collector lost (fpscope run died before the program ended)", true},
    {RunEnd::Unknown, "", "unknown", false},
}};
static_assert([] {
  for (int i = 0; i < kRunEndCount; ++i)
    if (static_cast<int>(kRunEnds[i].end) != i) return false;
  return true;
}(), "kRunEnds must list the endings in RunEnd order");

// How the injector's message of a trap begins ("fpscope: trap: first NaN made by ..."): the
// collector prints the message as it is, the report shows it without this prefix (the ending says
// it was the trap), and the PyTorch front end's FloatingPointError puts "fpscope: " in its place.
inline constexpr std::string_view kTrapMessagePrefix = "fpscope: trap: ";

constexpr const RunEndInfo& info(RunEnd end) { return kRunEnds[static_cast<int>(end)]; }
constexpr std::string_view label(RunEnd end) { return info(end).label; }
constexpr bool is_failure(RunEnd end) { return info(end).failure; }
// Not ended: the trace may still grow (Running) or never will (CollectorLost).
constexpr bool is_unfinished(RunEnd end) { return end == RunEnd::Running || end == RunEnd::CollectorLost; }

// The ending a trace's meta describes. `exit_code` is meta exit_code (present for "exited");
// `collector_alive` says whether the collector named in meta still runs (see process_identity.h),
// nullopt when that cannot be told (an older trace, another machine).
constexpr RunEnd run_end_of(std::string_view end_reason, std::optional<long long> exit_code,
                            std::optional<bool> collector_alive) {
  if (end_reason == "exited") return exit_code.value_or(0) == 0 ? RunEnd::ExitedOk : RunEnd::ExitedError;
  if (end_reason == "running") return collector_alive == false ? RunEnd::CollectorLost : RunEnd::Running;
  for (const RunEndInfo& e : kRunEnds)
    if (!e.meta.empty() && e.meta == end_reason) return e.end;
  return RunEnd::Unknown;
}
static_assert(run_end_of("trapped", std::nullopt, std::nullopt) == RunEnd::Trapped);
static_assert(run_end_of("exited", 3, std::nullopt) == RunEnd::ExitedError);
static_assert(run_end_of("running", std::nullopt, false) == RunEnd::CollectorLost);

}  // namespace fpscope::contract
