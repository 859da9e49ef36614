// The exponent histogram panel (exponent_histogram.h).
#include "views/exponent_histogram.h"

#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "views/view_util.h"

namespace fpscope::gui {

const TraceDoc* ExponentHistogramPanel::selected_doc(ViewContext& ctx) const {
  if (!ctx.selection.kernel) return nullptr;
  for (const auto& d : ctx.traces.docs()) {
    if (d->id() == ctx.selection.kernel->trace_id && d->data()) return d.get();
  }
  return nullptr;
}

void ExponentHistogramPanel::draw(ViewContext& ctx, const std::optional<TensorRef>& fallback) {
  heading("Exponent histogram of the selected tensor");
  const TraceDoc* doc = selected_doc(ctx);
  if (!doc) {
    if (!fallback) {
      ImGui::TextDisabled("Select a heat map cell, or a kernel in the timeline, to see its tensor's exponents.");
      return;
    }
    ImGui::TextDisabled("Nothing selected: showing the source's largest layer output. Click a cell to choose.");
    std::string error;
    const TraceData& d = *fallback->doc->data();
    if (const auto* h = details_.histogram(d, fallback->tensor_id, &error)) {
      draw_format_choice();
      draw_histogram(*h, find_record(d, fallback->kernel_id, fallback->tensor_id));
    } else {
      ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", error.c_str());
    }
    return;
  }
  const TraceData& d = *doc->data();
  // A kernel chosen elsewhere: show its largest output (or first tensor).
  if (!ctx.selection.tensor_id) {
    if (const auto* ts = details_.tensors(d, ctx.selection.kernel->kernel_id, nullptr); ts && !ts->empty()) {
      const analysis::TensorRecord* pick = &ts->front();
      for (const auto& t : *ts) {
        const std::string_view out = contract::role_name(contract::Role::Output);
        if (t.role == out && t.absmax && (!pick->absmax || pick->role != out || *t.absmax > *pick->absmax)) pick = &t;
      }
      ctx.selection.tensor_id = pick->id;
      ctx.selection.tensor_name = pick->name;
    }
  }
  if (!ctx.selection.tensor_id) {
    ImGui::TextDisabled("The selected kernel has no measured tensors.");
    return;
  }
  draw_tensor_picker(ctx, d);
  std::string error;
  const analysis::ExponentHistogram* h = details_.histogram(d, *ctx.selection.tensor_id, &error);
  if (!h) {
    ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", error.c_str());
    return;
  }
  draw_histogram(*h, find_record(d, ctx.selection.kernel->kernel_id, *ctx.selection.tensor_id));
}

const analysis::TensorRecord* ExponentHistogramPanel::find_record(const TraceData& d, int64_t kernel_id, int64_t tensor_id) {
  const auto* ts = details_.tensors(d, kernel_id, nullptr);
  if (!ts) return nullptr;
  for (const auto& t : *ts) {
    if (t.id == tensor_id) return &t;
  }
  return nullptr;
}

// The cast table's width: each column as wide as its header, the widest format name or a count of
// tens of millions, whichever is wider, with the table's cell padding and borders, so that the side
// panel holds it whole.
float ExponentHistogramPanel::cast_table_width() {
  const float pad = 2 * ImGui::GetStyle().CellPadding.x + 1;
  float names = ImGui::CalcTextSize("format").x;
  for (int f = 0; f < analysis::kFormatCount; ++f)
    names = std::max(names, ImGui::CalcTextSize(analysis::format_limits(static_cast<analysis::Format>(f)).name).x);
  const float count = ImGui::CalcTextSize("88,888,888").x;
  float width = names + pad;
  for (const char* h : {"overflow", "flush to 0", "subnormal"}) width += std::max(ImGui::CalcTextSize(h).x, count) + pad;
  return width + ImGui::GetStyle().ItemSpacing.x;
}

// What a cast of the tensor to each narrower format would do, as the trace counted it.
void ExponentHistogramPanel::draw_cast_table(const analysis::TensorRecord& t) {
  ImGui::Text("%s  %s  %s", t.dtype.c_str(), t.shape.c_str(), analysis::human_count(t.count).c_str());
  ImGui::Text("absmax %s", analysis::human_optional(t.absmax).c_str());
  ImGui::Text("min nonzero %s", analysis::human_optional(t.min_nonzero).c_str());
  ImGui::Text("rms %s", analysis::human_optional(t.rms).c_str());
  ImGui::Spacing();
  ImGui::TextDisabled("values a cast would");
  if (!ImGui::BeginTable("cast", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit)) return;
  for (const char* h : {"format", "overflow", "flush to 0", "subnormal"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (int f = 0; f < analysis::kFormatCount; ++f) {
    const auto& o = t.formats[static_cast<size_t>(f)];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(analysis::format_limits(static_cast<analysis::Format>(f)).name);
    if (!o.measured) {
      ImGui::TableNextColumn();
      ImGui::TextDisabled("not measured");
      continue;
    }
    ImGui::TableNextColumn();
    ImGui::TextColored(colors::to_vec4(o.overflow ? colors::kOverflow : colors::kDimText), "%s", analysis::human_count(o.overflow).c_str());
    ImGui::TableNextColumn();
    ImGui::TextColored(colors::to_vec4(o.underflow ? colors::kUnderflow : colors::kDimText), "%s", analysis::human_count(o.underflow).c_str());
    ImGui::TableNextColumn();
    ImGui::TextColored(colors::to_vec4(o.subnormal ? colors::kWarningText : colors::kDimText), "%s", analysis::human_count(o.subnormal).c_str());
  }
  ImGui::EndTable();
}

void ExponentHistogramPanel::draw_tensor_picker(ViewContext& ctx, const TraceData& d) {
  const auto* ts = details_.tensors(d, ctx.selection.kernel->kernel_id, nullptr);
  if (!ts) return;
  ImGui::TextDisabled("launch %s, tensor:", analysis::human_launch(ctx.selection.kernel->kernel_id).c_str());
  for (const auto& t : *ts) {
    ImGui::SameLine();
    const std::string label = t.name + " (" + t.role + ")";
    if (ImGui::RadioButton(label.c_str(), ctx.selection.tensor_id == t.id)) {
      ctx.selection.tensor_id = t.id;
      ctx.selection.tensor_name = t.name;
    }
  }
  ImGui::SameLine(0, 30);
  draw_format_choice();
}

void ExponentHistogramPanel::draw_format_choice() {
  ImGui::TextDisabled("bands of:");
  for (int f = 0; f < analysis::kFormatCount; ++f) {
    ImGui::SameLine();
    ImGui::RadioButton(analysis::format_limits(static_cast<analysis::Format>(f)).name, &shaded_format_, f);
  }
}

void ExponentHistogramPanel::draw_histogram(const analysis::ExponentHistogram& h, const analysis::TensorRecord* record) {
  ImGui::Text("%s of %s (%s): %lld zero, %lld NaN, %lld Inf", h.tensor.c_str(), h.kernel.c_str(), h.dtype.c_str(),
              static_cast<long long>(h.zero), static_cast<long long>(h.nan), static_cast<long long>(h.inf));
  if (!h.measured || h.bins.empty()) {
    ImGui::TextDisabled(h.measured ? "no finite nonzero values" : "this trace has no histograms (--stats basic)");
    return;
  }
  const auto& f = analysis::format_limits(static_cast<analysis::Format>(shaded_format_));
  const double fmax = std::log2(f.max_finite), fnorm = std::log2(f.min_normal), fsub = std::log2(f.min_subnormal);
  plot::Range xr = plot::Range::empty();
  int64_t peak = 1;
  for (const auto& [e, n] : h.bins) {
    xr.include(e);
    xr.include(e + 1);
    peak = std::max(peak, n);
  }
  xr.include(fsub - 1);
  xr.include(std::min(fmax + 2, xr.hi + 8));
  const float strips_h = ImGui::GetTextLineHeight() * 4 + 16;
  const float side_w = std::max(ImGui::GetFontSize() * 20, cast_table_width());
  float left = 0, right = 0;
  ImGui::BeginGroup();
  {
    plot::Plot p("hist", ImVec2(-side_w, -strips_h),
                 plot::Axis{"exponent e (values in [2^e, 2^(e+1)))", xr, plot::Scale::kLinear, exp_label},
                 plot::Axis{"values", plot::Range{0, static_cast<double>(peak) * 1.08}, plot::Scale::kLinear, {}});
    p.vband(xr.lo, fsub, colors::im(palette::kBandFlush, 40));
    p.vband(fsub, fnorm, colors::im(palette::kBandSubnormal, 45));
    p.vband(fnorm, fmax, colors::im(palette::kBandNormal, 30));
    p.vband(fmax, xr.hi, colors::im(palette::kBandOverflow, 50));
    for (const auto& [e, n] : h.bins) {
      const bool over = e + 1 > fmax, under = e < fsub, sub = e < fnorm;
      const ImU32 c = over    ? colors::im(palette::kBandOverflow)
                       : under ? colors::im(palette::kBandFlush)
                       : sub   ? colors::im(palette::kBandSubnormal)
                               : IM_COL32(200, 200, 215, 255);
      p.bar(e + 0.08, e + 0.92, 0, static_cast<double>(n), c);
    }
    const std::vector<plot::LegendItem> legend = {
        {std::string(f.name) + " normal", colors::im(palette::kBandNormal, 160), true},
        {std::string(f.name) + " subnormal", colors::im(palette::kBandSubnormal, 160), true},
        {std::string(f.name) + " overflow", colors::im(palette::kBandOverflow, 160), true},
        {"flush to zero", colors::im(palette::kBandFlush, 160), true}};
    p.legend(legend);
    p.hover_readout([&](double x) {
      const int e = static_cast<int>(std::floor(x));
      int64_t n = 0;
      for (const auto& [be, bn] : h.bins) {
        if (be == e) n = bn;
      }
      ImGui::Text("[2^%d, 2^%d): %lld values", e, e + 1, static_cast<long long>(n));
    });
    left = p.area_min().x;
    right = p.area_max().x;
  }  // the plot's clip rectangle ends here; the strips go below it
  draw_format_strips(xr, left, right,
                     [&](double x) { return left + static_cast<float>((x - xr.lo) / xr.span()) * (right - left); });
  ImGui::EndGroup();
  if (record) {
    ImGui::SameLine(0, 16);
    ImGui::BeginGroup();
    draw_cast_table(*record);
    ImGui::EndGroup();
  }
}

template <typename ToPx>
void ExponentHistogramPanel::draw_format_strips(const plot::Range& xr, float left, float right, ToPx px) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(right - origin.x, line * 4 + 8));
  for (int fi = 0; fi < analysis::kFormatCount; ++fi) {
    const auto& f = analysis::format_limits(static_cast<analysis::Format>(fi));
    const float y = origin.y + static_cast<float>(fi) * (line + 2);
    const double fmax = std::log2(f.max_finite), fnorm = std::log2(f.min_normal), fsub = std::log2(f.min_subnormal);
    auto band = [&](double e0, double e1, ImU32 c) {
      const float x0 = std::clamp(px(std::max(e0, xr.lo)), left, right);
      const float x1 = std::clamp(px(std::min(e1, xr.hi)), left, right);
      if (x1 > x0) dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + line), c);
    };
    band(xr.lo, fsub, colors::im(palette::kBandFlush, 150));
    band(fsub, fnorm, colors::im(palette::kBandSubnormal, 170));
    band(fnorm, fmax, colors::im(palette::kBandNormal, 150));
    band(fmax, xr.hi, colors::im(palette::kBandOverflow, 170));
    const float w = ImGui::CalcTextSize(f.name).x;
    dl->AddText(ImVec2(left - w - 8, y), IM_COL32(210, 210, 220, 255), f.name);
  }
}

}  // namespace fpscope::gui
