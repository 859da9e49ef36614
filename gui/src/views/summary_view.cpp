// Summary view: for each open trace, how the run was configured and how it ended, its headline
// numbers, and warnings (first NaN/Inf origin, skipped steps, peak memory), each a link to the
// place it names; with two traces, the comparison's headline (accuracy and loss deltas, first
// divergent step, memory saved). Traces that failed to load show their error in their column.
#include <fmt/format.h>
#include <imgui.h>

#include <fpscope/units.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "views/view.h"
#include "views/view_util.h"

namespace fpscope::gui {
namespace {

std::string opt_text(const std::optional<double>& v) { return v ? analysis::human_number(*v) : "-"; }
std::string opt_int(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

std::string ended_text(const analysis::RunSummary& s) { return analysis::ending_text(s); }

class SummaryView final : public View {
 public:
  const char* name() const override { return "summary"; }
  const char* title() const override { return "Summary"; }

  void draw(ViewContext& ctx) override {
    if (ctx.traces.docs().empty()) {
      draw_empty_state(ctx.traces);
      return;
    }
    const auto& docs = ctx.traces.docs();
    const int columns = static_cast<int>(std::min<size_t>(docs.size(), 4));
    draw_comparison(ctx);
    heading("Runs");
    draw_headline_table(ctx, columns);
    heading("Warnings");
    draw_warnings(ctx, columns);
    heading("Configuration");
    draw_config_table(ctx, columns);
  }

 private:
  // One table, one column per run, so the same number of two runs sits on one line.
  void draw_headline_table(ViewContext& ctx, int columns) {
    const auto& docs = ctx.traces.docs();
    if (!ImGui::BeginTable("headline", columns + 1, ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg)) return;
    ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 11);
    for (int i = 0; i < columns; ++i) ImGui::TableSetupColumn(run_label(*docs[static_cast<size_t>(i)], i).c_str());
    ImGui::TableHeadersRow();
    auto row = [&](const char* label, auto&& cell) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", label);
      for (int i = 0; i < columns; ++i) {
        ImGui::TableNextColumn();
        const TraceDoc& doc = *docs[static_cast<size_t>(i)];
        ImGui::PushID(i);
        if (const TraceData* d = loaded(&doc)) {
          cell(*d, doc);
        } else if (doc.state() == LoadState::kFailed) {
          if (std::string_view(label) == "run ended") {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(colors::to_vec4(colors::kErrorText), "cannot read: %s", doc.error().c_str());
            ImGui::PopTextWrapPos();
          }
        } else {
          ImGui::TextDisabled("loading... %.0f%%", 100.0 * doc.progress());
        }
        ImGui::PopID();
      }
    };
    row("run ended", [](const TraceData& d, const TraceDoc&) {
      const bool bad = contract::is_failure(d.summary.state);
      ImGui::TextColored(colors::to_vec4(bad ? colors::kErrorText : colors::kOkText), "%s",
                         ended_text(d.summary).c_str());
      if (!d.summary.incomplete.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(colors::to_vec4(colors::kErrorText), "trace incomplete: %s", d.summary.incomplete.c_str());
        ImGui::PopTextWrapPos();
      }
    });
    row("precision", [](const TraceData& d, const TraceDoc&) {
      ImGui::TextUnformatted(d.summary.precision.empty() ? "-" : d.summary.precision.c_str());
    });
    row("steps", [](const TraceData& d, const TraceDoc&) {
      ImGui::TextUnformatted(analysis::steps_text(d.summary).c_str());
    });
    row("ranks", [](const TraceData& d, const TraceDoc&) {
      if (d.ranks.ranks.size() <= 1) {
        ImGui::TextDisabled("one process");
        return;
      }
      std::string text = std::to_string(d.ranks.ranks.size()) + " ranks";
      if (d.ranks.first_origin_rank) text += "; first NaN/Inf made on rank " + std::to_string(*d.ranks.first_origin_rank);
      if (d.ranks.loss_scale_steps_compared > 0)
        text += d.ranks.loss_scale_disagreements == 0 ? "; loss scales agree" : "; loss scales disagree";
      for (const auto& r : d.ranks.ranks)
        if (r.ended && *r.ended == "vanished") text += "; rank " + std::to_string(r.rank) + " vanished";
      ImGui::TextUnformatted(text.c_str());
    });
    row("duration", [](const TraceData& d, const TraceDoc&) {
      if (d.summary.start_ns && d.summary.end_ns) {
        ImGui::TextUnformatted(analysis::human_duration(*d.summary.end_ns - *d.summary.start_ns).c_str());
      } else {
        ImGui::TextDisabled("-");
      }
    });
    row("kernels / tensors", [](const TraceData& d, const TraceDoc&) {
      ImGui::Text("%s launches (%s measured) / %s tensors", analysis::human_count(d.summary.kernels).c_str(),
                  analysis::human_count(d.summary.sampled_kernels).c_str(), analysis::human_count(d.summary.tensors).c_str());
    });
    row("tracing cost", [](const TraceData& d, const TraceDoc&) {
      const std::vector<analysis::TracingCost> lines = analysis::tracing_cost(d.summary);
      if (lines.empty()) {
        ImGui::TextDisabled("-");
        return;
      }
      ImGui::PushTextWrapPos(0);
      for (const analysis::TracingCost& line : lines) ImGui::Text("%s: %s", line.label.c_str(), line.text.c_str());
      ImGui::PopTextWrapPos();
    });
    row("final loss", [](const TraceData& d, const TraceDoc&) {
      const std::string text = analysis::final_loss_text(d.summary);
      if (d.summary.nonfinite_loss_steps > 0) ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s", text.c_str());
      else ImGui::TextUnformatted(text.c_str());
    });
    row("accuracy", [](const TraceData& d, const TraceDoc&) {
      ImGui::Text("train %s, test %s", opt_text(d.summary.final_train_accuracy).c_str(),
                  opt_text(d.summary.test_accuracy).c_str());
    });
    row("non-finite outputs", [&](const TraceData& d, const TraceDoc&) {
      const auto& nf = d.nonfinite;
      const ImU32 c = nf.tensors ? colors::kNaN : colors::kOkText;
      ImGui::TextColored(colors::to_vec4(c), "%s tensors: %s NaN, %s +Inf, %s -Inf", analysis::human_count(nf.tensors).c_str(),
                         analysis::human_count(nf.nan).c_str(), analysis::human_count(nf.pos_inf).c_str(),
                         analysis::human_count(nf.neg_inf).c_str());
      if (const std::string intended = analysis::intended_text(nf.intended); !intended.empty())
        ImGui::TextWrapped("%s", intended.c_str());
    });
    row("loss scale", [&](const TraceData& d, const TraceDoc&) {
      const auto& ls = d.loss_scale;
      if (!ls.used) {
        ImGui::TextDisabled("not used");
        return;
      }
      ImGui::Text("%s -> %s, %lld backoffs, %lld growths", opt_text(ls.initial_scale).c_str(),
                  opt_text(ls.final_scale).c_str(), static_cast<long long>(ls.backoffs),
                  static_cast<long long>(ls.growths));
    });
    row("peak memory", [&](const TraceData& d, const TraceDoc&) {
      const std::string text = analysis::human_bytes(d.memory.peak_bytes) + " " + analysis::human_step_place(d.memory.peak_step);
      if (link(text)) {
        if (d.memory.peak_step) ctx.selection.select_step(*d.memory.peak_step);
        ctx.selection.show_view = "memory";
      }
    });
    row("trace file", [](const TraceData& d, const TraceDoc&) {
      ImGui::TextDisabled("schema %d%s", d.summary.schema_version,
                          d.trace->summaries_precomputed() ? "" : ", summaries computed at open");
    });
    ImGui::EndTable();
  }

