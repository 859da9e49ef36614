#include "amax_history.h"

#include <algorithm>
#include <cmath>

namespace fpscope::inject {

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
