// The fp8 recipe forecast of a measured tensor (fpscope/fp8_recipes.h): for the operands fp8
// training quantizes (contract::kQuantizedOperands), or every tensor with FPSCOPE_RECIPES=all,
// each recipe replayed over the tensor, delayed scaling from the operand's own amax history.
#include <string>

#include "launch_path.h"
#include "tensor_view.h"

namespace fpscope::inject {

void Session::forecast_recipes(const LaunchPlan& p, Measurement* m) {
  m->has_recipes = false;
  if (!options_.forecasts_recipes()) return;
  const mpt_tensor& t = *m->tensor;
  const std::optional<ElementType> type = float_type(t.dtype);
  if (!type || !recipes_read(*type)) return;
  std::optional<contract::Operand> operand;
  if (m->role == wire::Role::Input) operand = contract::quantized_operand(p.kernel, m->slot);
  if (!operand) {
    if (options_.recipes != RecipeTensors::All) return;
    operand = contract::Operand::Other;
  }
  // Blocks run along the contiguous last dimension; a weight is the GEMM's view of it, its first
  // dimension by the rest (a convolution's [out, in, kh, kw] as out rows of in*kh*kw).
  RecipeRequest q;
  const uint64_t n = element_count(t);
  q.weight = *operand == contract::Operand::Weight;
  q.rows = 1;
  q.cols = n;
  if (t.ndim > 0) {
    const int64_t d = q.weight ? t.shape[0] : t.shape[t.ndim - 1];
    if (d > 0 && n % uint64_t(d) == 0) {
      q.rows = q.weight ? uint64_t(d) : n / uint64_t(d);
      q.cols = q.weight ? n / uint64_t(d) : uint64_t(d);
    }
  }
  std::string key = p.kernel;
  key += '\x1f';
  key += std::to_string(m->slot);
  key += '\x1f';
  key += p.layer ? p.layer : "";
  key += '\x1f';
  key += t.name ? t.name : "";
  amax_history_.lookup(key, &q.history_amax);
  compute_recipes(t.data, *type, q, &m->recipes);
  amax_history_.record(key, m->recipes.amax);
  m->operand = *operand;
  m->has_recipes = true;
}

}  // namespace fpscope::inject
