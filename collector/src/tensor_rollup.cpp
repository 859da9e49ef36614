// The tensor summaries rolled up as rows are written (tensor_rollup.h says when they are used).
// Each column below is the one trace_finalize.sql's summary_ranges and summary_layer_steps name,
// with SQL's NULL rules: a sum or an extreme over NULLs only is NULL.
#include "tensor_rollup.h"

#include <cmath>

namespace fpscope {
namespace {

// The row's REAL value: a NaN is bound as NULL (sql::Statement::bind), so it takes no part, and a
// -0.0 reads back as 0.0 (SQLite keeps a whole REAL as an integer).
void take_max(std::optional<double>& m, double v) {
  if (!std::isnan(v) && (!m || v > *m)) m = v + 0.0;
}
void take_min(std::optional<double>& m, double v) {
  if (!std::isnan(v) && (!m || v < *m)) m = v + 0.0;
}

void bind_sum(sql::Statement& st, int i, bool any, int64_t value) { any ? st.bind(i, value) : st.bind_null(i); }

}  // namespace

size_t TensorRollup::slot_of(int64_t kernel_id) {
  // A launch's number in its process plus the process's ring << 40: mix the ring in, so that
  // launches of two processes with the same number do not share a slot.
  const auto id = static_cast<uint64_t>(kernel_id);
  return static_cast<size_t>((id ^ ((id >> 40) * 0x9E3779B97F4A7C15ull)) % kKernelSlots);
}

void TensorRollup::add_kernel(int64_t id, int64_t name_id, std::optional<int64_t> layer_id,
                              std::optional<int64_t> phase_id, std::optional<int64_t> step) {
  if (kernels_.empty()) kernels_.resize(kKernelSlots);
  kernels_[slot_of(id)] = Kernel{id, name_id, layer_id, phase_id, step};
}

const TensorRollup::Kernel* TensorRollup::kernel(int64_t kernel_id) const {
  if (kernels_.empty()) return nullptr;
  const Kernel& k = kernels_[slot_of(kernel_id)];
  return k.id == kernel_id ? &k : nullptr;
}

TensorRollup::Row* TensorRollup::row_of(int64_t row_id) {
  if (rows_.empty()) return nullptr;
  Row& row = rows_[static_cast<size_t>(row_id) % kRowSlots];
  return row.id == row_id ? &row : nullptr;
}

void TensorRollup::add_tensor(int64_t row_id, int64_t kernel_id, const wire::TensorStatsRecord& s,
                              const wire::FormatCounts* formats, bool intended) {
  if (!usable()) return;
  const Kernel* k = kernel(kernel_id);
  if (!k) return give_up("a tensor whose launch is not among the recent ones the rollup holds");
  if (rows_.empty()) rows_.resize(kRowSlots);
  Row& row = rows_[static_cast<size_t>(row_id) % kRowSlots];
  const bool out = s.role == wire::Role::Output, side = contract::is_later_output(s.role, s.slot);
  row = Row{row_id, out, false, intended, static_cast<int64_t>(s.count),
            Nonfinite{static_cast<int64_t>(s.nan), static_cast<int64_t>(s.pos_inf), static_cast<int64_t>(s.neg_inf)}};

  // summary_ranges' group: kernel name, layer, phase, role ('in' before 'out'), dtype, side.
  Range& r = ranges_[RangeKey{k->name_id, k->layer_id, k->phase_id, out ? 1 : 0, int64_t{s.dtype}, side}];
  row.range = &r;
  ++r.tensors;
  r.elements += row.count;
  r.first_kernel_id = std::min(r.first_kernel_id, kernel_id);
  r.zero += static_cast<int64_t>(s.zero);
  r.subnormal += static_cast<int64_t>(s.subnormal);
  take_max(r.absmax, s.absmax);
  take_min(r.min_nonzero, s.min_nonzero);
  if (out) {
    // summary_layer_steps' group: step, layer, phase, side.
    LayerStep& l = layer_steps_[LayerStepKey{k->step, k->layer_id, k->phase_id, side}];
    row.layer_step = &l;
    ++l.tensors;
    l.elements += row.count;
    take_max(l.absmax, s.absmax);
    take_min(l.min_nonzero, s.min_nonzero);
  }
  add_nonfinite(row, intended, 1);
  if (formats) add_formats(row, formats);
}

void TensorRollup::add_late_intended(int64_t row_id) {
  if (!usable()) return;
  Row* found = row_of(row_id);
  if (!found) return give_up("an intended non-finite record whose row is not among the recent ones the rollup holds");
  Row& row = *found;
  if (row.intended) return give_up("a second intended non-finite record for one tensor");
  add_nonfinite(row, false, -1);
  add_nonfinite(row, true, 1);
  row.intended = true;
}

void TensorRollup::add_nonfinite(const Row& row, bool intended, int sign) {
  Nonfinite& n = intended ? row.range->intended : row.range->unintended;
  n.nan += sign * row.values.nan;
  n.pos_inf += sign * row.values.pos_inf;
  n.neg_inf += sign * row.values.neg_inf;
  if (!row.layer_step) return;
  LayerStep& l = *row.layer_step;
  if (intended) {
    l.intended += sign * (row.values.nan + row.values.pos_inf + row.values.neg_inf);
  } else {
    l.nan += sign * row.values.nan;
    l.inf += sign * (row.values.pos_inf + row.values.neg_inf);
  }
}

void TensorRollup::add_late_formats(int64_t row_id, const wire::FormatCounts* formats) {
  if (!usable()) return;
  Row* found = row_of(row_id);
  if (!found) return give_up("late format counts whose row is not among the recent ones the rollup holds");
  if (found->has_formats) return give_up("format counts that arrived twice for one tensor");
  add_formats(*found, formats);
}

// The format columns of one row, in the groups its other columns went to.
void TensorRollup::add_formats(Row& row, const wire::FormatCounts* formats) {
  row.has_formats = true;
  Range& r = *row.range;
  r.formats_measured_elements.add(row.count);
  for (int f = 0; f < wire::kFormatCount; ++f) {
    const wire::FormatCounts& c = formats[f];
    const uint64_t per_format[] = {c.overflow, c.underflow, c.subnormal, c.near_max};
    for (int i = 0; i < 4; ++i) r.formats[static_cast<size_t>(4 * f + i)].add(static_cast<int64_t>(per_format[i]));
  }
  if (!row.layer_step) return;
  LayerStep& l = *row.layer_step;
  l.f16_overflow.add(static_cast<int64_t>(formats[0].overflow));
  l.f16_underflow.add(static_cast<int64_t>(formats[0].underflow));
}

std::map<int64_t, TensorRollup::StepTotals> TensorRollup::step_totals() const {
  std::map<int64_t, StepTotals> totals;
  for (const auto& [key, l] : layer_steps_) {
    const std::optional<int64_t>& step = std::get<0>(key);
    if (!step) continue;
    StepTotals& t = totals[*step];
    t.nan += l.nan;
    t.inf += l.inf;
    t.intended += l.intended;
  }
  return totals;
}

void TensorRollup::write_rows(const std::string& table, sql::Statement& insert) const {
  if (table == kRangesTable) write_ranges(insert);
  if (table == kLayerStepsTable) write_layer_steps(insert);
}

void TensorRollup::write_ranges(sql::Statement& insert) const {
  for (const auto& [key, r] : ranges_) {
    const auto& [name_id, layer_id, phase_id, out, dtype, side] = key;
    insert.bind(1, name_id).bind(2, layer_id).bind(3, phase_id).bind(4, contract::role_name(out ? contract::Role::Output : contract::Role::Input)).bind(5, dtype);
    insert.bind(6, int64_t{side});
    insert.bind(7, r.tensors).bind(8, r.elements).bind(9, r.first_kernel_id);
    insert.bind(10, r.unintended.nan).bind(11, r.unintended.pos_inf).bind(12, r.unintended.neg_inf);
    insert.bind(13, r.intended.nan).bind(14, r.intended.pos_inf).bind(15, r.intended.neg_inf);
    insert.bind(16, r.zero).bind(17, r.subnormal);
    insert.bind(18, r.absmax).bind(19, r.min_nonzero);
    bind_sum(insert, 20, r.formats_measured_elements.any, r.formats_measured_elements.value);
    for (int c = 0; c < kFormatColumns; ++c) {
      const Sum& s = r.formats[static_cast<size_t>(c)];
      bind_sum(insert, 21 + c, s.any, s.value);
    }
    insert.run();
  }
}

void TensorRollup::write_layer_steps(sql::Statement& insert) const {
  for (const auto& [key, l] : layer_steps_) {
    const auto& [step, layer_id, phase_id, side] = key;
    insert.bind(1, step).bind(2, layer_id).bind(3, phase_id).bind(4, int64_t{side});
    insert.bind(5, l.tensors).bind(6, l.elements).bind(7, l.nan).bind(8, l.inf).bind(9, l.intended);
    insert.bind(10, l.absmax).bind(11, l.min_nonzero);
    bind_sum(insert, 12, l.f16_overflow.any, l.f16_overflow.value);
    bind_sum(insert, 13, l.f16_underflow.any, l.f16_underflow.value);
    insert.run();
  }
}

}  // namespace fpscope