  void draw_warnings(ViewContext& ctx, int columns) {
    const auto& docs = ctx.traces.docs();
    bool any = false;
    for (int i = 0; i < columns; ++i) {
      const TraceDoc& doc = *docs[static_cast<size_t>(i)];
      const TraceData* d = loaded(&doc);
      if (!d) {
        if (doc.state() == LoadState::kFailed) {
          any = true;
          ImGui::PushTextWrapPos(0);
          ImGui::TextColored(colors::to_vec4(colors::kErrorText), "%s: cannot read the trace: %s", doc.name().c_str(),
                             doc.error().c_str());
          ImGui::PopTextWrapPos();
        }
        continue;
      }
      ImGui::PushID(i);
      any |= draw_run_warnings(ctx, doc, *d);
      ImGui::PopID();
    }
    if (!any) ImGui::TextColored(colors::to_vec4(colors::kOkText), "No NaN/Inf, no skipped steps, runs finished.");
  }

  bool draw_run_warnings(ViewContext& ctx, const TraceDoc& doc, const TraceData& d) {
    bool any = false;
    const std::string who = doc.name() + ": ";
    if (const auto& o = d.nonfinite.first_origin) {
      any = true;
      ImGui::TextColored(colors::to_vec4(colors::kNaN), "%sfirst %s %s", who.c_str(), o->kind.c_str(),
                         analysis::how_it_came_words(analysis::how_it_came(*o)));
      ImGui::SameLine();
      char text[400];
      const std::string rank = d.summary.ranks > 1 ? ", rank " + std::to_string(o->rank) : "";
      std::snprintf(text, sizeof text, "%s in layer %s, step %s%s, tensor %s (launch %s)", o->kernel.c_str(),
                    o->layer.value_or("-").c_str(), opt_int(o->step).c_str(), rank.c_str(), o->tensor.c_str(),
                    analysis::human_launch(o->kernel_id).c_str());
      if (link(text)) {
        ctx.selection.select_kernel(doc.id(), o->kernel_id, o->step, o->layer);
        ctx.selection.tensor_id = o->tensor_id;
        ctx.selection.tensor_name = o->tensor;
        ctx.selection.jump_to_timeline();
      }
    }
    draw_why(ctx, doc, d);
    if (d.loss_scale.skipped_steps > 0) {
      any = true;
      ImGui::TextColored(colors::to_vec4(colors::kSkipped), "%s%lld optimizer steps skipped (inf/NaN in gradients), first",
                         who.c_str(), static_cast<long long>(d.loss_scale.skipped_steps));
      ImGui::SameLine();
      const int64_t first = d.loss_scale.skipped_step_numbers.empty() ? 0 : d.loss_scale.skipped_step_numbers.front();
      if (link("step " + std::to_string(first))) {
        ctx.selection.select_step(first);
        ctx.selection.show_view = "loss";
      }
    }
    // The failures that make no NaN: updates rounding lost, results flushed at the store.
    const auto groups = analysis::advice_groups(d.learning);
    int64_t flushing = 0;
    for (const analysis::StoreLoss& s : d.learning.stores) flushing += s.flagged ? 1 : 0;
    if (!groups.empty() || flushing > 0) {
      any = true;
      size_t lost = 0;
      for (const auto& g : groups) lost += g.params.size();
      std::string text;
      if (lost > 0)
        text = fmt::format("{} parameter{} lose{} their updates to rounding (first: {} {})", lost, lost == 1 ? "" : "s",
                           lost == 1 ? "s" : "", groups.front().params.front()->param,
                           analysis::human_percent(groups.front().params.front()->lost_update_share.value_or(0)));
      if (flushing > 0)
        text += fmt::format("{}{} stored tensor{} flushed to zero", text.empty() ? "" : "; ", flushing,
                            flushing == 1 ? "" : "s");
      ImGui::TextColored(colors::to_vec4(colors::kUnderflow), "%s%s", who.c_str(), text.c_str());
      ImGui::SameLine();
      if (link("updates view")) ctx.selection.show_view = "updates";
    }
    if (!d.learning.forecasts.empty()) {
      any = true;
      const analysis::UpdateForecast& f = d.learning.forecasts.front();
      const size_t n = d.learning.forecasts.size();
      ImGui::TextColored(colors::to_vec4(colors::kWarningText),
                         "%s%zu parameter%s update/weight heading for %s spacing (first: %s, about step %lld)",
                         who.c_str(), n, n == 1 ? "'s" : "s'", n == 1 ? "its" : "their", f.param.c_str(),
                         static_cast<long long>(f.crossing_step));
      ImGui::SameLine();
      if (link("forecast")) ctx.selection.show_view = "updates";
    }
    if (contract::is_failure(d.summary.state) || d.summary.state == analysis::RunEnd::Running) {
      any = true;
      const bool failed = contract::is_failure(d.summary.state);
      ImGui::TextColored(colors::to_vec4(failed ? colors::kErrorText : colors::kWarningText), "%srun %s", who.c_str(),
                         ended_text(d.summary).c_str());
    }
    return any;
  }

