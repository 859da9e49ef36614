// The error types that decide mptrain's exit code: UsageError and DataError (exit 2: the user can
// fix the command line, the data or the device), KernelError (exit 1: a kernel failed).
#pragma once

#include <stdexcept>
#include <string>

namespace mptrain {

// A bad option value, op list file or fault specification.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A missing or malformed dataset file.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The kernel library has no usable device (MPT_ERR_DEVICE, or device memory unavailable).
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A kernel launch or host allocation failed.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace mptrain
