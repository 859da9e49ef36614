// Statistics of device (CUDA) tensors through libfpscope_gpu.so (injector/cuda).
//
// The GPU library is dlopen()ed from the injector's own folder the first time a selected launch
// has device tensors. It queues a reduction of each tensor on the launch's stream and hands the
// results back later (poll), so the records of a device launch's tensors reach the ring after its
// Launch record: inputs are queued before the kernel, outputs after it, and results of one
// stream come back in that order, so a launch's inputs are known when its outputs arrive.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "fpscope/gpu_stats.h"

namespace fpscope::inject {

// Returns the library's function table, or null with *why saying what is missing.
using GpuLoader = std::function<const fpscope_gpu_api*(std::string* why)>;

// The loader used in traced programs: libfpscope_gpu.so beside libfpscope_inject.so.
const fpscope_gpu_api* load_gpu_library(std::string* why);

}  // namespace fpscope::inject
