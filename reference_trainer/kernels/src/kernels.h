// Every CPU kernel of libmpt_kernels.so, one function per kernel name of docs/kernels.md.
// registry.cpp maps the names to these functions; each function checks its own arguments.
#ifndef MPT_KERNELS_KERNELS_H
#define MPT_KERNELS_KERNELS_H

#include "kernel_context.h"

namespace mpt {
// The transport of the collective kernels (mpt_set_communicator; kernels_collective.cpp).
void set_communicator(const mpt_communicator* communicator);
}  // namespace mpt

namespace mpt::kernels {

// Data movement (kernels_data.cpp)
void cast(const Launch& l);
void fill(const Launch& l);
void copy(const Launch& l);
void inject_fault(const Launch& l);

// Convolution (kernels_conv.cpp)
void conv2d_forward(const Launch& l);
void conv2d_backward_data(const Launch& l);
void conv2d_backward_weight(const Launch& l);

// Fully connected (kernels_linear.cpp)
void linear_forward(const Launch& l);
void linear_backward_data(const Launch& l);
void linear_backward_weight(const Launch& l);

// Activations, pooling, loss, metrics (kernels_pointwise.cpp)
void relu_forward(const Launch& l);
void relu_backward(const Launch& l);
void maxpool2d_forward(const Launch& l);
void maxpool2d_backward(const Launch& l);
void log_softmax_forward(const Launch& l);
void log_softmax_backward(const Launch& l);
void nll_loss_forward(const Launch& l);
void nll_loss_backward(const Launch& l);
void accuracy_count(const Launch& l);

// Group normalisation (kernels_norm.cpp)
void group_norm_forward(const Launch& l);
void group_norm_backward(const Launch& l);

// Loss scaling (kernels_amp.cpp)
void amp_unscale_check(const Launch& l);
void amp_update_scale(const Launch& l);

// Optimizers (kernels_optim.cpp)
void sgd_step(const Launch& l);
void adamw_step(const Launch& l);

// Scaled 8-bit quantization (kernels_fp8.cpp)
void fp8_quantize_tensor(const Launch& l);
void fp8_quantize_mx(const Launch& l);
void fp8_quantize_block(const Launch& l);
void fp8_quantize_nvfp4(const Launch& l);
void fp8_dequantize(const Launch& l);

// Collectives (kernels_collective.cpp)
void allreduce_sum(const Launch& l);

}  // namespace mpt::kernels

#endif
