// Parsing and validating the options of `fpscope run` with CLI11. Every value is checked here,
// before the trace or the program exists, so a mistake costs nothing and says how to fix it.
#include "fpscope/common/allow_rules.h"
#include "run_options.h"

#include "fpscope/contract/environment.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <iostream>

#include "fpscope/contract/wire.h"

namespace fpscope {
namespace {

constexpr const char* kDescription =
    "Runs PROGRAM under the fpscope injector and writes its trace (SQLite).\n"
    "Usage: fpscope run [options] [-o TRACE.sqlite] [--] PROGRAM [ARGS...]\n"
    "The exit status is the program's (128+N when it died of signal N); 2 for a bad command line,\n"
    "127 when the program is not found.\n"
    "The program runs with LD_PRELOAD, NVTX_INJECTION64_PATH and CUDA_INJECTION64_PATH naming the\n"
    "injector (CUDA_INJECTION64_PATH only with CUPTI: not with --no-cupti, and a value you set is kept).";

bool parse_uint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(s);
  return true;
}

// "A-B", "A-" or "A": step numbers from 0.
std::string check_steps(const std::string& s) {
  const auto dash = s.find('-');
  uint64_t a = 0, b = 0;
  const std::string first = s.substr(0, dash);
  const std::string second = dash == std::string::npos ? first : s.substr(dash + 1);
  if (!parse_uint(first, &a) || (!second.empty() && !parse_uint(second, &b)))
    return "--steps wants A-B, A- or A with step numbers from 0, e.g. --steps 100-200; got '" + s + "'";
  if (!second.empty() && b < a) return "--steps " + s + ": the range ends before it starts";
  return "";
}

bool is_glob_text(const std::string& s) {
  return !s.empty() && s.find_first_of(",;= \t\n") == std::string::npos;
}

std::string check_ops(const std::string& s) {
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto comma = s.find(',', start);
    const std::string glob = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!is_glob_text(glob))
      return "--ops wants comma-separated kernel or layer name globs, e.g. --ops 'conv*,fc1'; got '" + s + "'";
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "";
}

// "op=conv2d_backward,step=120": keys op, layer, tensor (globs) and step (N, A-B or A-), each once.
std::string check_dump(const std::string& spec) {
  const std::string usage = "--dump wants key=value pairs separated by commas with keys op, layer, tensor "
                            "and step (N or A-B), e.g. --dump op=conv2d_backward,step=120; got '" + spec + "'";
  std::vector<std::string> seen;
  std::size_t start = 0;
  while (true) {
    const auto comma = spec.find(',', start);
    const std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto eq = item.find('=');
    if (eq == std::string::npos) return usage;
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key != "op" && key != "layer" && key != "tensor" && key != "step") return usage;
    for (const auto& k : seen)
      if (k == key) return "--dump " + spec + ": '" + key + "' is given twice";
    seen.push_back(key);
    if (key == "step" ? !check_steps(value).empty() : !is_glob_text(value)) return usage;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "";
}

std::string validate(const RunOptions& o) {
  if (o.every == 0) return "--every must be at least 1 (1 measures every step)";
  if (!o.steps.empty()) {
    if (auto e = check_steps(o.steps); !e.empty()) return e;
  }
  if (!o.ops.empty()) {
    if (auto e = check_ops(o.ops); !e.empty()) return e;
  }
  if (!o.dump.empty()) {
    if (auto e = check_dump(o.dump); !e.empty()) return e;
  }
  {
    std::vector<contract::AllowRule> rules;
    std::string why;
    if (!common::parse_allow_rules(o.allow, &rules, &why)) return "--allow: " + why;
  }
  if (o.ring_mib < 1 || o.ring_mib > 4096) return "--ring-size is in MiB, from 1 to 4096";
  if (o.max_size_mib > (uint64_t{1} << 30)) return "--max-size is in MiB, 0 (no limit) to 2^30";
  if (o.program.empty()) return "no program to run: fpscope run [options] -- PROGRAM [ARGS...]";
  if (!o.output.empty() && o.output.back() == '/') return "-o wants a file name, not a folder: " + o.output;
  return "";
}

