// Each quantized operand's amax over the steps, for the delayed-scaling recipes
// (contract::ScaleRule::TensorDelayed): the injector replays delayed scaling as the run goes, so a
// tensor's scale at a step comes from the amaxes the same operand had at the previous ones.
//
// An operand is known by its layer range and its tensor's name. Only finite amaxes are kept (a step whose tensor held NaN or Inf adds nothing), at most
// the longest history a recipe asks for. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/fp8_recipes.h"
#include "output_memo.h"

namespace fpscope::inject {

// The last forecast of each operand's bytes (fpscope/fp8_recipes.h), kept while the bytes stay
// unwritten (OutputMemo's generation of their allocation) and given to a later launch that reads
// them with the same view. Thread-safe; holds at most kEntries, the oldest dropped first.
class RecipeMemo {
 public:
  static constexpr std::size_t kEntries = 256;
  bool recall(const OutputMemo::Key& bytes, std::size_t rows, std::size_t cols, bool weight, uint64_t generation,
              RecipeResult* out) const;
  void remember(const OutputMemo::Key& bytes, std::size_t rows, std::size_t cols, bool weight, uint64_t generation,
                const RecipeResult& result);

 private:
  struct Entry {
    OutputMemo::Key bytes;
    std::size_t rows, cols;
    bool weight;
    uint64_t generation;
    RecipeResult result;
  };
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;  // oldest first
};

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
