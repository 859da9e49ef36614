// The trainer's NVTX conventions: how a training program tells fpscope which step, phase and layer
// each kernel belongs to.
//
// Part of the trace contract (see contract.h). mptrain opens its ranges with these values; the
// injector attributes every launch to the innermost open range of each category of this domain.
// Any program may follow the same convention to get the same attribution.
#pragma once

#include <cstdint>

namespace fpscope::contract {

inline constexpr const char* kTrainerNvtxDomain = "mptrain";

enum class NvtxCategory : uint32_t {
  Step = 1,   // message "step N", int64 payload N (the optimizer step, from 0)
  Phase = 2,  // message: one of kPhaseNames
  Layer = 3,  // message: the layer's name ("conv1", "fc2")
};

// The phases a training step goes through, as the trainer names them and the trace stores them.
inline constexpr const char* kPhaseForward = "forward";
inline constexpr const char* kPhaseBackward = "backward";
inline constexpr const char* kPhaseOptimizer = "optimizer";
inline constexpr const char* kPhaseEval = "eval";

}  // namespace fpscope::contract
