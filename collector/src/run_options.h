// The command line of `fpscope run`: parsing, validation, and what the injector is told through
// the environment (FPSCOPE_EVERY, FPSCOPE_STEPS, ...). Private to the collector.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/contract/allow_rules.h"

namespace fpscope {

struct RunOptions {
  std::string output;              // as given (or the default name)
  bool force = false;
  uint64_t every = 1;              // measure tensors of every N-th step
  std::string steps;               // "A-B", "A-" or "A" (validated), empty: all
  std::string ops;                 // comma-separated globs, empty: all
  std::string tensors = "both";    // in | out | both
  std::string stats = "full";      // full | basic
  std::string recipes = "none";    // operands | all | none: which tensors get the fp8 recipe forecast
  std::string updates = "on";      // on | off: parameter updates and narrowing-store counts
  int stats_threads = 0;           // threads sharing a large tensor's scan; 0: automatic
  std::string torch_operators = "observer";  // how the PyTorch front end sees operators
  bool eager = false;                        // torch.compile off in PyTorch programs
  bool rescan_inputs = false;      // scan every input, never reuse an output's statistics
  std::string trap;                // nonfinite | nan | inf, empty: none
  std::string allow = contract::kDefaultAllowRules;  // --allow: intended NaN/Inf
  std::string dump;                // "key=value,..." (op, layer, tensor globs; step N or A-B), empty: none
  uint64_t ring_mib = 64;
  uint64_t max_size_mib = 0;       // --max-size: the trace stops growing there; 0: no limit
  bool quiet = false;
  bool cupti = true;               // set CUDA_INJECTION64_PATH (CUDA device activity); --no-cupti clears
  std::vector<std::string> program;  // the program and its arguments
};

// The outcome of parsing: options to run with, or an exit status (help printed: 0; error: 2).
struct ParsedRun {
  std::optional<RunOptions> options;
  int exit_status = 0;
};

ParsedRun parse_run_options(int argc, char** argv);

// The selection as FPSCOPE_* variables for the injector (the ring and dump folder not included).
std::vector<std::pair<std::string, std::string>> selection_environment(const RunOptions& o);

// The selection as a JSON object, stored in meta 'options'.
std::string selection_json(const RunOptions& o);

// Ring slots for --ring-size MiB: rounded up to a power of two.
uint64_t ring_slots_for(uint64_t mib);

// fpscope-<program>-<YYYYmmdd-HHMMSS>.sqlite in the current folder.
std::string default_output_name(const std::string& program);

}  // namespace fpscope
