// The number formats the reports speak of (fp16, bf16, fp8...), their limits, and the versions of
// the trace this library reads.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/contract/embedded_sql.h"

namespace fpscope::analysis {

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

}  // namespace fpscope::analysis