  // Why: each cause in a sentence with its numbers and what to change, a link to its launch; then
  // the chain it was read from, each link selecting the launch that wrote the tensor.
  void draw_why(ViewContext& ctx, const TraceDoc& doc, const TraceData& d) {
    const analysis::WhyReport& w = d.why;
    if (w.causes.empty()) return;
    ImGui::Indent();
    for (size_t i = 0; i < w.causes.size(); ++i) {
      const analysis::Cause& c = w.causes[i];
      ImGui::PushID(static_cast<int>(i));
      ImGui::TextColored(colors::to_vec4(colors::kWarningText), "why %zu:", i + 1);
      ImGui::SameLine();
      ImGui::PushTextWrapPos(0);
      ImGui::TextUnformatted(c.summary.c_str());
      ImGui::TextDisabled("what to change: %s", c.advice.c_str());
      ImGui::PopTextWrapPos();
      if (c.kernel_id) {
        // On a line of its own: beside a long advice it would be clipped at the window's edge.
        ImGui::TextDisabled("evidence:");
        ImGui::SameLine();
        if (link("launch " + analysis::human_launch(*c.kernel_id))) {
          ctx.selection.select_kernel(doc.id(), *c.kernel_id, c.step);
          if (c.tensor_id) ctx.selection.tensor_id = *c.tensor_id;
          ctx.selection.jump_to_timeline();
        }
      }
      ImGui::PopID();
    }
    if (!w.chain.empty() && ImGui::TreeNode("chain", "the chain behind it: %zu unusual link%s, %lld ordinary",
                                            w.chain.size(), w.chain.size() == 1 ? "" : "s",
                                            static_cast<long long>(w.ordinary_links))) {
      for (size_t i = 0; i < w.chain.size(); ++i) {
        const analysis::CauseLink& l = w.chain[i];
        ImGui::PushID(static_cast<int>(1000 + i));
        ImGui::Indent(static_cast<float>(l.depth) * ImGui::GetFontSize());
        if (l.writer_kernel_id) {
          char text[300];
          std::snprintf(text, sizeof text, "%s <- %s (launch %lld, step %s)", l.tensor.c_str(), l.writer_kernel.c_str(),
                        static_cast<long long>(*l.writer_kernel_id), opt_int(l.writer_step).c_str());
          if (link(text)) {
            ctx.selection.select_kernel(doc.id(), *l.writer_kernel_id, l.writer_step, l.writer_layer);
            if (l.writer_tensor_id) ctx.selection.tensor_id = *l.writer_tensor_id;
            ctx.selection.tensor_name = l.tensor;
            ctx.selection.jump_to_timeline();
          }
        } else {
          ImGui::TextUnformatted(l.tensor.c_str());
        }
        ImGui::SameLine();
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", l.note.c_str());
        ImGui::PopTextWrapPos();
        ImGui::Unindent(static_cast<float>(l.depth) * ImGui::GetFontSize());
        ImGui::PopID();
      }
      ImGui::TreePop();
    }
    ImGui::Unindent();
  }

