// Value ranges per layer and kernel: magnitudes, headroom below each format's largest value and room
// above its smallest, and the shares of values a cast to each narrower format would break.
#include "report_util.h"

#include <map>
#include <tuple>

namespace fpscope::analysis {


namespace {

// Sums of one group; format counts stay "unmeasured" until a measured row arrives.
struct Accumulator {
  RangeRow row;
  int64_t first_kernel_id = INT64_MAX;
  int64_t measured_elements = 0;
  std::array<std::array<int64_t, 4>, kFormatCount> counts{};
  bool measured = false;

  // NaN/Inf only: the rows' magnitudes are not the group's (side outputs).
  void add_nonfinite(const sql::Statement& st) {
    row.nan += st.i64(6);
    row.inf += st.i64(7);
    row.intended += st.i64(13 + 4 * kFormatCount);
    first_kernel_id = std::min(first_kernel_id, st.i64(11));
  }

  void add(const sql::Statement& st) {
    row.tensors += st.i64(4);
    row.elements += st.i64(5);
    row.nan += st.i64(6);
    row.inf += st.i64(7);
    row.zero += st.i64(8);
    row.intended += st.i64(13 + 4 * kFormatCount);
    if (auto v = st.opt_f64(9); v && (!row.absmax || *v > *row.absmax)) row.absmax = v;
    if (auto v = st.opt_f64(10); v && (!row.min_nonzero || *v < *row.min_nonzero)) row.min_nonzero = v;
    first_kernel_id = std::min(first_kernel_id, st.i64(11));
    if (!st.is_null(12) && !st.is_null(13)) {
      measured = true;
      measured_elements += st.i64(12);
      for (int f = 0; f < kFormatCount; ++f) {
        for (int c = 0; c < 4; ++c) counts[f][c] += st.i64(13 + 4 * f + c);
      }
    }
  }

