// Non-finite values: which launches made or passed on NaN/Inf, the first origin, and the intended
// values counted apart.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

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

}  // namespace fpscope::analysis
