// What an allocation holds: the memory categories of the kernel ABI (mpt_category), as the trace
// stores them (allocations.category, table `categories`). Part of the trace contract (see
// contract.h); the schema's `categories` rows and the injector's static_asserts tie to this list.
#pragma once

#include <array>
#include <string_view>

namespace fpscope::contract {

enum class MemoryCategory : unsigned char {
  Weight = 0,          // parameters the forward pass reads (16-bit copies included)
  MasterWeight = 1,    // fp32 copies the optimizer updates in mixed precision
  Gradient = 2,
  Activation = 3,      // forward outputs kept for backward, and their gradients
  OptimizerState = 4,  // momentum, Adam moments
  Workspace = 5,       // scratch: im2col buffers, staging copies, reductions, loss-scaler state
  Data = 6,            // the dataset and its batches
};
inline constexpr int kMemoryCategoryCount = 7;
inline constexpr std::array<const char*, kMemoryCategoryCount> kMemoryCategoryNames = {
    "weight", "master_weight", "gradient", "activation", "optimizer_state", "workspace", "data"};

}  // namespace fpscope::contract
