// Which PyTorch operators the front end's two watchers (the C++ observer and the Python dispatch
// mode) leave out or count without measuring. Both take these lists from here (the Python one
// through the generated _contract.py), so that a program traced either way has the same launches.
#pragma once

#include <string_view>

namespace fpscope::contract {

// Operators whose outputs hold whatever the memory held before: counted, never measured.
inline constexpr std::string_view kUninitializedOperators[] = {"empty", "empty_like", "empty_strided",
                                                               "new_empty", "new_empty_strided"};

// Operators that return their input's memory under another shape though their schema does not
// mark the result as an alias (`_unsafe_view`, which matmul uses to give a product its batch
// dimensions back): views like those the schema marks, counted, never measured. Measured, they
// would scan again the very values their input was measured with. Only their overloads that write
// no argument: `_unsafe_view.out` copies into its `out` and is measured as any operator is.
inline constexpr std::string_view kUnannotatedViewOperators[] = {"_unsafe_view"};

// Namespaces of operators counted, never measured: torch 2's collectives (`c10d::allreduce_`,
// `broadcast_`, ...) return before the process group's threads have combined the tensors, so what
// the call returns is not yet what they will hold. The next operator to read them measures them.
inline constexpr std::string_view kUnmeasuredNamespaces[] = {"c10d"};

// Namespaces of operators that compute nothing a trace is about: the profiler's bookkeeping
// (`profiler::_record_function_enter_new` and `_exit`, which torch.optim and
// torch.autograd.profiler.record_function dispatch). Not launches at all.
inline constexpr std::string_view kUnwatchedNamespaces[] = {"profiler"};

}  // namespace fpscope::contract
