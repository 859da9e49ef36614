// Tensor roles and slots: how a tensor of a launch is named in records and tables.
//
// Part of the trace contract (see contract.h). A launch's tensors are its inputs and outputs, each
// numbered from 0 in the order the kernel was given them (the slot). Records that follow a tensor's
// statistics (formats, histogram, non-finite, dump) name it by launch and one byte packing role and
// slot; pack_role_slot() and its inverses are the only code that knows that packing.
#pragma once

#include <cstdint>

namespace fpscope::contract {

enum class Role : uint8_t { Input = 0, Output = 1 };
// tensors.role in the trace, by Role: the words the schema stores (its CHECK says so) and every
// reader compares with.
inline constexpr const char* kRoleNames[] = {"in", "out"};
constexpr const char* role_name(Role role) { return kRoleNames[static_cast<unsigned>(role)]; }

// A launch may have at most this many inputs and as many outputs: the slot takes 7 bits.
inline constexpr unsigned kMaxSlots = 128;

constexpr uint8_t pack_role_slot(Role role, unsigned slot) {
  return static_cast<uint8_t>((static_cast<unsigned>(role) << 7) | (slot & (kMaxSlots - 1)));
}
constexpr Role role_of(uint8_t role_slot) { return static_cast<Role>(role_slot >> 7); }
constexpr unsigned slot_of(uint8_t role_slot) { return role_slot & (kMaxSlots - 1); }

// A kernel's main output is its output in slot 0. A forward-phase kernel's later outputs are side
// outputs: what it saves for its backward (a normalisation's mean and reciprocal deviation, pooling's
// argmax, dropout's mask) or returns beside its result (a loss's total weight, sort's indices). They
// stay in the trace under their names (tensors.slot > 0; the summaries' `side` column) and out of a
// layer's activation: the activation views, heat maps, layer-range tables and comparisons read main
// outputs only, and count the side outputs' NaN/Inf all the same. A backward-phase kernel's later
// outputs are gradients like its first (the weight's and the bias's), so the rule is the forward
// phase's (and an evaluation's, whose forward runs in phase eval). Both trainers' traces follow it: mptrain's kernels and PyTorch's operators put their
// result first.
inline constexpr unsigned kMainOutputSlot = 0;
constexpr bool is_later_output(Role role, unsigned slot) { return role == Role::Output && slot != kMainOutputSlot; }

static_assert(role_of(pack_role_slot(Role::Output, 127)) == Role::Output && slot_of(pack_role_slot(Role::Output, 127)) == 127);
static_assert(role_of(pack_role_slot(Role::Input, 5)) == Role::Input && slot_of(pack_role_slot(Role::Input, 5)) == 5);

}  // namespace fpscope::contract
