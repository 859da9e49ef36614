// fp8 readiness view: the scaling recipes' forecast of a run (`fpscope run --recipes operands`), as
// `fpscope report --section fp8` gives it: a grid of layer operands by recipes, each cell coloured
// by whether the recipe fits and, where it does not, by how far past its threshold (the worst of
// underflow, saturation and SQNR); the layers' verdicts beside it. A click on a cell shows the
// exponent histogram of that operand's worst tensor under the recipe, with the recipe's window
// drawn over it: where its values would flush to zero, land subnormal, keep their precision or
// saturate, at the scale the recipe gave that tensor (a block recipe: the block holding the
// tensor's largest value).
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "ui/plot.h"
#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

using analysis::Fp8Readiness;
using contract::kRecipeCount;
using analysis::Misfit;
using analysis::OperandReadiness;
using analysis::RecipeFigures;

std::string row_label(const OperandReadiness& o) {
  return (o.layer.empty() ? std::string("(no layer)") : o.layer) + " " + contract::operand_name(o.operand);
}

class Fp8View final : public View {
 public:
  const char* name() const override { return "fp8"; }
  const char* title() const override { return "fp8 readiness"; }

  void draw(ViewContext& ctx) override {
    if (draw_empty_state(ctx.traces)) return;
    const auto& docs = ctx.traces.docs();
    const int runs = std::min<int>(2, static_cast<int>(docs.size()));
    if (runs > 1) {
      ImGui::AlignTextToFramePadding();
      ImGui::TextUnformatted("run");
      for (int i = 0; i < runs; ++i) {
        ImGui::SameLine();
        if (ImGui::RadioButton(run_label(*docs[static_cast<size_t>(i)], i).c_str(), run_ == i)) run_ = i;
      }
    }
    run_ = std::min(run_, runs - 1);
    const TraceDoc& doc = *docs[static_cast<size_t>(run_)];
    const TraceData* d = loaded(&doc);
    if (!d) {
      ImGui::TextDisabled("this trace is not loaded");
      return;
    }
    if (cached_for_ != d) {
      cached_for_ = d;
      picked_.reset();
      histogram_.reset();
    }
    readiness_ = &d->fp8;
    if (!readiness_->forecast) {
      ImGui::TextWrapped("%s", analysis::no_forecast_text(*readiness_).c_str());
      return;
    }
    draw_verdicts();
    ImGui::Spacing();
    ImGui::PushStyleColor(ImGuiCol_Text, colors::to_vec4(colors::kDimText));
    ImGui::TextWrapped(
        "Each cell: the recipe's SQNR in dB over every step traced. Green: it fits (brighter, more SQNR to spare); "
        "amber: past a threshold by less than 10 times; red: far past it; hover for the figures.");
    ImGui::PopStyleColor();
    if (!picked_) picked_ = default_pick();
    draw_grid(ImVec2(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y * 0.5f));
    ImGui::Spacing();
    draw_window(*d);
  }

 private:
  void draw_verdicts() {
    heading("Layers");
    for (const auto& l : readiness_->layers) {
      const std::string name = l.layer.empty() ? "(no layer)" : l.layer;
      if (l.keep_high_precision) {
        ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s: keep in bf16", name.c_str());
        if (l.closest && l.failing_operand) {
          ImGui::SameLine();
          ImGui::TextDisabled("(closest: %s, its %s fails on %s)", contract::recipe_info(*l.closest).name,
                              contract::operand_name(*l.failing_operand), analysis::misfit_name(l.failure));
        }
      } else {
        ImGui::TextColored(colors::to_vec4(colors::kOkText), "%s: fp8, best %s", name.c_str(),
                           l.best_8bit ? contract::recipe_info(*l.best_8bit).name : "-");
        ImGui::SameLine();
        ImGui::TextDisabled("(%zu recipes fit)", l.fitting.size());
      }
    }
  }

