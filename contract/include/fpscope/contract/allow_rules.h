// Intended non-finite values: the rules that say which operators or layers make NaN or Inf on
// purpose (an attention mask filled with -inf, then a softmax).
//
// Part of the trace contract (see contract.h): the rules' kinds, their syntax and the defaults.
// Parsing them and matching them against kernels and layers is fpscope/common/allow_rules.h.
// `fpscope run --allow` takes the rules and passes them in FPSCOPE_ALLOW; the injector marks the non-finite outputs they cover as allowed (the
// trace keeps them, flagged), keeps them from the trap, and lets values of an allowed kind pass
// through later kernels without those kernels counting as having received non-finite input; an
// output holding only kinds that such an input brought in is passed on, allowed as well.
//
// Syntax: comma-separated GLOB:KINDS, GLOB an fnmatch glob matched against the kernel name and
// the layer name, KINDS one or more of nan, +inf, -inf, inf (both infinities), nonfinite (all),
// joined by '|': "masked_fill*:-inf,attn.*:-inf|nan". "none" is no rule at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fpscope::contract {

// The rules in force when none are given: masks are made of -inf on purpose, by a masking operator
// (masked_fill) or as a constant (torch.full(..., -inf), then triu: PyTorch's causal mask; a 0-dim
// scalar_tensor(-inf) that torch.where spreads: Hugging Face transformers' masks).
inline constexpr const char* kDefaultAllowRules = "masked_fill*:-inf,full:-inf,fill_:-inf,scalar_tensor:-inf";

// Kinds of non-finite value, as bits.
inline constexpr uint8_t kAllowNan = 1, kAllowPosInf = 2, kAllowNegInf = 4;

struct AllowRule {
  std::string glob;
  uint8_t kinds = 0;
};

// The kinds of non-finite value a tensor holds, from its counts.
constexpr uint8_t nonfinite_kinds(uint64_t nan, uint64_t pos_inf, uint64_t neg_inf) {
  return static_cast<uint8_t>((nan ? kAllowNan : 0) | (pos_inf ? kAllowPosInf : 0) | (neg_inf ? kAllowNegInf : 0));
}

}  // namespace fpscope::contract
