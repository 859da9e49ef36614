// The verbs report, compare, advise, export and query: option parsing and output; every number
// comes from libfpscope_analysis.
#include "commands.h"

#include "fpscope/analysis.h"
#include "fpscope/export.h"
#include "fpscope/report_json.h"
#include "fpscope/units.h"
#include "sections.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>
#include <memory>

namespace fpscope::cli {

using namespace fpscope::analysis;

namespace {

int finish(const Trace& trace, int code = kExitOk) {
  if (code != kExitOk) return code;
  if (trace.state() == RunEnd::Running) {
    std::cerr << "fpscope: " << trace.path()
              << ": the run had not ended when this trace was read (its fpscope run still runs): the output covers "
                 "what was written so far (exit code 9)\n";
    return kExitInProgress;
  }
  if (trace.state() == RunEnd::CollectorLost) {
    std::cerr << "fpscope: " << trace.path()
              << ": collector lost: the fpscope run that wrote this trace died before the program ended; the output "
                 "covers what it wrote until then (exit code 10)\n";
    return kExitCollectorLost;
  }
  return code;
}

std::vector<std::string> range_view_keys() {
  std::vector<std::string> keys;
  for (int i = 0; i < kRangeViewCount; ++i) keys.push_back(range_view_info(static_cast<RangeView>(i)).key);
  return keys;
}

CLI::Option* add_format(CLI::App* cmd, std::string& format, const std::vector<std::string>& choices) {
  return cmd->add_option("--format", format, "output format")->check(CLI::IsMember(choices))->capture_default_str();
}

// --rank: read one rank of a multi-process trace as if it were traced alone.
void add_rank(CLI::App* cmd, std::optional<int32_t>& rank) {
  cmd->add_option("--rank", rank, "only this rank of a multi-process trace (processes.rank), as if it were traced alone")
      ->check(CLI::NonNegativeNumber);
}

OpenOptions open_options(const std::optional<int32_t>& rank, bool build_missing_summaries = true) {
  OpenOptions options;
  options.build_missing_summaries = build_missing_summaries;
  options.rank = rank;
  return options;
}

}  // namespace

Action add_report(CLI::App& app) {
  struct Opts {
    std::string trace, section = "all", format = "text", view = "activations";
    std::optional<int32_t> rank;
    bool side_outputs = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("report", "summary, first NaN/Inf and how it spread, value ranges, loss scale, memory, "
                                           "fp8 readiness, updates lost to rounding");
  cmd->add_option("TRACE", o->trace, "trace file written by `fpscope run`")->required();
  cmd->add_option("--section", o->section, "which section")
      ->check(CLI::IsMember({"summary", "nonfinite", "why", "ranges", "loss-scale", "memory", "ranks", "fp8", "learning",
                             "all"}))
      ->capture_default_str();
  add_format(cmd, o->format, {"text", "json", "csv", "md"});
  cmd->add_option("--view", o->view,
                  "which tensors the ranges section shows by layer: activations (forward outputs), gradients (as stored, "
                  "scaled), gradients-unscaled, weights, optimizer-state")
      ->check(CLI::IsMember(range_view_keys()))
      ->capture_default_str();
  cmd->add_flag("--side-outputs", o->side_outputs,
                "the ranges section's table by layer and kernel counts a forward kernel's side outputs (a "
                "normalisation's saved mean and reciprocal deviation, pooling's argmax) as it counts its result; "
                "by default they are not a layer's activation and only their NaN/Inf are counted");
  add_rank(cmd, o->rank);
  return [o]() {
    auto trace = Trace::open(o->trace, open_options(o->rank));
    auto wants = [&](const char* section) { return o->section == "all" || o->section == section; };
    const RangeView view = *parse_range_view(o->view);
    if (o->format == "json") {  // data, not rendered tables: report_json.h
      ReportData d;
      d.summary = summary(*trace);
      if (wants("nonfinite")) d.nonfinite = nonfinite(*trace);
      if (wants("why")) d.why = why(*trace);
      if (wants("loss-scale")) d.loss_scale = loss_scale(*trace);
      if (wants("memory")) d.memory = memory(*trace);
      if (wants("ranks")) d.ranks = ranks(*trace);
      if (wants("ranges")) d.ranges = std::make_pair(view, view_ranges(*trace, view));
      if (wants("fp8")) d.fp8 = fp8_readiness(*trace);
      if (wants("learning")) d.learning = learning(*trace);
      std::cout << report_json(d);
      return finish(*trace);
    }
    std::vector<Section> sections;
    if (wants("summary")) sections.push_back(summary_section(*trace));
    if (wants("nonfinite")) sections.push_back(nonfinite_section(*trace));
    if (wants("why")) sections.push_back(why_section(*trace));
    if (wants("ranges"))
      sections.push_back(ranges_section(*trace, view, o->side_outputs ? SideOutputs::Included : SideOutputs::Apart));
    if (wants("loss-scale")) sections.push_back(loss_scale_section(*trace));
    if (wants("memory")) sections.push_back(memory_section(*trace));
    // One process has one rank: the section says something only of a multi-process run.
    if (o->section == "ranks" || (wants("ranks") && summary(*trace).ranks > 1)) sections.push_back(ranks_section(*trace));
    // A trace without a forecast says so only when the section is asked for by name.
    if (o->section == "fp8" || (wants("fp8") && has_fp8_forecast(*trace))) sections.push_back(fp8_section(*trace));
    // Likewise a trace without update or store counts (an older one, a PyTorch run).
    if (o->section == "learning" || (wants("learning") && has_learning_counts(*trace)))
      sections.push_back(learning_section(*trace));
    render(sections, parse_format(o->format), std::cout);
    return finish(*trace);
  };
}

Action add_compare(CLI::App& app) {
  struct Opts {
    std::string a, b, format = "text";
    CompareOptions options;
    std::optional<int32_t> rank;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compare", "compare run A (source) with run B (target): memory, accuracy, loss, ranges, events");
  cmd->add_option("A", o->a, "source trace (e.g. the fp32 run)")->required();
  cmd->add_option("B", o->b, "target trace (e.g. the fp16 run)")->required();
  cmd->add_option("--tolerance", o->options.loss_tolerance, "relative loss difference at which the curves part")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--move-ratio", o->options.move_ratio,
                  "factor by which a layer's largest forward output must grow or shrink to count as moved")
      ->check(CLI::Range(1.0, 1e300))->capture_default_str();
  add_format(cmd, o->format, {"text", "json", "csv", "md"});
  add_rank(cmd, o->rank);
  return [o]() {
    auto a = Trace::open(o->a, open_options(o->rank));
    auto b = Trace::open(o->b, open_options(o->rank));
    const Comparison c = compare(*a, *b, o->options);
    if (o->format == "json") {
      std::cout << compare_json(c);
    } else {
      render(comparison_sections(c), parse_format(o->format), std::cout);
    }
    const int code = finish(*a);
    return code != kExitOk ? code : finish(*b);
  };
}

// fp8: with a forecast in the trace, what each of mptrain's fp8 modes would keep in bf16, the
// list file of the mode that keeps the fewest (DIR/fp8_keep_bf16.txt) and its flags. False when
// the file cannot be written.
static bool write_fp8_advice(const Trace& trace, const std::string& trace_path, const std::string& dir) {
  if (!has_fp8_forecast(trace)) return true;
  const Fp8Advice advice = fp8_advice(fp8_readiness(trace));
  if (!advice.best) return true;
  std::cout << fmt::format("fp8: the layers each of mptrain's fp8 modes would keep in bf16 (the figures: fpscope report {} "
                           "--section fp8):\n", trace_path);
  std::cout << fmt::format("  {:<12} {:<8} {}\n", "--fp8-recipe", "format", "layers to keep in bf16");
  for (const Fp8ModeAdvice& m : advice.modes) {
    const std::string mode = fmt::format("  {:<12} {:<8}", m.mode.recipe, m.mode.format);
    if (m.keep.empty()) std::cout << mode << " keep none\n";
    for (std::size_t i = 0; i < m.keep.size(); ++i)
      std::cout << fmt::format("{:<{}} {:<4} {:<8} {}\n", i == 0 ? mode : "", mode.size(), i == 0 ? "keep" : "",
                               m.keep[i], m.reasons[i]);
  }
  const Fp8ModeAdvice& best = advice.modes[*advice.best];
  const std::string mode_flags = mptrain_fp8_flags(best.mode);
  const std::string path = (std::filesystem::path(dir) / "fp8_keep_bf16.txt").string();
  std::string text = fmt::format(
      "# layers to keep in bf16 under --precision fp8 {}\n"
      "# written by `fpscope advise`; one layer a line, the reason above it (mptrain --fp8-keep-bf16 @FILE).\n",
      mode_flags);
  for (std::size_t i = 0; i < best.keep.size(); ++i) text += "# " + best.reasons[i] + "\n" + best.keep[i] + "\n";
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::cerr << "fpscope advise: cannot write " << path << "\n";
    return false;
  }
  std::cout << fmt::format("Wrote {} ({} layer{} to keep)\nSuggested mptrain flags for fp8:\n  --precision fp8 {} "
                           "--fp8-keep-bf16 @{}\n",
                           path, best.keep.size(), best.keep.size() == 1 ? "" : "s", mode_flags, path);
  return true;
}

Action add_advise(CLI::App& app) {
  struct Opts {
    std::string trace, dir = ".", target = "auto";
    AdviceOptions options;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("advise", "op lists (fp32_ops.txt, bf16_ops.txt) and a loss scale for mptrain, from observed ranges");
  cmd->add_option("TRACE", o->trace, "trace file")->required();
  cmd->add_option("-o,--output-dir", o->dir,
                  "folder for fp32_ops.txt and bf16_ops.txt (and fp8_keep_bf16.txt, from a trace with the fp8 forecast)")
      ->capture_default_str();
  cmd->add_option("--target", o->target,
                  "16-bit format of the low-precision list and the loss-scale advice; auto: the run's own (bf16 for a "
                  "bf16, amp-bf16 or fp8 run, fp16 otherwise)")
      ->check(CLI::IsMember({"auto", "fp16", "bf16"}))->capture_default_str();
  cmd->add_option("--max-underflow", o->options.underflow_share, "share of values flushed to zero that keeps an op in fp32")
      ->capture_default_str();
  cmd->add_option("--min-headroom", o->options.headroom_log2, "powers of two below the format's max an op needs")
      ->capture_default_str();
  return [o]() {
    auto trace = Trace::open(o->trace);
    const RunSummary run = summary(*trace);
    o->options.target = o->target == "auto"   ? advice_target_of(run)
                        : o->target == "bf16" ? analysis::Format::BF16
                                              : analysis::Format::F16;
    const Advice advice = advise(*trace, o->options);
    const char* target_name = format_limits(advice.target).name;
    std::cout << fmt::format("Target: {}{}\n", target_name,
                             o->target != "auto" ? " (--target)"
                             : run.precision.empty()
                                 ? " (the run's precision is not known; --target bf16 for the other)"
                                 : fmt::format(" (the run's precision is {}; --target {} for the other)",
                                               run.precision.substr(0, run.precision.find(';')),
                                               advice.target == analysis::Format::BF16 ? "fp16" : "bf16"));
    // Advice for formats is no answer to a NaN the run already made: say where it came from first.
    if (const NonfiniteReport nf = nonfinite(*trace, 0); nf.first_origin) {
      const NonfiniteEvent& e = *nf.first_origin;
      std::cout << fmt::format("NaN/Inf in this run: first {} {} {}{}, phase {}, {}. Its cause: fpscope report {} --section why\n",
                               e.kind, how_it_came_words(how_it_came(e)), e.kernel,
                               e.layer ? " (layer " + *e.layer + ")" : "", e.phase.value_or("-"),
                               human_step_place(e.step), o->trace);
    }
    auto print_loss_scaling = [&] {
      std::cout << "Loss scaling: " << (advice.loss_scale.needed ? "needed. " : "not needed. ") << advice.loss_scale.reason
                << "\n";
    };
    // The op lists name mptrain's ops; a PyTorch program's operators are not mapped to them, so
    // lists made from its trace would say "not seen" of every op it ran.
    if (trace->from_pytorch()) {
      const std::string framework = trace->meta_value("config.framework").value_or("");
      print_loss_scaling();
      std::cout << fmt::format(
          "No op lists written: this trace is of a PyTorch program ({}), and the lists (fp32_ops.txt, bf16_ops.txt) name "
          "mptrain's ops for its --fp32-ops and --bf16-ops. Each layer's and operator's headroom in fp16 and bf16, and "
          "what a cast would overflow or flush to zero, are in: fpscope report {} --section ranges\n",
          framework, o->trace);
      return finish(*trace);
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(o->dir, ec);
    const std::string fp32_path = (fs::path(o->dir) / "fp32_ops.txt").string();
    const std::string low_path = (fs::path(o->dir) / "bf16_ops.txt").string();
    for (const auto& [path, text] : {std::pair{fp32_path, fp32_ops_file_text(advice)},
                                     std::pair{low_path, low_precision_ops_file_text(advice)}}) {
      std::ofstream out(path);
      out << text;
      if (!out) {
        std::cerr << "fpscope advise: cannot write " << path << "\n";
        return kExitFailure;
      }
    }
    std::cout << fmt::format("Ops ({} target):\n", format_limits(advice.target).name);
    for (const auto& op : advice.ops) {
      std::cout << fmt::format("  {:<12} {:<5} {}\n", op.op, op.placement == OpPlacement::Fp32 ? "fp32" : "16-bit", op.reason);
    }
    print_loss_scaling();
    std::cout << "Wrote " << fp32_path << " and " << low_path << "\nSuggested mptrain flags:\n ";
    for (auto flag : advice.mptrain_flags) {
      if (flag == "fp32_ops.txt") flag = fp32_path;
      if (flag == "bf16_ops.txt") flag = low_path;
      std::cout << " " << flag;
    }
    std::cout << "\n";
    if (!write_fp8_advice(*trace, o->trace, o->dir)) return kExitFailure;
    return finish(*trace);
  };
}

Action add_export(CLI::App& app) {
  struct Opts {
    std::string trace, format, out;
    std::optional<int32_t> rank;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", "write the trace as CSV files, JSON, a Chrome/Perfetto trace or an HTML report");
  cmd->add_option("TRACE", o->trace, "trace file")->required();
  cmd->add_option("--format", o->format, "csv (OUT is a folder), json, chrome-trace or html")
      ->check(CLI::IsMember({"csv", "json", "chrome-trace", "html"}))->required();
  cmd->add_option("-o,--output", o->out, "output file (a folder for csv); - for standard output")->required();
  add_rank(cmd, o->rank);
  return [o]() {
    auto trace = Trace::open(o->trace, open_options(o->rank));
    if (o->format == "csv") {
      const auto files = export_csv(*trace, o->out);
      std::cerr << fmt::format("fpscope export: wrote {} tables to {}\n", files.size(), o->out);
      return finish(*trace);
    }
    std::ofstream file;
    if (o->out != "-") {
      file.open(o->out, std::ios::binary);
      if (!file) {
        std::cerr << "fpscope export: cannot write " << o->out << "\n";
        return kExitFailure;
      }
    }
    std::ostream& out = o->out == "-" ? std::cout : file;
    if (o->format == "json") export_json(*trace, out);
    if (o->format == "chrome-trace") export_chrome_trace(*trace, out);
    if (o->format == "html") export_html(*trace, out);
    out.flush();
    if (!out) {
      std::cerr << "fpscope export: writing " << o->out << " failed (disk full?)\n";
      return kExitFailure;
    }
    return finish(*trace);
  };
}

Action add_query(CLI::App& app) {
  struct Opts {
    std::string trace, sql, format = "table";
    size_t max_rows = 0;
    std::optional<int32_t> rank;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("query", "run one read-only SQL statement on a trace");
  cmd->add_option("TRACE", o->trace, "trace file")->required();
  cmd->add_option("SQL", o->sql, "one SQL statement, e.g. \"select * from v_first_nonfinite\"")->required();
  add_format(cmd, o->format, {"table", "csv", "json"});
  cmd->add_option("--max-rows", o->max_rows, "stop after this many rows (0: all)")->capture_default_str();
  add_rank(cmd, o->rank);
  return [o]() {
    auto trace = Trace::open(o->trace, open_options(o->rank, false));
    const QueryResult result = trace->query(o->sql, o->max_rows);
    Table t{"rows", result.columns, {}};
    for (const auto& row : result.rows) {
      std::vector<Cell> cells;
      for (const auto& v : row) {
        const bool number = std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
        nlohmann::json value = std::holds_alternative<int64_t>(v)  ? nlohmann::json(std::get<int64_t>(v))
                               : std::holds_alternative<double>(v) ? (std::isfinite(std::get<double>(v)) ? nlohmann::json(std::get<double>(v)) : nlohmann::json(value_text(v)))
                               : std::holds_alternative<std::string>(v) ? nlohmann::json(std::get<std::string>(v))
                                                                        : nlohmann::json();
        cells.push_back(Cell(std::holds_alternative<std::monostate>(v) ? "NULL" : value_text(v), value, number));
      }
      t.rows.push_back(std::move(cells));
    }
    if (o->format == "table") {
      render_table_text(t, std::cout, "");
      std::cout << fmt::format("({} row{}{})\n", result.rows.size(), result.rows.size() == 1 ? "" : "s",
                               result.truncated ? ", more not shown" : "");
    } else if (o->format == "csv") {
      render({Section{"query", "query", {}, {t}, {}}}, Format::Csv, std::cout);
    } else {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& row : t.rows) {
        nlohmann::json r = nlohmann::json::object();
        for (size_t i = 0; i < row.size(); ++i) r[t.columns[i]] = row[i].value;
        rows.push_back(std::move(r));
      }
      std::cout << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return finish(*trace);
  };
}

}  // namespace fpscope::cli
