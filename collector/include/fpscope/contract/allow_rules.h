// Intended non-finite values: the rules that say which operators or layers make NaN or Inf on
// purpose (an attention mask filled with -inf, then a softmax).
//
// Part of the trace contract (see contract.h). `fpscope run --allow` takes the rules and passes
// them in FPSCOPE_ALLOW; the injector marks the non-finite outputs they cover as allowed (the
// trace keeps them, flagged), keeps them from the trap, and lets values of an allowed kind pass
// through later kernels without those kernels counting as having received non-finite input; an
// output holding only kinds that such an input brought in is passed on, allowed as well.
//
// Syntax: comma-separated GLOB:KINDS, GLOB an fnmatch glob matched against the kernel name and
// the layer name, KINDS one or more of nan, +inf, -inf, inf (both infinities), nonfinite (all),
// joined by '|': "masked_fill*:-inf,attn.*:-inf|nan". "none" is no rule at all.
#pragma once

#include <fnmatch.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fpscope::contract {

// The rules in force when none are given: masks are made of -inf on purpose, by a masking operator
// (masked_fill) or as a constant (torch.full(..., -inf), then triu: PyTorch's causal mask).
inline constexpr const char* kDefaultAllowRules = "masked_fill*:-inf,full:-inf,fill_:-inf";

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

// Parses `text`; false with a message naming the bad part.
inline bool parse_allow_rules(std::string_view text, std::vector<AllowRule>* rules, std::string* error) {
  rules->clear();
  if (text == "none") return true;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view rule = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t colon = rule.rfind(':');
    if (rule.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == rule.size()) {
      *error = "allow rule '" + std::string(rule) + "' is not GLOB:KINDS (e.g. 'masked_fill*:-inf')";
      return false;
    }
    AllowRule r{std::string(rule.substr(0, colon)), 0};
    std::string_view kinds = rule.substr(colon + 1);
    size_t k = 0;
    while (k <= kinds.size()) {
      const size_t bar = kinds.find('|', k);
      const std::string_view kind = kinds.substr(k, bar == std::string_view::npos ? std::string_view::npos : bar - k);
      if (kind == "nan") r.kinds |= kAllowNan;
      else if (kind == "+inf") r.kinds |= kAllowPosInf;
      else if (kind == "-inf") r.kinds |= kAllowNegInf;
      else if (kind == "inf") r.kinds |= kAllowPosInf | kAllowNegInf;
      else if (kind == "nonfinite") r.kinds |= kAllowNan | kAllowPosInf | kAllowNegInf;
      else {
        *error = "allow rule '" + std::string(rule) + "': unknown kind '" + std::string(kind) +
                 "' (nan, +inf, -inf, inf or nonfinite)";
        return false;
      }
      if (bar == std::string_view::npos) break;
      k = bar + 1;
    }
    rules->push_back(std::move(r));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

// True when a rule whose glob matches the kernel or the layer (may be null) covers every kind in
// `kinds` (a tensor without non-finite values is not "allowed": there is nothing to allow).
inline bool allowed_by(const std::vector<AllowRule>& rules, const char* kernel, const char* layer, uint8_t kinds) {
  if (kinds == 0) return false;
  for (const AllowRule& r : rules) {
    if ((kinds & ~r.kinds) != 0) continue;
    if ((kernel && fnmatch(r.glob.c_str(), kernel, 0) == 0) || (layer && fnmatch(r.glob.c_str(), layer, 0) == 0))
      return true;
  }
  return false;
}

// The kinds some rule allows anywhere: values of only these kinds pass through a kernel as
// intended values, not as non-finite input.
inline uint8_t allowed_kinds(const std::vector<AllowRule>& rules) {
  uint8_t kinds = 0;
  for (const AllowRule& r : rules) kinds |= r.kinds;
  return kinds;
}

}  // namespace fpscope::contract
