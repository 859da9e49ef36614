// --fault KIND@LAYER:STEP[:INDEX]: plants a NaN or an infinity in one layer's forward output at
// one training step (through the library's inject_fault kernel), so tests can check that a
// tracer finds where it came from.
#pragma once

#include <cstdint>
#include <string>

namespace mptrain {

struct FaultSpec {
  int kind = 0;         // inject_fault's `kind`: 0 NaN, 1 +Inf, 2 -Inf
  std::string layer;    // "fc1"
  int64_t step = 0;     // training step, counting from 0
  int64_t index = 0;    // element of the layer's output
};

// Parses "nan@fc1:5", "inf@conv2:0:17", "-inf@fc2:3". Throws UsageError.
FaultSpec parse_fault_spec(const std::string& text);

}  // namespace mptrain