  void draw_grid(ImVec2 size) {
    const auto& rows = readiness_->operands;
    if (rows.empty()) return;
    const float line = ImGui::GetTextLineHeight();
    float label_w = 0;
    for (const auto& o : rows) label_w = std::max(label_w, ImGui::CalcTextSize(row_label(o).c_str()).x);
    label_w += 12;
    const float header_h = line * 2.2f;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float row_h = std::clamp((size.y - header_h) / float(rows.size()), line + 4, line * 2.2f);
    const float col_w = (size.x - label_w) / float(kRecipeCount);
    const ImVec2 total(size.x, header_h + row_h * float(rows.size()));
    ImGui::InvisibleButton("grid", total);
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (int c = 0; c < kRecipeCount; ++c) {  // recipe names, two lines where they have a second part
      const std::string name = contract::kRecipes[std::size_t(c)].name;
      const std::size_t dash = name.find('-');
      const float x = origin.x + label_w + col_w * float(c) + 3;
      // A part wider than its column is drawn smaller (down to two thirds) before it is clipped, so
      // that delayed-e4m3 and delayed16-e4m3 stay two names in a narrow window.
      auto fitted = [&](const std::string& text, float y, ImU32 color) {
        const float width = std::max(ImGui::CalcTextSize(text.c_str()).x, 1.0f);
        const float scale = std::clamp((col_w - 5) / width, 0.66f, 1.0f);
        dl->AddText(ImGui::GetFont(), ImGui::GetFontSize() * scale, ImVec2(x, y), color, text.c_str());
      };
      dl->PushClipRect(ImVec2(x, origin.y), ImVec2(x + col_w - 4, origin.y + header_h), true);
      fitted(name.substr(0, dash), origin.y, IM_COL32(210, 210, 220, 255));
      if (dash != std::string::npos) fitted(name.substr(dash + 1), origin.y + line * 0.8f, colors::kDimText);
      dl->PopClipRect();
    }
    std::optional<std::pair<std::size_t, int>> hover;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const OperandReadiness& o = rows[r];
      const float y0 = origin.y + header_h + row_h * float(r);
      dl->AddText(ImVec2(origin.x, y0 + (row_h - line) / 2), IM_COL32(210, 210, 220, 255), row_label(o).c_str());
      for (int c = 0; c < kRecipeCount; ++c) {
        const ImVec2 p0(origin.x + label_w + col_w * float(c), y0);
        const ImVec2 p1(p0.x + col_w - 2, y0 + row_h - 2);
        const ImU32 fill = colors::im(analysis::recipe_cell_color(o, static_cast<analysis::Recipe>(c), readiness_->thresholds));
        dl->AddRectFilled(p0, p1, fill);
        if (const std::string text = analysis::recipe_cell_text(o, static_cast<analysis::Recipe>(c));
            !text.empty() && col_w > ImGui::CalcTextSize("00.0").x + 4)
          dl->AddText(ImVec2(p0.x + 3, p0.y + (row_h - line) / 2 - 1), colors::contrast_text(fill), text.c_str());
        if (picked_ && picked_->first == r && picked_->second == c) dl->AddRect(p0, p1, colors::kSelection, 0, 0, 2);
        if (hovered && mouse.x >= p0.x && mouse.x < p1.x && mouse.y >= p0.y && mouse.y < p1.y) hover = {{r, c}};
      }
    }
    if (hover) {
      const OperandReadiness& o = rows[hover->first];
      const RecipeFigures& f = o.recipes[std::size_t(hover->second)];
      ImGui::BeginTooltip();
      ImGui::Text("%s, %s", row_label(o).c_str(), contract::kRecipes[std::size_t(hover->second)].description);
      ImGui::Text("underflow %s, subnormal %s, saturated %s",
                  analysis::human_percent(f.underflow_share().value_or(0)).c_str(),
                  analysis::human_percent(f.quantized ? double(f.subnormal) / double(f.quantized) : 0).c_str(),
                  analysis::human_percent(f.saturated_share().value_or(0)).c_str());
      ImGui::Text("SQNR %s dB over %lld tensors; worst %s dB at step %s", analysis::human_optional(f.sqnr_db()).c_str(),
                  static_cast<long long>(f.tensors), analysis::human_optional(f.worst_sqnr_db).c_str(),
                  f.worst_step ? std::to_string(*f.worst_step).c_str() : "-");
      ImGui::Text("blocks lost %llu of %llu%s", static_cast<unsigned long long>(f.blocks_lost),
                  static_cast<unsigned long long>(f.blocks), f.blocks_nonfinite ? ", some non-finite" : "");
      const Misfit m = o.misfit[std::size_t(hover->second)];
      ImGui::TextColored(colors::to_vec4(m == Misfit::None ? colors::kOkText : colors::kErrorText), "%s",
                         m == Misfit::None ? "fits" : (std::string("does not fit: ") + analysis::misfit_name(m)).c_str());
      ImGui::TextDisabled("click: its worst tensor's histogram and the recipe's window");
      ImGui::EndTooltip();
      if (clicked) {
        picked_ = hover;
        histogram_.reset();
      }
    }
  }

  // Before any click: the first operand of the layer most in need, under its closest 8-bit recipe
  // (or the first layer's best one).
  std::optional<std::pair<std::size_t, int>> default_pick() const {
    if (readiness_->layers.empty()) return std::nullopt;
    const analysis::LayerReadiness& l = readiness_->layers.front();
    const std::optional<contract::Recipe> recipe = l.keep_high_precision ? l.closest : l.best_8bit;
    if (!recipe) return std::nullopt;
    for (std::size_t r = 0; r < readiness_->operands.size(); ++r) {
      const OperandReadiness& o = readiness_->operands[r];
      if (o.layer == l.layer && (!l.failing_operand || o.operand == *l.failing_operand))
        return std::pair<std::size_t, int>{r, static_cast<int>(*recipe)};
    }
    return std::nullopt;
  }

  // The picked cell's worst tensor: its exponent histogram and the recipe's window at its scale.
  void draw_window(const TraceData& d) {
    if (!picked_) {
      ImGui::TextDisabled("Click a cell to see its operand's worst tensor against the recipe's window.");
      return;
    }
    const OperandReadiness& o = readiness_->operands[picked_->first];
    const contract::RecipeInfo& info = contract::kRecipes[std::size_t(picked_->second)];
    const RecipeFigures& f = o.recipes[std::size_t(picked_->second)];
    if (!f.worst_tensor_id) {
      ImGui::TextDisabled("%s: no tensor with a nonzero value under %s", row_label(o).c_str(), info.name);
      return;
    }
    if (!histogram_) {
      try {
        histogram_ = analysis::exponent_histogram(*d.trace, *f.worst_tensor_id);
      } catch (const std::exception& e) {
        ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", e.what());
        return;
      }
    }
    // The scale of that tensor under the recipe: the trace's for a per-tensor recipe; for a block
    // recipe the block holding the tensor's largest value, by the contract's rule.
    std::optional<double> scale;
    if (info.block == contract::kTensorBlock && info.rule != contract::ScaleRule::Nvfp4) {
      scale = f.worst_scale;
    } else if (f.worst_amax && *f.worst_amax > 0) {
      const float amax = float(*f.worst_amax);
      const float tensor_s = contract::tensor_scale(info, amax, false, 0);
      scale = contract::block_scale(info, amax, false, tensor_s);
    }
    const contract::FloatFormat& e = contract::element_bits(info.element);
    ImGui::Text("%s, %s at step %s: %s", row_label(o).c_str(), info.name,
                f.worst_step ? std::to_string(*f.worst_step).c_str() : "-", histogram_->tensor.c_str());
    if (scale && *scale > 0) {
      ImGui::SameLine();
      ImGui::TextDisabled("scale %s%s", analysis::human_number(*scale).c_str(),
                          info.block == contract::kTensorBlock && info.rule != contract::ScaleRule::Nvfp4
                              ? ""
                              : " (the block holding the tensor's largest value)");
    }
    if (!histogram_->measured || histogram_->bins.empty()) {
      ImGui::TextDisabled("no exponent histogram in this trace (--stats basic) or no nonzero value");
      return;
    }
    plot::Range xr = plot::Range::empty(), yr{0, 1};
    for (const auto& [exp, count] : histogram_->bins) {
      xr.include(exp);
      xr.include(exp + 1);
      yr.include(std::log10(double(count)) + 0.2);
    }
    // The window in the tensor's own values: q * (1/s) spans [min_subnormal, max] / s.
    double flush = 0, subnormal = 0, top = 0;
    if (scale && *scale > 0) {
      flush = std::log2(e.min_subnormal() / 2 / *scale);
      subnormal = std::log2(e.min_normal() / *scale);
      top = std::log2(e.max_finite() / *scale);
      xr.include(flush - 1);
      xr.include(top + 4);  // room for the saturation band and the legend
    }
    plot::Axis x;
    x.label = "log2 |x|";
    x.range = {std::floor(xr.lo), std::ceil(xr.hi)};
    plot::Axis y;
    y.label = "log10 count";
    y.range = yr;
    plot::Plot p("fp8_window", ImVec2(-1, -1), x, y);
    if (scale && *scale > 0) {
      p.vband(x.range.lo, flush, IM_COL32(200, 70, 60, 50));
      p.vband(flush, subnormal, IM_COL32(200, 150, 50, 50));
      p.vband(subnormal, top, IM_COL32(60, 160, 90, 40));
      p.vband(top, x.range.hi, IM_COL32(200, 70, 60, 50));
      p.vline(flush, colors::kUnderflow, "flush to 0");
      p.vline(subnormal, colors::kWarningText, "normal");
      p.vline(top, colors::kOverflow, "largest");
    }
    for (const auto& [exp, count] : histogram_->bins) p.bar(exp, exp + 1, 0, std::log10(double(count)) + 0.2, IM_COL32(120, 170, 230, 220));
    const plot::LegendItem legend[] = {{"flushed to zero or saturated", IM_COL32(200, 70, 60, 255), true},
                                       {"subnormal", IM_COL32(200, 150, 50, 255), true},
                                       {std::string(contract::kElementFormats[std::size_t(info.element)].name) + " normal range",
                                        IM_COL32(60, 160, 90, 255), true}};
    p.legend(legend);
  }

  int run_ = 0;
  const TraceData* cached_for_ = nullptr;
  const Fp8Readiness* readiness_ = nullptr;
  std::optional<std::pair<std::size_t, int>> picked_;
  std::optional<analysis::ExponentHistogram> histogram_;
};

}  // namespace

std::unique_ptr<View> make_fp8_view() { return std::make_unique<Fp8View>(); }

}  // namespace fpscope::gui
