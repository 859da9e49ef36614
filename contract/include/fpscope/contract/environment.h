// The environment variables through which `fpscope run` configures the injector in the traced
// program. Part of the trace contract (see contract.h): the collector sets them, the injector
// reads them, and docs/injector.md documents them; each name is written here once.
#pragma once

namespace fpscope::contract::env {

inline constexpr const char* kRing = "FPSCOPE_RING";          // shared-memory ring to write into
inline constexpr const char* kEvery = "FPSCOPE_EVERY";        // measure steps divisible by N
inline constexpr const char* kSteps = "FPSCOPE_STEPS";        // measure steps A-B
inline constexpr const char* kOps = "FPSCOPE_OPS";            // measure kernels matching these globs
inline constexpr const char* kTensors = "FPSCOPE_TENSORS";    // in, out or both
inline constexpr const char* kStats = "FPSCOPE_STATS";        // full or basic
inline constexpr const char* kRecipes = "FPSCOPE_RECIPES";    // operands, all or none: the fp8 recipe forecast
inline constexpr const char* kUpdates = "FPSCOPE_UPDATES";    // on or off: parameter updates and store counts
inline constexpr const char* kStatsThreads = "FPSCOPE_STATS_THREADS";  // threads sharing a large tensor's scan
inline constexpr const char* kRescanInputs = "FPSCOPE_RESCAN_INPUTS";  // 1: never reuse an output's statistics for an input
inline constexpr const char* kTrap = "FPSCOPE_TRAP";          // stop at the first nonfinite/nan/inf
inline constexpr const char* kAllow = "FPSCOPE_ALLOW";        // intended NaN/Inf (allow_rules.h)
inline constexpr const char* kDump = "FPSCOPE_DUMP";          // write matching tensors to .npy
inline constexpr const char* kDumpDir = "FPSCOPE_DUMP_DIR";   // where the .npy files go
inline constexpr const char* kInjectLib = "FPSCOPE_INJECT_LIB";  // the injector to preload (tests, installs)
inline constexpr const char* kGpuLibrary = "FPSCOPE_GPU_LIBRARY";  // libfpscope_gpu.so to load
// 1: the PyTorch front end watches operators with its Python dispatch mode, not the C++ observer
// (read by the front end's Python, whose build writes the name in from here, as it does kRing).
inline constexpr const char* kTorchDispatchMode = "FPSCOPE_TORCH_DISPATCH_MODE";
// 1: the PyTorch front end turns torch.compile off (TorchDynamo disabled): every operator runs
// eagerly and is measured (`fpscope run --eager`).
inline constexpr const char* kTorchEager = "FPSCOPE_TORCH_EAGER";

// Every variable `fpscope run` may set in the program's environment starts with this prefix, so
// a value inherited from an outer run is dropped before the new ones are added.
inline constexpr const char* kPrefix = "FPSCOPE_";

}  // namespace fpscope::contract::env
