/* Validation helpers for a launch on the device: tensor counts, dtypes, shapes and scalars, each
 * failure turned into MPT_ERR_BAD_ARGUMENTS with a message that names the kernel and the tensor.
 */
#ifndef MPT_CUDA_LAUNCH_ARGS_H
#define MPT_CUDA_LAUNCH_ARGS_H

#include <cstdint>
#include <string>

#include "launchers.h"
#include "mpt/abi.h"

namespace mpt::cuda::detail {

inline bool is_float_dtype(int dtype) {
  return dtype == MPT_DTYPE_F32 || dtype == MPT_DTYPE_F16 || dtype == MPT_DTYPE_BF16;
}
const char* dtype_name(int dtype);
int64_t element_count(const mpt_tensor& t);
int64_t element_bytes(int dtype);

class LaunchArgs {
 public:
  /* With dry_run, a kernel checks its arguments and returns before touching the device. */
  LaunchArgs(const mpt_launch_desc& d, std::string* error, bool dry_run)
      : d_(d), error_(error), dry_run_(dry_run) {}

  bool dry_run() const { return dry_run_; }

  const mpt_launch_desc& desc() const { return d_; }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(d_.stream); }
  const mpt_tensor& in(int i) const { return d_.inputs[i]; }
  const mpt_tensor& out(int i) const { return d_.outputs[i]; }
  Flat in_flat(int i) const { return flat(in(i)); }
  Flat out_flat(int i) const { return flat(out(i)); }
  static Flat flat(const mpt_tensor& t) { return Flat{t.data, t.dtype, element_count(t)}; }

  /* Each returns false after recording the failure; fail() gives the status to return. */
  bool counts(int n_inputs, int n_outputs);
  bool on_device();  // every tensor on the device, non-null data when non-empty
  bool floating(const mpt_tensor& t, const char* role);
  bool dtype_is(const mpt_tensor& t, int dtype, const char* role);
  bool ndim_is(const mpt_tensor& t, int ndim, const char* role);
  bool same_shape(const mpt_tensor& a, const mpt_tensor& b, const char* a_role,
                  const char* b_role);
  bool dim_is(const mpt_tensor& t, int axis, int64_t value, const char* role);
  /* A named scalar; required ones fail when absent, optional ones take `fallback`. */
  bool scalar(const char* name, double* value);
  double scalar_or(const char* name, double fallback) const;
  /* An integral scalar >= min: required, or `fallback` when absent. */
  bool integer(const char* name, int64_t min, int64_t* value);
  bool integer_or(const char* name, int64_t fallback, int64_t min, int64_t* value);
  bool flag(const char* name) const { return scalar_or(name, 0.0) != 0.0; }

  bool bad(const std::string& message);
  int fail() const { return status_; }
  int device_error(cudaError_t e);
  int done(cudaError_t e) { return e == cudaSuccess ? MPT_OK : device_error(e); }

 private:
  const mpt_launch_desc& d_;
  std::string* error_;
  bool dry_run_;
  int status_ = MPT_ERR_BAD_ARGUMENTS;
};

/* Checks a launch's arguments exactly as launch() does, without a device and without running
 * anything: MPT_OK, MPT_ERR_UNKNOWN_KERNEL or MPT_ERR_BAD_ARGUMENTS (tests use it everywhere). */
int validate(const mpt_launch_desc& d, std::string* error);

/* Kernel entry points of the dispatch table (backend.cpp, gemm.cpp, quantize_dispatch.cpp). */
int run_linear_forward(LaunchArgs& a);
int run_linear_backward_data(LaunchArgs& a);
int run_linear_backward_weight(LaunchArgs& a);
int run_conv2d_forward(LaunchArgs& a);
int run_conv2d_backward_data(LaunchArgs& a);
int run_conv2d_backward_weight(LaunchArgs& a);
int run_fp8_quantize_tensor(LaunchArgs& a);  // quantize_dispatch.cpp
int run_fp8_quantize_mx(LaunchArgs& a);
int run_fp8_quantize_block(LaunchArgs& a);
int run_fp8_quantize_nvfp4(LaunchArgs& a);
int run_fp8_dequantize(LaunchArgs& a);

}  // namespace mpt::cuda::detail

#endif /* MPT_CUDA_LAUNCH_ARGS_H */