  RangeRow finish() {
    row.absmax_exponent = exponent_of(row.absmax);
    row.headroom_f16_log2 = headroom_log2(row.absmax, Format::F16);
    row.headroom_bf16_log2 = headroom_log2(row.absmax, Format::BF16);
    row.footroom_f16_log2 = footroom_log2(row.min_nonzero, Format::F16);
    for (int f = 0; f < kFormatCount && measured && measured_elements > 0; ++f) {
      FormatOutcome& out = row.formats[f];
      out.measured = true;
      out.overflow = counts[f][0];
      out.underflow = counts[f][1];
      out.subnormal = counts[f][2];
      out.near_max = counts[f][3];
      const double n = static_cast<double>(measured_elements);
      out.overflow_share = out.overflow / n;
      out.underflow_share = out.underflow / n;
      out.subnormal_share = out.subnormal / n;
      out.near_max_share = out.near_max / n;
    }
    return row;
  }
};

std::string role_clause(RoleFilter roles) {
  switch (roles) {
    case RoleFilter::Outputs: return "WHERE r.role = 'out' ";
    case RoleFilter::Inputs: return "WHERE r.role = 'in' ";
    case RoleFilter::Both: return "";
  }
  return "";
}

}  // namespace

std::vector<RangeRow> ranges(const Trace& trace, RangeGrouping grouping, RoleFilter roles, SideOutputs side_outputs) {
  // Column 3: the rows are a forward-phase kernel's side outputs (contract::kMainOutputSlot).
  std::string sql =
      "SELECT sk.value, sl.value, r.role, r.side AND r.phase_id IN (SELECT id FROM strings WHERE value IN (?1, ?2)), "
      "  sum(r.tensors), sum(r.elements), sum(r.nan), "
      "  sum(r.pos_inf + r.neg_inf), sum(r.zero), max(r.absmax), min(r.min_nonzero), min(r.first_kernel_id), "
      "  sum(r.formats_measured_elements), "
      "  sum(r.f16_overflow), sum(r.f16_underflow), sum(r.f16_subnormal), sum(r.f16_near_max), "
      "  sum(r.bf16_overflow), sum(r.bf16_underflow), sum(r.bf16_subnormal), sum(r.bf16_near_max), "
      "  sum(r.e4m3_overflow), sum(r.e4m3_underflow), sum(r.e4m3_subnormal), sum(r.e4m3_near_max), "
      "  sum(r.e5m2_overflow), sum(r.e5m2_underflow), sum(r.e5m2_subnormal), sum(r.e5m2_near_max), "
      "  sum(r.intended_nan + r.intended_pos_inf + r.intended_neg_inf) "
      "FROM summary_ranges r JOIN strings sk ON sk.id = r.kernel_name_id "
      "LEFT JOIN strings sl ON sl.id = r.layer_id " +
      role_clause(roles) + "GROUP BY r.kernel_name_id, r.layer_id, r.role, 4";
  sql::Statement st(detail::db(trace), sql);
  st.bind(1, std::string_view(contract::kPhaseForward));
  st.bind(2, std::string_view(contract::kPhaseEval));  // a forward in eval mode
  // Key: (kernel or op, layer, role) as the grouping asks.
  std::map<std::tuple<std::string, std::optional<std::string>, std::string>, Accumulator> groups;
  while (st.step()) {
    std::string kernel = st.text(0);
    std::optional<std::string> layer = st.opt_text(1);
    std::string role = roles == RoleFilter::Both ? "both" : st.text(2);
    std::string key_name = kernel;
    if (grouping == RangeGrouping::Layer) key_name.clear();
    if (grouping == RangeGrouping::Op) key_name = op_of_kernel(kernel);
    if (grouping == RangeGrouping::Kernel) layer.reset();
    if (grouping == RangeGrouping::Op && key_name.empty()) continue;  // not a model op
    auto [it, fresh] = groups.try_emplace({key_name, layer, role});
    Accumulator& acc = it->second;
    if (fresh) {
      acc.row.kernel = grouping == RangeGrouping::LayerKernel || grouping == RangeGrouping::Kernel ? kernel : "";
      acc.row.op = grouping == RangeGrouping::Layer ? "" : op_of_kernel(kernel);
      acc.row.layer = layer;
      acc.row.role = role;
    }
    const bool side_output = st.i64(3) != 0;
    if (side_output && side_outputs == SideOutputs::Apart) acc.add_nonfinite(st);
    else acc.add(st);
  }
  std::vector<std::pair<int64_t, RangeRow>> ordered;
  for (auto& [key, acc] : groups) ordered.emplace_back(acc.first_kernel_id, acc.finish());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<RangeRow> rows;
  for (auto& [first, row] : ordered) rows.push_back(std::move(row));
  return rows;
}

const RangeViewInfo& range_view_info(RangeView view) {
  static const std::array<RangeViewInfo, kRangeViewCount> views = {{
      {RangeView::Activations, "activations", "forward activations (outputs of forward kernels)",
       "forward activations", "layer"},
      {RangeView::GradientsScaled, "gradients", "gradients as stored (scaled by the loss scale)", "scaled gradients",
       "layer"},
      {RangeView::GradientsUnscaled, "gradients-unscaled", "gradients unscaled (divided by the step's loss scale)",
       "unscaled gradients", "layer"},
      {RangeView::Weights, "weights", "weights and master weights after each optimizer step", "weights", "tensor"},
      {RangeView::OptimizerState, "optimizer-state", "optimizer state after each optimizer step", "optimizer state",
       "tensor"},
  }};
  return views[static_cast<std::size_t>(view)];
}

std::optional<RangeView> parse_range_view(std::string_view key) {
  for (int i = 0; i < kRangeViewCount; ++i) {
    const RangeViewInfo& info = range_view_info(static_cast<RangeView>(i));
    if (key == info.key) return info.view;
  }
  return std::nullopt;
}

namespace {

// Outputs of one phase's kernels by layer and step, from the summary; `unscale` divides magnitudes
// by the loss scale in force during the step (1 where the run has none).
// ?3 = 1 (the activations): a side output's magnitudes are not the layer's activation
// (contract::kMainOutputSlot), its NaN/Inf are counted all the same.
constexpr const char* kPhaseCellsSql =
    "SELECT sl.value, r.step, max(iif(r.side AND ?3, NULL, r.absmax)) / coalesce(ls.scale, 1), "
    "       min(iif(r.side AND ?3, NULL, r.min_nonzero)) / coalesce(ls.scale, 1), sum(r.nan + r.inf) "
    "FROM summary_layer_steps r JOIN strings sl ON sl.id = r.layer_id "
    "LEFT JOIN (SELECT step, min(scale_before) AS scale FROM loss_scale WHERE ?2 AND step IS NOT NULL GROUP BY step) ls "
    "  ON ls.step = r.step "
    "WHERE r.step IS NOT NULL AND r.phase_id IN (SELECT id FROM strings WHERE value = ?1) "
    "GROUP BY r.layer_id, r.step ORDER BY r.step, min(r.layer_id)";

// Tensors of the given memory categories that optimizer-phase kernels wrote, by tensor and step.
constexpr const char* kParameterCellsSql =
    "SELECT s.value, k.step, max(t.absmax), min(t.min_nonzero), "
    "       sum(iif(t.id IN (SELECT tensor_id FROM nonfinite WHERE allowed = 1), 0, t.nan + t.pos_inf + t.neg_inf)) "
    "FROM tensors t JOIN kernels k ON k.id = t.kernel_id JOIN strings s ON s.id = t.name_id "
    "WHERE t.role = 'out' AND k.step IS NOT NULL "
    "  AND k.phase_id IN (SELECT id FROM strings WHERE value = ?1) "
    "  AND t.tensor_uid IN (SELECT alloc_id FROM memory_events WHERE kind = 'alloc' AND category IN (?2, ?3)) "
    "GROUP BY t.name_id, k.step ORDER BY k.step, min(t.id)";

}  // namespace

std::vector<LayerStepCell> layer_step_ranges(const Trace& trace, RangeView view) {
  using contract::MemoryCategory;
  auto category = [](MemoryCategory c) { return static_cast<int64_t>(c); };
  const bool by_tensor = view == RangeView::Weights || view == RangeView::OptimizerState;
  sql::Statement st(detail::db(trace), by_tensor ? kParameterCellsSql : kPhaseCellsSql);
  if (by_tensor) {
    st.bind(1, std::string_view(contract::kPhaseOptimizer));
    const bool weights = view == RangeView::Weights;
    st.bind(2, category(weights ? MemoryCategory::Weight : MemoryCategory::OptimizerState));
    st.bind(3, category(weights ? MemoryCategory::MasterWeight : MemoryCategory::OptimizerState));
  } else {
    st.bind(1, std::string_view(view == RangeView::Activations ? contract::kPhaseForward : contract::kPhaseBackward));
    st.bind(2, int64_t{view == RangeView::GradientsUnscaled ? 1 : 0});
    st.bind(3, int64_t{view == RangeView::Activations ? 1 : 0});
  }
  std::vector<LayerStepCell> cells;
  while (st.step()) {
    LayerStepCell c;
    c.layer = st.text(0);
    c.step = st.i64(1);
    c.absmax = st.opt_f64(2);
    c.min_nonzero = st.opt_f64(3);
    c.nonfinite = st.i64(4);
    cells.push_back(std::move(c));
  }
  return cells;
}

std::optional<CellTensor> largest_tensor_of_cell(const Trace& trace, RangeView view, std::string_view row,
                                                 int64_t step) {
  using contract::MemoryCategory;
  auto category = [](MemoryCategory c) { return static_cast<int64_t>(c); };
  const bool by_tensor = view == RangeView::Weights || view == RangeView::OptimizerState;
  // The same tensors as the cell's query: a phase's outputs in a layer, or the optimizer's outputs
  // of one parameter tensor of the view's categories.
  sql::Statement st(detail::db(trace),
                    by_tensor
                        ? "SELECT t.kernel_id, t.id, s.value, t.absmax "
                          "FROM tensors t JOIN kernels k ON k.id = t.kernel_id JOIN strings s ON s.id = t.name_id "
                          "WHERE t.role = 'out' AND k.step = ?2 AND s.value = ?1 AND t.absmax IS NOT NULL "
                          "  AND k.phase_id IN (SELECT id FROM strings WHERE value = ?3) "
                          "  AND t.tensor_uid IN (SELECT alloc_id FROM memory_events "
                          "                       WHERE kind = 'alloc' AND category IN (?4, ?5)) "
                          "ORDER BY t.absmax DESC, t.id LIMIT 1"
                        : "SELECT t.kernel_id, t.id, s.value, t.absmax "
                          "FROM tensors t JOIN kernels k ON k.id = t.kernel_id JOIN strings s ON s.id = t.name_id "
                          "WHERE t.role = 'out' AND k.step = ?2 AND t.absmax IS NOT NULL "
                          "  AND k.layer_id IN (SELECT id FROM strings WHERE value = ?1) "
                          "  AND k.phase_id IN (SELECT id FROM strings WHERE value = ?3) "
                          "  AND (t.slot = ?4 OR NOT ?5) "
                          "ORDER BY t.absmax DESC, t.id LIMIT 1");
  st.bind(1, row);
  st.bind(2, step);
  if (by_tensor) {
    const bool weights = view == RangeView::Weights;
    st.bind(3, std::string_view(contract::kPhaseOptimizer));
    st.bind(4, category(weights ? MemoryCategory::Weight : MemoryCategory::OptimizerState));
    st.bind(5, category(weights ? MemoryCategory::MasterWeight : MemoryCategory::OptimizerState));
  } else {
    st.bind(3, std::string_view(view == RangeView::Activations ? contract::kPhaseForward : contract::kPhaseBackward));
    st.bind(4, int64_t{contract::kMainOutputSlot});  // an activation is a main output
    st.bind(5, int64_t{view == RangeView::Activations ? 1 : 0});
  }
  if (!st.step()) return std::nullopt;
  return CellTensor{st.i64(0), st.i64(1), st.text(2), st.opt_f64(3)};
}

std::vector<ViewRangeRow> view_ranges(const Trace& trace, RangeView view) {
  return view_ranges(layer_step_ranges(trace, view));
}

std::vector<ViewRangeRow> view_ranges(const std::vector<LayerStepCell>& cells) {
  std::vector<ViewRangeRow> rows;
  std::map<std::string, std::size_t> index;
  for (const LayerStepCell& c : cells) {
    auto [it, fresh] = index.emplace(c.layer, rows.size());
    if (fresh) rows.push_back(ViewRangeRow{c.layer, 0, std::nullopt, std::nullopt, std::nullopt, std::nullopt, 0});
    ViewRangeRow& r = rows[it->second];
    ++r.steps;
    r.nonfinite += c.nonfinite;
    if (c.absmax && (!r.absmax || *c.absmax > *r.absmax)) r.absmax = c.absmax;
    if (c.min_nonzero && (!r.min_nonzero || *c.min_nonzero < *r.min_nonzero)) r.min_nonzero = c.min_nonzero;
  }
  for (ViewRangeRow& r : rows) {
    r.headroom_f16_log2 = headroom_log2(r.absmax, Format::F16);
    r.footroom_f16_log2 = footroom_log2(r.min_nonzero, Format::F16);
  }
  return rows;
}

}  // namespace fpscope::analysis
