#include "amax_history.h"

#include <algorithm>
#include <cmath>

namespace fpscope::inject {

bool RecipeMemo::recall(const OutputMemo::Key& bytes, std::size_t rows, std::size_t cols, bool weight,
                        uint64_t generation, RecipeResult* out) const {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    const Entry& e = *it;
    if (e.bytes.data == bytes.data && e.bytes.type == bytes.type && e.bytes.count == bytes.count) {
      if (e.rows != rows || e.cols != cols || e.weight != weight || e.generation != generation) return false;
      *out = e.result;
      return true;
    }
  }
  return false;
}

void RecipeMemo::remember(const OutputMemo::Key& bytes, std::size_t rows, std::size_t cols, bool weight,
                          uint64_t generation, const RecipeResult& result) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->bytes.data == bytes.data && it->bytes.type == bytes.type && it->bytes.count == bytes.count) {
      entries_.erase(it);
      break;
    }
  }
  entries_.push_back({bytes, rows, cols, weight, generation, result});
  if (entries_.size() > kEntries) entries_.pop_front();
}

void AmaxHistory::lookup(const std::string& key, std::array<double, contract::kRecipeCount>* history_amax) const {
  std::lock_guard lock(mutex_);
  const auto it = amaxes_.find(key);
  for (std::size_t i = 0; i < contract::kRecipes.size(); ++i) {
    const contract::RecipeInfo& r = contract::kRecipes[i];
    if (r.rule != contract::ScaleRule::TensorDelayed) continue;
    double largest = 0;
    if (it != amaxes_.end()) {
      const std::deque<double>& d = it->second;
      const std::size_t n = std::min(d.size(), std::size_t(r.history));
      for (std::size_t k = d.size() - n; k < d.size(); ++k) largest = std::max(largest, d[k]);
    }
    (*history_amax)[i] = largest;
  }
}

void AmaxHistory::record(const std::string& key, double amax) {
  if (!std::isfinite(amax)) return;
  std::lock_guard lock(mutex_);
  std::deque<double>& d = amaxes_[key];
  d.push_back(amax);
  if (d.size() > kLongest) d.pop_front();
}

}  // namespace fpscope::inject