void add_options(CLI::App& app, RunOptions& o) {
  app.add_option("-o,--output", o.output,
                 "Trace file to write (default: fpscope-<program>-<YYYYmmdd-HHMMSS>.sqlite here)");
  app.add_flag("--force", o.force, "Overwrite an existing trace");
  app.add_option("--every", o.every, "Measure the tensors of every N-th step only (kernels are always recorded)");
  app.add_option("--steps", o.steps, "Measure tensors only in steps A-B (inclusive), A- or A");
  app.add_option("--ops", o.ops,
                 "Measure tensors only of kernels whose kernel name or layer name matches one of these "
                 "comma-separated globs, e.g. 'conv*,fc1'");
  app.add_option("--tensors", o.tensors, "Which tensors to measure")->check(CLI::IsMember({"in", "out", "both"}));
  app.add_option("--stats", o.stats, "full: also format counts and exponent histograms; basic: statistics only")
      ->check(CLI::IsMember({"full", "basic"}));
  app.add_option("--recipes", o.recipes,
                 "Which tensors get the fp8 forecast (what each fp8 and microscaling scaling recipe would do "
                 "to them; `fpscope report --section fp8`): operands, the inputs of the matrix products of linear "
                 "and convolution layers that fp8 training quantizes; all, every measured tensor; none (the "
                 "default: the forecast costs 25 to 45 times the statistics' scan per element it covers). Full "
                 "statistics only")
      ->check(CLI::IsMember({"operands", "all", "none"}));
  app.add_option("--updates", o.updates,
                 "on: measured launches ask mptrain's kernels what their narrowing stores flushed and what each "
                 "optimizer step lost to rounding, and a PyTorch program's watched optimizer steps compare each "
                 "parameter before and after (a copy of the parameters while the step runs); `fpscope report "
                 "--section learning`. off: neither")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--stats-threads", o.stats_threads,
                 "Threads that share the scan of a large tensor, the program's launching thread included "
                 "(default 0: the trainer's own pool where its kernel library lends one, else one per hardware "
                 "thread, at most 4; 1: the launching thread alone)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--rescan-inputs", o.rescan_inputs,
               "Scan every input tensor, even one no launch or declared host write changed since a launch "
               "measured it as an output (by default those statistics are reused: the same numbers, no "
               "second pass). For programs that write tensors behind the kernel ABI's back, or PyTorch programs "
               "that write them from other threads or through numpy");
  app.add_option("--torch-operators", o.torch_operators,
                 "How a PyTorch program's operators are watched: observer (C++, a dispatcher callback; the "
                 "default when it was built) or dispatch-mode (Python's TorchDispatchMode, slower)")
      ->check(CLI::IsMember({"observer", "dispatch-mode"}))
      ->capture_default_str();
  app.add_flag("--eager", o.eager,
               "Run a PyTorch program with torch.compile turned off (TorchDynamo disabled), so that every "
               "operator runs eagerly and is measured; compiled, Inductor's fused kernels are not seen. "
               "Numerics can differ from the compiled run's");
  app.add_option("--trap", o.trap, "Stop the program (SIGTRAP) at the first kernel that makes a NaN/Inf")
      ->check(CLI::IsMember({"nonfinite", "nan", "inf"}));
  app.add_option("--allow", o.allow,
                 "Intended NaN/Inf: comma-separated GLOB:KINDS rules (GLOB against kernel and layer names; "
                 "KINDS nan, +inf, -inf, inf, nonfinite, joined by |). Covered values are recorded but kept "
                 "out of the first-NaN views, the trap and the warnings. 'none': no rule")
      ->capture_default_str();
  app.add_option("--dump", o.dump,
                 "Write the tensors of matching launches to .npy files in <trace>.dumps/; keys op, layer, "
                 "tensor (globs) and step (N or A-B), e.g. 'op=conv2d_backward,step=120'");
  app.add_option("--ring-size", o.ring_mib, "Shared-memory ring size in MiB (rounded up to a power of two)");
  app.add_option("--max-size", o.max_size_mib,
                 "Largest size of the trace in MiB (0: no limit). Past it the records are discarded, as when the disk "
                 "fills, and the trace ends incomplete, saying where; the program runs on unharmed");
  app.add_flag("-q,--quiet", o.quiet, "Print nothing but errors");
  app.add_flag_callback("--no-cupti", [&o] { o.cupti = false; },
               "Do not trace CUDA device activity: leave CUDA_INJECTION64_PATH unset (by default it names "
               "the injector, so a CUDA program records kernels, copies and memory through CUPTI)");
}

}  // namespace

