// What the files of the launch path share: a launch's plan and the state it carries from before its
// kernel to after it, and small facts about a launch. The path: launch.cpp (the host launch, from
// plan to trap), launch_records.cpp (the records a launch writes), front_end_ops.cpp (a front
// end's own operations), device_launch.cpp (device tensors and their asynchronous results); the
// rules on non-finite values are verdict.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fpscope/contract/tensor_role.h"
#include "session.h"
#include "tensor_view.h"

namespace fpscope::inject {

struct Session::LaunchPlan {
  uint64_t seq = 0;
  const char* kernel = "";
  const char* layer = nullptr;  // the innermost layer range's name, null if none
  int64_t step = -1;
  int64_t start_ns = 0, end_ns = 0;
  int32_t status = 0;
  uint8_t device = MPT_DEVICE_CPU;
  bool sampled = false;      // its tensors are measured
  bool dump = false;         // FPSCOPE_DUMP's launch keys match
  bool inputs = false, outputs = false;
  bool loss_scale = false;   // the loss scaler's update, its scalars readable
  bool memo = false;         // inputs may take remembered statistics (mpt_launch only)
};

// What a launch carries from before its kernel to after it.
struct Session::LaunchState {
  LaunchPlan p;
  Attribution where;
  std::vector<Measurement> measured;
  bool in_place_finite = true;
  LossScaleProbe probe;
  bool front_end = false;          // a front end's op: a trap goes back through end_op
  std::string trap_message;        // ... held for it: a device result that trapped meanwhile
  uint64_t trap_seq = 0;
  // The kernel's launch report (mpt/abi.h): the injector's own request, and where the report the
  // launch filled lies (this one, or the program's when it asked itself); null when none was asked.
  mpt_launch_report report{};
  const mpt_launch_report* reported = nullptr;
};

inline constexpr int kMaxSlots = static_cast<int>(contract::kMaxSlots);  // role_slot keeps the slot in 7 bits

// What the memo knows a measured tensor by: its bytes, read as its element type.
inline OutputMemo::Key memo_key(const mpt_tensor& t) { return {t.data, *float_type(t.dtype), element_count(t)}; }

// The device a launch runs on: CUDA when any of its tensors is a device tensor.
inline uint8_t launch_device(const mpt_launch_desc* d) {
  for (int i = 0; i < d->n_inputs; ++i)
    if (d->inputs[i].device == MPT_DEVICE_CUDA) return MPT_DEVICE_CUDA;
  for (int i = 0; i < d->n_outputs; ++i)
    if (d->outputs[i].device == MPT_DEVICE_CUDA) return MPT_DEVICE_CUDA;
  return MPT_DEVICE_CPU;
}

}  // namespace fpscope::inject
