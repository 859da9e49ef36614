// The verdict on a launch's non-finite values (verdict.h).
#include "verdict.h"

#include "fpscope/common/allow_rules.h"
#include "tensor_view.h"

namespace fpscope::inject::verdict {

uint8_t kinds_of(const TensorStats& s) { return contract::nonfinite_kinds(s.nan, s.pos_inf, s.neg_inf); }

bool damages(uint8_t input_kinds, uint8_t intended_kinds) { return (input_kinds & ~intended_kinds) != 0; }

bool output_allowed(uint8_t output_kinds, uint8_t carried, const std::vector<contract::AllowRule>& rules,
                    const char* kernel, const char* layer) {
  if (output_kinds == 0) return false;
  if (carried != 0 && (output_kinds & ~carried) == 0) return true;
  return common::allowed_by(rules, kernel, layer, output_kinds);
}

bool trap_wants(TrapKind trap, const TensorStats& s) {
  switch (trap) {
    case TrapKind::NaN: return s.nan > 0;
    case TrapKind::Inf: return s.pos_inf + s.neg_inf > 0;
    case TrapKind::Nonfinite: return s.nonfinite() > 0;
    case TrapKind::None: break;
  }
  return false;
}

bool first_is_wanted(TrapKind trap, wire::NonfiniteKind first) {
  return trap == TrapKind::Nonfinite || (trap == TrapKind::NaN) == (first == wire::NonfiniteKind::NaN);
}

std::string place_of(const Attribution& where) {
  std::string place;
  auto add = [&](const std::string& part) { place += (place.empty() ? "" : ", ") + part; };
  if (where.layer) add(std::string("layer ") + where.layer);
  if (where.step >= 0) add("step " + std::to_string(where.step));
  if (where.phase) add(std::string("phase ") + where.phase);
  return place.empty() ? "" : " (" + place + ")";
}

std::string tensor_label(const char* name, unsigned slot) {
  return name && *name ? std::string(name) : "output " + std::to_string(slot);
}

std::string trap_text(TrapKind trap, const std::string& kernel, const std::string& place, const std::string& tensor,
                      wire::NonfiniteKind first, int64_t first_index, const std::optional<WantedValue>& wanted) {
  const std::string made = " made by " + kernel + place + " in " + tensor;
  if (first_is_wanted(trap, first))
    return "first " + std::string(nonfinite_word(first)) + made + " at index " + std::to_string(first_index);
  if (wanted)
    return "first " + std::string(nonfinite_word(wanted->kind)) + made + " at index " + std::to_string(wanted->index);
  return std::string("first ") + (trap == TrapKind::NaN ? "NaN" : "Inf") + made + " (its first non-finite value, " +
         nonfinite_word(first) + ", is at index " + std::to_string(first_index) + ")";
}

}  // namespace fpscope::inject::verdict
