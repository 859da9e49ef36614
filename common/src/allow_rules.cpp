// Parsing and matching allow rules (fpscope/common/allow_rules.h).
#include "fpscope/common/allow_rules.h"

#include <fnmatch.h>

namespace fpscope::common {

using contract::kAllowNan;
using contract::kAllowNegInf;
using contract::kAllowPosInf;

bool parse_allow_rules(std::string_view text, std::vector<AllowRule>* rules, std::string* error) {
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

bool allowed_by(const std::vector<AllowRule>& rules, const char* kernel, const char* layer, uint8_t kinds) {
  if (kinds == 0) return false;
  for (const AllowRule& r : rules) {
    if ((kinds & ~r.kinds) != 0) continue;
    if ((kernel && fnmatch(r.glob.c_str(), kernel, 0) == 0) || (layer && fnmatch(r.glob.c_str(), layer, 0) == 0))
      return true;
  }
  return false;
}

uint8_t allowed_kinds(const std::vector<AllowRule>& rules) {
  uint8_t kinds = 0;
  for (const AllowRule& r : rules) kinds |= r.kinds;
  return kinds;
}

}  // namespace fpscope::common
