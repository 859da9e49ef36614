// How a front end that watches operators (the PyTorch observer and dispatch mode) names the memory
// an operator makes. Part of the trace contract (see contract.h): the names are the trace's
// `strings` behind tensors.name_id and memory_events.name_id, and both front ends build them from
// these constants (the Python one through the generated _contract.py).
//
// A return's place counts the operator's returns from 0 in the schema's order, each return one
// place whether or not it holds a tensor (convolution_backward's grad_input is undefined where the
// input needs no gradient), a list return one place for each of its elements.
//
//   "<layer>.<operator>"     what the operator returned at place 0, and a written argument it did
//                            not return: "conv1.convolution" ("relu" outside any layer)
//   "<...>.<return name>"    what it returned at a later place, where the schema names that Tensor
//                            return: "sort.indices"
//   "<...>.out<place>"       what it returned at a later place the schema does not name (or a list's
//                            element): "norm.native_group_norm.out1", "conv1.convolution_backward.out2"
#pragma once

#include <string_view>

namespace fpscope::contract {

// Joins the layer, the operator and the return.
inline constexpr std::string_view kNameSeparator = ".";
inline constexpr std::string_view kUnnamedOutputPrefix = "out";

}  // namespace fpscope::contract
