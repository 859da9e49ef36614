// The verdict on a launch's non-finite values, the same for the host path and the device path:
// which values are intended (an allow rule covers them, or an intended input carried them in),
// whether an input brings damage, whether the launch made what its outputs hold (its origin),
// whether --trap wants an output, and the trap's words. Pure functions of the statistics, the
// rules and the launch's place: no ring, no session, no tensor memory (tests/injector/preload/
// verdict_test.cpp holds them to their rules).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/contract/allow_rules.h"
#include "fpscope/contract/wire.h"
#include "fpscope/tensor_stats.h"
#include "options.h"
#include "range_stack.h"

namespace fpscope::inject::verdict {

// The kinds of non-finite value (contract::kAllowNan, kAllowPosInf, kAllowNegInf) a tensor holds.
uint8_t kinds_of(const TensorStats& s);

// An input damages its launch when it holds a kind of value no allow rule permits anywhere
// (`intended_kinds`: common::allowed_kinds of the rules): values of the permitted kinds pass
// through later kernels as intended values. A launch is the origin of its outputs' non-finite
// values when none of its inputs, measured or scanned, damages it.
bool damages(uint8_t input_kinds, uint8_t intended_kinds);

// An output's non-finite values are intended when they are only of the kinds that intended inputs
// carried in (`carried`: triu of a -inf mask, the matmul that adds the mask to attention scores)
// or when a rule whose glob matches the kernel or the layer (may be null) covers all of them. An
// output without non-finite values is not "allowed": there is nothing to allow.
bool output_allowed(uint8_t output_kinds, uint8_t carried, const std::vector<contract::AllowRule>& rules,
                    const char* kernel, const char* layer);

// --trap wants an output holding a value of the trapped kind (never with TrapKind::None).
bool trap_wants(TrapKind trap, const TensorStats& s);

// Whether the first non-finite value (of kind `first`) is of the trapped kind.
bool first_is_wanted(TrapKind trap, wire::NonfiniteKind first);

// " (layer L, step S, phase P)" for what the attribution knows; "" when it knows nothing.
std::string place_of(const Attribution& where);

// How a trap names the output: its name, else "output N".
std::string tensor_label(const char* name, unsigned slot);

// Where the first value of the trapped kind lies, when the caller could look (on the host, where
// the data is at hand).
struct WantedValue {
  wire::NonfiniteKind kind;
  int64_t index;
};

// The trap's message (after contract::kTrapMessagePrefix): "first KIND made by KERNEL (PLACE) in
// TENSOR at index I". When the output's first non-finite value is not of the trapped kind, it names
// the first value of that kind from `wanted` (the host looks it up), or, without it (a device
// result, whose data is gone), says the kind that was trapped and where the first non-finite value
// of another kind is.
std::string trap_text(TrapKind trap, const std::string& kernel, const std::string& place, const std::string& tensor,
                      wire::NonfiniteKind first, int64_t first_index, const std::optional<WantedValue>& wanted);

}  // namespace fpscope::inject::verdict