  void draw_config_table(ViewContext& ctx, int columns) {
    const auto& docs = ctx.traces.docs();
    std::vector<std::string> keys;
    for (int i = 0; i < columns; ++i) {
      if (const TraceData* d = loaded(docs[static_cast<size_t>(i)].get())) {
        for (const auto& [k, v] : d->summary.config) {
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
        }
      }
    }
    if (!ImGui::BeginTable("config", columns + 1, ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg)) return;
    ImGui::TableSetupColumn("setting", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 11);
    for (int i = 0; i < columns; ++i) ImGui::TableSetupColumn(docs[static_cast<size_t>(i)]->name().c_str());
    ImGui::TableHeadersRow();
    auto value_of = [&](int i, const std::string& key) -> std::string {
      const TraceData* d = loaded(docs[static_cast<size_t>(i)].get());
      if (!d) return {};
      for (const auto& [k, v] : d->summary.config) {
        if (k == key) return v;
      }
      return "-";
    };
    for (const auto& key : keys) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", key.c_str());
      const std::string first = value_of(0, key);
      for (int i = 0; i < columns; ++i) {
        ImGui::TableNextColumn();
        const std::string v = value_of(i, key);
        // Settings that differ between the runs stand out; long lists (op lists) wrap.
        ImGui::PushTextWrapPos(0);
        if (i > 0 && v != first) {
          ImGui::TextColored(colors::to_vec4(colors::kWarningText), "%s", v.c_str());
        } else {
          ImGui::TextUnformatted(v.c_str());
        }
        ImGui::PopTextWrapPos();
      }
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("command");
    for (int i = 0; i < columns; ++i) {
      ImGui::TableNextColumn();
      if (const TraceData* d = loaded(docs[static_cast<size_t>(i)].get())) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextUnformatted(d->summary.command.c_str());
        ImGui::PopTextWrapPos();
      }
    }
    ImGui::EndTable();
  }

