/* LaunchArgs (launch_args.h): the argument checks of the CUDA backend, each failure turned into
 * MPT_ERR_BAD_ARGUMENTS with a message naming the kernel and the tensor, and the description of
 * device errors.
 */
#include <cstring>
#include <string>

#include "launch_args.h"

namespace mpt::cuda::detail {

const char* dtype_name(int dtype) {
  switch (dtype) {
    case MPT_DTYPE_F32: return "f32";
    case MPT_DTYPE_F16: return "f16";
    case MPT_DTYPE_BF16: return "bf16";
    case MPT_DTYPE_I32: return "i32";
    case MPT_DTYPE_I64: return "i64";
    case MPT_DTYPE_U8: return "u8";
    case MPT_DTYPE_F64: return "f64";
    case MPT_DTYPE_E4M3: return "e4m3";
    case MPT_DTYPE_E5M2: return "e5m2";
    case MPT_DTYPE_E8M0: return "e8m0";
    case MPT_DTYPE_E2M1: return "e2m1";
    default: return "unknown dtype";
  }
}

int64_t element_count(const mpt_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim && i < MPT_MAX_DIMS; ++i) n *= t.shape[i];
  return n;
}

int64_t element_bytes(int dtype) {
  switch (dtype) {
    case MPT_DTYPE_F16: case MPT_DTYPE_BF16: return 2;
    case MPT_DTYPE_F32: case MPT_DTYPE_I32: return 4;
    case MPT_DTYPE_I64: case MPT_DTYPE_F64: return 8;
    case MPT_DTYPE_U8: case MPT_DTYPE_E4M3: case MPT_DTYPE_E5M2: case MPT_DTYPE_E8M0: case MPT_DTYPE_E2M1: return 1;
    default: return 0;
  }
}

bool LaunchArgs::bad(const std::string& message) {
  status_ = MPT_ERR_BAD_ARGUMENTS;
  if (error_) *error_ = std::string(d_.kernel) + " (cuda): " + message;
  return false;
}

int LaunchArgs::device_error(cudaError_t e) {
  status_ = MPT_ERR_DEVICE;
  if (error_) {
    *error_ = std::string(d_.kernel) + " (cuda): " + cudaGetErrorName(e) + ": " +
              cudaGetErrorString(e);
  }
  return status_;
}

bool LaunchArgs::counts(int n_inputs, int n_outputs) {
  if (d_.n_inputs == n_inputs && d_.n_outputs == n_outputs) return true;
  return bad("expects " + std::to_string(n_inputs) + " inputs and " + std::to_string(n_outputs) +
             " outputs, got " + std::to_string(d_.n_inputs) + " and " +
             std::to_string(d_.n_outputs));
}

bool LaunchArgs::on_device() {
  auto check = [&](const mpt_tensor& t, const char* role, int i) {
    if (t.ndim < 0 || t.ndim > MPT_MAX_DIMS) {
      return bad(std::string(role) + " " + std::to_string(i) + " has ndim " +
                 std::to_string(t.ndim));
    }
    for (int k = 0; k < t.ndim; ++k) {
      if (t.shape[k] < 0) return bad(std::string(role) + " " + std::to_string(i) + " has a negative dimension");
    }
    if (t.device != MPT_DEVICE_CUDA) {
      return bad(std::string(role) + " " + std::to_string(i) + " (" + (t.name ? t.name : "?") +
                 ") is not a device tensor; every tensor of a CUDA launch must be");
    }
    if (!t.data && element_count(t) > 0) {
      return bad(std::string(role) + " " + std::to_string(i) + " has no data");
    }
    return true;
  };
  for (int i = 0; i < d_.n_inputs; ++i) if (!check(d_.inputs[i], "input", i)) return false;
  for (int i = 0; i < d_.n_outputs; ++i) if (!check(d_.outputs[i], "output", i)) return false;
  return true;
}

bool LaunchArgs::floating(const mpt_tensor& t, const char* role) {
  if (is_float_dtype(t.dtype)) return true;
  return bad(std::string(role) + " must be f32, f16 or bf16, got " + dtype_name(t.dtype));
}

bool LaunchArgs::dtype_is(const mpt_tensor& t, int dtype, const char* role) {
  if (t.dtype == dtype) return true;
  return bad(std::string(role) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
}

bool LaunchArgs::ndim_is(const mpt_tensor& t, int ndim, const char* role) {
  if (t.ndim == ndim) return true;
  return bad(std::string(role) + " must be " + std::to_string(ndim) + "-D, got " +
             std::to_string(t.ndim) + "-D");
}

/* Same rank and extents, as the CPU library's expect_same_shape. */
bool LaunchArgs::same_shape(const mpt_tensor& a, const mpt_tensor& b, const char* a_role,
                            const char* b_role) {
  auto text = [](const mpt_tensor& t) {
    std::string s = "[";
    for (int i = 0; i < t.ndim; ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
    return s + "]";
  };
  bool same = a.ndim == b.ndim;
  for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == b.shape[i];
  if (same) return true;
  return bad(std::string(b_role) + " must have the shape of " + a_role + " " + text(a) + ", got " +
             text(b));
}

bool LaunchArgs::dim_is(const mpt_tensor& t, int axis, int64_t value, const char* role) {
  if (axis < t.ndim && t.shape[axis] == value) return true;
  return bad(std::string(role) + " dimension " + std::to_string(axis) + " must be " +
             std::to_string(value));
}

bool LaunchArgs::scalar(const char* name, double* value) {
  for (int i = 0; i < d_.n_scalars; ++i) {
    if (d_.scalars[i].name && std::strcmp(d_.scalars[i].name, name) == 0) {
      *value = d_.scalars[i].value;
      return true;
    }
  }
  return bad(std::string("missing scalar `") + name + "`");
}

double LaunchArgs::scalar_or(const char* name, double fallback) const {
  for (int i = 0; i < d_.n_scalars; ++i) {
    if (d_.scalars[i].name && std::strcmp(d_.scalars[i].name, name) == 0) return d_.scalars[i].value;
  }
  return fallback;
}

bool LaunchArgs::integer_or(const char* name, int64_t fallback, int64_t min, int64_t* value) {
  bool present = false;
  double v = 0.0;
  for (int i = 0; i < d_.n_scalars && !present; ++i) {
    if (d_.scalars[i].name && std::strcmp(d_.scalars[i].name, name) == 0) {
      present = true;
      v = d_.scalars[i].value;
    }
  }
  if (!present) {
    *value = fallback;
    return true;
  }
  if (!(v == static_cast<double>(static_cast<int64_t>(v))) || v < static_cast<double>(min)) {
    return bad(std::string("scalar `") + name + "` = " + std::to_string(v) +
               " must be an integer >= " + std::to_string(min));
  }
  *value = static_cast<int64_t>(v);
  return true;
}

bool LaunchArgs::integer(const char* name, int64_t min, int64_t* value) {
  double ignored;
  return scalar(name, &ignored) && integer_or(name, 0, min, value);
}

}  // namespace mpt::cuda::detail
