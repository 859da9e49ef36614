// Which precision each op of the model runs in.
//
//   fp32, fp16, bf16: the whole model in one type (the 16-bit ones are PyTorch's model.half()).
//     An op with parameters runs in the type its parameters are stored in (its input is cast to
//     it); an op without parameters runs in the type of its input.
//   amp-fp16, amp-bf16: fp32 master weights; an op runs in the 16-bit type if it is on the
//     low-precision list, in fp32 if it is on the fp32 list, otherwise in the widest type of its
//     inputs (for a single-input op: the type of its input).
//   fp8: amp-bf16 (fp32 master weights, bf16 list), and the operands of every linear and conv2d op
//     pass through fp8 quantize and dequantize kernels first (fp8.h says how).
//   --layer-precision conv1=fp16 overrides every op of that layer, in any mode (model.conv1.half()).
#pragma once

#include "dtype.h"
#include "op_lists.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace mptrain {

enum class PrecisionMode { kFp32, kFp16, kBf16, kAmpFp16, kAmpBf16, kFp8 };

// --precision fp8's scaling (fp8.h).
enum class Fp8Recipe { kCurrent, kDelayed, kMxfp8, kMxfp8Ceil, kBlock, kMxfp4, kNvfp4 };
// mxfp4 and nvfp4 quantize every operand to e2m1 (4-bit): --fp8-format is the 8-bit recipes'.
inline bool is_fp4_recipe(Fp8Recipe r) { return r == Fp8Recipe::kMxfp4 || r == Fp8Recipe::kNvfp4; }

struct Fp8Config {
  Fp8Recipe recipe = Fp8Recipe::kCurrent;
  bool hybrid = true;               // e5m2 gradients; else e4m3 everywhere (8-bit recipes)
  int64_t amax_history = 1024;      // delayed scaling's window, in steps
  std::set<std::string> keep_bf16;  // layers whose operands are not quantized
};

Fp8Recipe parse_fp8_recipe(const std::string& text);  // throws UsageError
std::string fp8_recipe_name(Fp8Recipe recipe);
// "current, e4m3 forward and e5m2 gradients" for the precision plan.
std::string fp8_description(const Fp8Config& config);
// The format words of the configuration log: "hybrid", "e4m3" or (mxfp4, nvfp4) "e2m1".
std::string fp8_format_name(const Fp8Config& config);

PrecisionMode parse_precision_mode(const std::string& text);  // throws UsageError
std::string precision_mode_name(PrecisionMode mode);

// Parses "conv1=fp16,fc1=fp32" (throws UsageError on bad syntax or dtype).
std::map<std::string, DType> parse_layer_precision(const std::string& text);

struct OpPrecision {
  DType dtype;
  std::string reason;  // "bf16 list", "fp32 list", "layer override", "widest input"
};

class PrecisionPolicy {
 public:
  // Default lists for the mode; replace them with set_lists().
  explicit PrecisionPolicy(PrecisionMode mode);

  void set_low_precision_ops(OpSet ops) { lists_.low_precision = std::move(ops); }
  void set_fp32_ops(OpSet ops) { lists_.fp32 = std::move(ops); }
  void set_layer_overrides(std::map<std::string, DType> overrides) { overrides_ = std::move(overrides); }

  PrecisionMode mode() const { return mode_; }
  bool is_amp() const;
  // fp16 or bf16 for the 16-bit modes; fp32 in fp32 mode.
  DType low_dtype() const;
  // Type of the input batch the model receives (the 16-bit type in fp16/bf16 mode).
  DType input_dtype() const;
  // Type the parameters of `layer` are stored in: the master type (fp32) in amp modes.
  DType param_storage_dtype(const std::string& layer) const;
  // The type `op` of `layer` runs in, given the type of its activation input and, for an op
  // with parameters, their storage type.
  OpPrecision op_precision(const std::string& op, const std::string& layer, DType input_dtype,
                           std::optional<DType> param_dtype) const;

  const OpLists& lists() const { return lists_; }
  const std::map<std::string, DType>& layer_overrides() const { return overrides_; }

 private:
  PrecisionMode mode_;
  OpLists lists_;
  std::map<std::string, DType> overrides_;
};

}  // namespace mptrain
