// How a front end that watches operators (the PyTorch observer and dispatch mode) names the memory
// an operator makes. Part of the trace contract (see contract.h): the names are the trace's
// `strings` behind tensors.name_id and memory_events.name_id, and both front ends build them from
// these constants (the Python one through the generated _contract.py).
//
//   "<layer>.<operator>"     what the operator returns first: "conv1.convolution" ("relu" outside
//                            any layer)
//   "<...>.<return name>"    each later returned tensor, named as the operator's schema names it:
//                            "sort.indices"
//   "<...>.out<k>"           a later returned tensor the schema does not name, k its place among the
//                            returned tensors counted from 0: "norm.native_group_norm.out1"
#pragma once

#include <string_view>

namespace fpscope::contract {

inline constexpr std::string_view kNameSeparator = ".";
inline constexpr std::string_view kUnnamedOutputPrefix = "out";

}  // namespace fpscope::contract
