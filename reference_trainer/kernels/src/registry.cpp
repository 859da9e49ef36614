// The one table from kernel name to CPU kernel function, hashed once on first use.
#include "registry.h"

#include <string_view>
#include <unordered_map>

#include "kernels.h"

namespace mpt {
namespace {

struct Entry {
  const char* name;
  KernelFunction function;
};

constexpr Entry kKernels[] = {
    {"cast", kernels::cast},
    {"fill", kernels::fill},
    {"copy", kernels::copy},
    {"inject_fault", kernels::inject_fault},
    {"conv2d_forward", kernels::conv2d_forward},
    {"conv2d_backward_data", kernels::conv2d_backward_data},
    {"conv2d_backward_weight", kernels::conv2d_backward_weight},
    {"linear_forward", kernels::linear_forward},
    {"linear_backward_data", kernels::linear_backward_data},
    {"linear_backward_weight", kernels::linear_backward_weight},
    {"relu_forward", kernels::relu_forward},
    {"relu_backward", kernels::relu_backward},
    {"maxpool2d_forward", kernels::maxpool2d_forward},
    {"maxpool2d_backward", kernels::maxpool2d_backward},
    {"log_softmax_forward", kernels::log_softmax_forward},
    {"log_softmax_backward", kernels::log_softmax_backward},
    {"nll_loss_forward", kernels::nll_loss_forward},
    {"nll_loss_backward", kernels::nll_loss_backward},
    {"accuracy_count", kernels::accuracy_count},
    {"group_norm_forward", kernels::group_norm_forward},
    {"group_norm_backward", kernels::group_norm_backward},
    {"amp_unscale_check", kernels::amp_unscale_check},
    {"amp_update_scale", kernels::amp_update_scale},
    {"sgd_step", kernels::sgd_step},
    {"adamw_step", kernels::adamw_step},
    {"fp8_quantize_tensor", kernels::fp8_quantize_tensor},
    {"fp8_quantize_mx", kernels::fp8_quantize_mx},
    {"fp8_quantize_block", kernels::fp8_quantize_block},
    {"fp8_quantize_nvfp4", kernels::fp8_quantize_nvfp4},
    {"fp8_dequantize", kernels::fp8_dequantize},
    {"allreduce_sum", kernels::allreduce_sum},
};

}  // namespace

KernelFunction find_kernel(const char* name) {
  static const auto* table = [] {
    auto* map = new std::unordered_map<std::string_view, KernelFunction>();
    for (const Entry& e : kKernels) map->emplace(e.name, e.function);
    return map;
  }();
  auto it = table->find(name);
  return it == table->end() ? nullptr : it->second;
}

std::vector<const char*> kernel_names() {
  std::vector<const char*> names;
  for (const Entry& e : kKernels) names.push_back(e.name);
  return names;
}

}  // namespace mpt
