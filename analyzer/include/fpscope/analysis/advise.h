// Advice: which format a run can move to, and what it needs (a loss scale, layers kept wider).
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/summary.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

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
