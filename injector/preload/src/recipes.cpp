// The fp8 recipe forecast of a measured tensor (fpscope/fp8_recipes.h): for the operands fp8
// training quantizes (contract::kQuantizedOperands for mptrain's kernels, contract::kMatrixOperators
// for a front end's operators), or every tensor with FPSCOPE_RECIPES=all,
// each recipe replayed over the tensor, delayed scaling from the tensor's own amax history.
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
  // A front end's matrix product (PyTorch's mm, addmm, convolution...): its operands by what they hold.
  const bool front_end_product =
      !operand && m->role == wire::Role::Input && contract::matrix_operand_slot(p.kernel, m->slot);
  if (front_end_product) operand = operand_of(t.id);
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
  // An operand is quantized once per version of its bytes, as fp8 training casts a weight once a
  // step for its forward and backward products, and keeps an activation's and an output
  // gradient's fp8 copies for both of theirs: a launch that reads bytes the forecast already
  // replayed with the same view, unwritten since, takes that forecast, and the delayed recipes'
  // history (one per tensor: its layer and name) gains one amax per version.
  const OutputMemo::Key bytes{t.data, *type, n};
  const uint64_t generation = p.memo ? memo_.generation(bytes) : 0;
  if (generation != 0 && recipe_memo_.recall(bytes, q.rows, q.cols, q.weight, generation, &m->recipes)) {
    m->operand = *operand;
    m->has_recipes = true;
    return;
  }
  std::string key = p.layer ? p.layer : "";
  key += '\x1f';
  key += t.name ? t.name : "";
  // A front end names tensors by the layer and operator that made them, so that two operands of
  // one product may share a name (autocast's casts of a layer's input and of its weight are both
  // "<layer>._to_copy"): its operands' histories are told apart by operator and slot too.
  if (front_end_product) {
    key += '\x1f';
    key += p.kernel;
    key += '\x1f';
    key += std::to_string(m->slot);
  }
  amax_history_.lookup(key, &q.history_amax);
  compute_recipes(t.data, *type, q, &m->recipes);
  amax_history_.record(key, m->recipes.amax);
  if (generation != 0) recipe_memo_.remember(bytes, q.rows, q.cols, q.weight, generation, m->recipes);
  m->operand = *operand;
  m->has_recipes = true;
}

}  // namespace fpscope::inject
