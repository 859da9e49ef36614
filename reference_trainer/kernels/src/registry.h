// Kernel lookup by name (the dispatch table of mpt_launch).
#ifndef MPT_KERNELS_REGISTRY_H
#define MPT_KERNELS_REGISTRY_H

#include <vector>

#include "kernel_context.h"

namespace mpt {

using KernelFunction = void (*)(const Launch&);

KernelFunction find_kernel(const char* name);  // nullptr when unknown
std::vector<const char*> kernel_names();       // in catalogue order

}  // namespace mpt

#endif
