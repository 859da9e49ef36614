// Allow rules (fpscope/contract/allow_rules.h has their syntax and kinds): parsing a rule list and
// matching it against a kernel and its layer. The injector decides with them which non-finite
// outputs are intended; `fpscope run --allow` checks the user's rules with them before starting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/contract/allow_rules.h"

namespace fpscope::common {

using contract::AllowRule;

// Parses `text`; false with a message naming the bad part.
bool parse_allow_rules(std::string_view text, std::vector<AllowRule>* rules, std::string* error);

// True when a rule whose glob matches the kernel or the layer (may be null) covers every kind in
// `kinds` (a tensor without non-finite values is not "allowed": there is nothing to allow).
bool allowed_by(const std::vector<AllowRule>& rules, const char* kernel, const char* layer, uint8_t kinds);

// The kinds some rule allows anywhere: values of only these kinds pass through a kernel as
// intended values, not as non-finite input.
uint8_t allowed_kinds(const std::vector<AllowRule>& rules);

}  // namespace fpscope::common
