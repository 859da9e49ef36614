// The trace writer's handlers of what a launch's numerics lost, each a row beside its tensor or
// launch: the fp8 recipes' forecast (tensor_recipes), a kernel's narrowing-store counts
// (tensor_stores) and an optimizer step's parameter update (param_updates). The other records'
// handlers are in trace_records.cpp.
#include <cmath>

#include "trace_writer_impl.h"

namespace fpscope {

void TraceWriter::Impl::handle(const wire::TensorRecipesRecord& r) {
  const auto row = tensor_row(r.seq, r.role_slot);
  if (!row || r.operand >= contract::kOperandNames.size()) {
    ++(row ? counts.malformed_records : counts.unmatched_events);
    return;
  }
  sql::Statement& st = *insert_tensor_recipes;
  const std::string_view operand = contract::kOperandNames[r.operand];
  for (int i = 0; i < contract::kRecipeCount; ++i) {
    const wire::RecipeCounts& c = r.recipes[i];
    const int at = i * kTensorRecipeColumns;
    st.bind(at + 1, *row);
    st.bind(at + 2, kernel_id(r.seq));
    st.bind_static(at + 3, operand);
    st.bind(at + 4, int64_t{i});
    const uint64_t counters[] = {c.values, c.underflow, c.subnormal, c.saturated, c.blocks,
                                 uint64_t{c.blocks_lost}, uint64_t{c.blocks_nonfinite}};
    for (int k = 0; k < 7; ++k) st.bind(at + 5 + k, counters[k]);
    st.bind(at + 12, c.sse);
    st.bind(at + 13, c.signal);
    st.bind(at + 14, c.scale);  // NaN (a block recipe) binds NULL
    std::isfinite(r.amax) ? st.bind(at + 15, r.amax) : st.bind_null(at + 15);
    st.bind(at + 16, src->rank);
  }
  st.run();
  row_written();
  counts.tensor_recipes += contract::kRecipeCount;
}

void TraceWriter::Impl::handle(const wire::TensorStoreRecord& r) {
  const auto row = tensor_row(r.seq, r.role_slot);
  if (!row) {
    ++counts.unmatched_events;
    return;
  }
  if (r.flushed + r.subnormal + r.overflowed > r.results) {
    ++counts.malformed_records;
    return;
  }
  sql::Statement& st = *insert_tensor_store;
  st.bind(1, *row);
  st.bind(2, r.results);
  st.bind(3, r.flushed);
  st.bind(4, r.subnormal);
  st.bind(5, r.overflowed);
  st.bind(6, src->rank);
  st.run();
  row_written();
  ++counts.tensor_stores;
}

void TraceWriter::Impl::handle(const wire::ParamUpdateRecord& r) {
  const bool counted = r.nonzero_from == wire::NonzeroFrom::Update || r.nonzero_from == wire::NonzeroFrom::Gradient;
  if (r.changed > r.elements || static_cast<uint8_t>(r.nonzero_from) > 2 ||
      (counted && (r.nonzero > r.elements || r.lost > r.nonzero))) {
    ++counts.malformed_records;
    return;
  }
  sql::Statement& st = *insert_param_update;
  r.seq != 0 ? st.bind(1, kernel_id(r.seq)) : st.bind_null(1);
  st.bind(2, sid(r.name));
  r.tensor_id != 0 ? st.bind(3, r.tensor_id) : st.bind_null(3);
  st.bind(4, uint32_t{r.dtype});
  st.bind(5, r.elements);
  st.bind(6, r.changed);
  if (counted) {
    st.bind(7, r.nonzero);
    st.bind(8, r.lost);
  } else {
    st.bind_null(7);
    st.bind_null(8);
  }
  if (r.computed_known) {
    st.bind(9, r.computed_abs_sum);
    st.bind(10, r.computed_sq_sum);
  } else {
    st.bind_null(9);
    st.bind_null(10);
  }
  st.bind(11, r.applied_abs_sum);
  st.bind(12, r.applied_sq_sum);
  st.bind(13, r.weight_sq_sum);
  st.bind(14, src->rank);
  r.step >= 0 ? st.bind(15, r.step) : st.bind_null(15);
  if (counted)
    st.bind_static(16, r.nonzero_from == wire::NonzeroFrom::Update ? std::string_view("update") : std::string_view("gradient"));
  else
    st.bind_null(16);
  st.run();
  row_written();
  ++counts.param_updates;
}

}  // namespace fpscope
