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
inline constexpr const char* kRoleNames[] = {"input", "output"};  // tensors.role in the trace

// A launch may have at most this many inputs and as many outputs: the slot takes 7 bits.
inline constexpr unsigned kMaxSlots = 128;

constexpr uint8_t pack_role_slot(Role role, unsigned slot) {
  return static_cast<uint8_t>((static_cast<unsigned>(role) << 7) | (slot & (kMaxSlots - 1)));
}
constexpr Role role_of(uint8_t role_slot) { return static_cast<Role>(role_slot >> 7); }
constexpr unsigned slot_of(uint8_t role_slot) { return role_slot & (kMaxSlots - 1); }

static_assert(role_of(pack_role_slot(Role::Output, 127)) == Role::Output && slot_of(pack_role_slot(Role::Output, 127)) == 127);
static_assert(role_of(pack_role_slot(Role::Input, 5)) == Role::Input && slot_of(pack_role_slot(Role::Input, 5)) == 5);

}  // namespace fpscope::contract
