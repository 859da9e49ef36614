/* The CUDA side of libmpt_kernels.so: every kernel of docs/kernels.md on device tensors.
 *
 * The CPU library (reference_trainer/kernels) calls these when a launch names a device tensor, and
 * for `copy` when either tensor lives on the device. Semantics are those of the CPU kernels: inputs
 * read exactly, arithmetic in fp32, each result rounded to the output dtype to nearest even,
 * `partials_fp16` accumulation, the same loss scaler and optimizers, and stochastic rounding from
 * the same counter-based generator (mpt/numerics.h), so CPU and GPU round identically.
 *
 * Work is queued on the launch's stream (d.stream, a cudaStream_t; NULL is the legacy default
 * stream) and is not waited for, except where a kernel must read a device value on the host.
 */
#ifndef MPT_CUDA_BACKEND_H
#define MPT_CUDA_BACKEND_H

#include <cstddef>
#include <string>

#include "mpt/abi.h"

namespace mpt::cuda {

/* True when the CUDA driver loads and at least one device is present; otherwise false, and *why
 * (when not NULL) says what is missing. The answer is computed once and cached. */
bool available(std::string* why);

/* Runs the kernel `d` describes on the device. Returns an mpt_status; on failure *error (when not
 * NULL) says what was wrong. Without a usable device every launch returns MPT_ERR_DEVICE. */
int launch(const mpt_launch_desc& d, std::string* error);

/* Device memory of `bytes` bytes, zero-filled (256-byte aligned, as cudaMalloc gives). NULL on
 * failure, with *error saying why. */
void* alloc(size_t bytes, std::string* error);

/* Frees what alloc() returned; NULL is ignored. */
void free(void* p);

}  // namespace mpt::cuda

#endif /* MPT_CUDA_BACKEND_H */