  void draw_comparison(ViewContext& ctx) {
    const PairComparison& pc = ctx.traces.comparison();
    const analysis::Comparison* c = pc.result();
    if (!c) return;
    heading("Comparison (target against source)");
    if (c->accuracy_delta) {
      const ImU32 col = *c->accuracy_delta < 0 ? colors::kWarningText : colors::kOkText;
      ImGui::TextColored(colors::to_vec4(col), "accuracy %s", analysis::human_points(*c->accuracy_delta).c_str());
      ImGui::SameLine(0, 30);
    }
    if (c->final_loss_delta) {
      ImGui::Text("final loss %+.4g", *c->final_loss_delta);
      ImGui::SameLine(0, 30);
    }
    if (c->first_divergent_step) {
      if (c->diverged_to_nonfinite) {
        ImGui::TextColored(colors::to_vec4(colors::kWarningText), "one run's loss turns NaN/Inf at");
      } else {
        ImGui::TextColored(colors::to_vec4(colors::kWarningText), "loss diverges beyond %.0f%% from", c->loss_tolerance * 100);
      }
      ImGui::SameLine();
      if (link("step " + std::to_string(*c->first_divergent_step))) {
        ctx.selection.select_step(*c->first_divergent_step);
        ctx.selection.show_view = "loss";
      }
    } else {
      ImGui::TextColored(colors::to_vec4(colors::kOkText), "loss curves within %.0f%% on %zu common steps",
                         c->loss_tolerance * 100, c->loss_curve.size());
    }
    for (const auto& m : c->memory) {
      if (m.category != "peak") continue;
      ImGui::Text("peak memory %s -> %s (%s)", analysis::human_bytes(m.a).c_str(), analysis::human_bytes(m.b).c_str(),
                  analysis::change_text(m).c_str());
    }
    const auto moved = std::count_if(c->layers.begin(), c->layers.end(), [](const auto& l) { return l.moved; });
    ImGui::Text("%lld of %zu layers moved (largest activation %gx larger or smaller); %zu events only in the source, "
                "%zu only in the target", static_cast<long long>(moved), c->layers.size(), c->move_ratio,
                c->only_in_a.size(), c->only_in_b.size());
  }
};

}  // namespace

std::unique_ptr<View> make_summary_view() { return std::make_unique<SummaryView>(); }

}  // namespace fpscope::gui
