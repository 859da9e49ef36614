// Each quantized operand's amax over the steps, for the delayed-scaling recipes
// (contract::ScaleRule::TensorDelayed): the injector replays delayed scaling as the run goes, so a
// tensor's scale at a step comes from the amaxes the same operand had at the previous ones.
//
// An operand is known by its place: the kernel, the input slot, the layer range and the tensor's
// name. Only finite amaxes are kept (a step whose tensor held NaN or Inf adds nothing), at most
// the longest history a recipe asks for. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fpscope/contract/scaling_recipes.h"

namespace fpscope::inject {

class AmaxHistory {
 public:
  // For every delayed recipe, the largest amax among the last `history` ones kept for `key`
  // (0: none yet); other recipes' entries are left as they are.
  void lookup(const std::string& key, std::array<double, contract::kRecipeCount>* history_amax) const;
  // Adds this step's amax of `key` (ignored unless finite).
  void record(const std::string& key, double amax);

  static constexpr std::size_t kLongest = [] {
    std::size_t n = 0;
    for (const contract::RecipeInfo& r : contract::kRecipes) n = r.history > int(n) ? std::size_t(r.history) : n;
    return n;
  }();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::deque<double>> amaxes_;  // oldest first
};

}  // namespace fpscope::inject