ParsedRun parse_run_options(int argc, char** argv) {
  RunOptions o;
  CLI::App app(kDescription, "fpscope run");
  add_options(app, o);
  // Everything from the first word that is not one of run's options belongs to the program.
  app.prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);  // prints help or the error
    return {std::nullopt, status == 0 ? 0 : 2};
  }
  o.program = app.remaining();
  if (!o.program.empty() && o.program.front() == "--") {
    o.program.erase(o.program.begin());
  } else if (!o.program.empty() && o.program.front().size() > 1 && o.program.front()[0] == '-') {
    std::cerr << "fpscope run: unknown option " << o.program.front()
              << " (see fpscope run --help; put the program after --)\n";
    return {std::nullopt, 2};
  }
  if (const std::string error = validate(o); !error.empty()) {
    std::cerr << "fpscope run: " << error << "\n";
    return {std::nullopt, 2};
  }
  if (o.output.empty()) o.output = default_output_name(o.program.front());
  return {std::move(o), 0};
}

std::vector<std::pair<std::string, std::string>> selection_environment(const RunOptions& o) {
  std::vector<std::pair<std::string, std::string>> env = {
      {contract::env::kEvery, std::to_string(o.every)},
      {contract::env::kTensors, o.tensors},
      {contract::env::kStats, o.stats},
      {contract::env::kRecipes, o.recipes},
      {contract::env::kUpdates, o.updates},
  };
  if (o.stats_threads > 0) env.emplace_back(contract::env::kStatsThreads, std::to_string(o.stats_threads));
  if (o.rescan_inputs) env.emplace_back(contract::env::kRescanInputs, "1");
  if (o.torch_operators == "dispatch-mode") env.emplace_back(contract::env::kTorchDispatchMode, "1");
  if (o.eager) env.emplace_back(contract::env::kTorchEager, "1");
  if (!o.steps.empty()) env.emplace_back(contract::env::kSteps, o.steps);
  if (!o.ops.empty()) env.emplace_back(contract::env::kOps, o.ops);
  if (!o.trap.empty()) env.emplace_back(contract::env::kTrap, o.trap);
  if (!o.dump.empty()) env.emplace_back(contract::env::kDump, o.dump);
  env.emplace_back(contract::env::kAllow, o.allow);
  return env;
}

std::string selection_json(const RunOptions& o) {
  nlohmann::json j = {{"every", o.every},     {"steps", o.steps}, {"ops", o.ops},
                      {"tensors", o.tensors}, {"stats", o.stats}, {"recipes", o.recipes}, {"updates", o.updates}, {"stats_threads", o.stats_threads},
                      {"rescan_inputs", o.rescan_inputs}, {"torch_operators", o.torch_operators}, {"eager", o.eager},
                      {"trap", o.trap},
                      {"allow", o.allow},     {"dump", o.dump},      {"ring_size_mib", o.ring_mib}, {"cupti", o.cupti},
                      {"max_size_mib", o.max_size_mib}};
  return j.dump();
}

uint64_t ring_slots_for(uint64_t mib) {
  uint64_t slots = mib * (1024 * 1024 / wire::kSlotBytes);
  uint64_t p = 1;
  while (p < slots) p <<= 1;
  return p;
}

std::string default_output_name(const std::string& program) {
  const auto slash = program.find_last_of('/');
  const std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("fpscope-{}-{}.sqlite", base.empty() ? "program" : base, stamp);
}

}  // namespace fpscope
