// fpscope: one command line with verbs. `run` traces a program (the collector's run_main); the rest
// read traces through libfpscope_analysis. Exit codes: docs/cli.md.
#include "commands.h"

#include "fpscope/analysis.h"

#include <fmt/format.h>

#include <cstring>
#include <iostream>
#include <map>

#ifdef FPSCOPE_HAVE_RUN
#include "fpscope/collector/run_command.h"
#endif

namespace {

struct Verb {
  const char* name;
  const char* help;
};

constexpr Verb kVerbs[] = {
#ifdef FPSCOPE_HAVE_RUN
    {"run", "run a program under the injector and write its trace (fpscope run -o T.sqlite -- PROGRAM ...)"},
#endif
    {"report", "summary, first NaN/Inf and how it spread, value ranges, loss scale, memory of one trace"},
    {"compare", "compare two traces (A = source, B = target): memory, accuracy, loss curves, ranges, events"},
    {"advise", "write fp32/bf16 op lists and suggest a loss scale for mptrain from a trace's ranges"},
    {"export", "write a trace as CSV, JSON, Chrome/Perfetto trace or a self-contained HTML report"},
    {"query", "run one read-only SQL statement on a trace"},
};

void print_usage(std::ostream& out) {
  out << "fpscope: finds where floating point goes wrong in mixed-precision training\n\n"
         "Usage: fpscope VERB [OPTIONS]   (fpscope VERB --help for a verb's options)\n\nVerbs:\n";
  for (const auto& v : kVerbs) out << fmt::format("  {:<9} {}\n", v.name, v.help);
  out << "\nExit codes: 0 ok, 1 failure, 2 usage, 3 no such file, 4 not SQLite, 5 not a trace, 6 newer schema,\n"
         "7 damaged trace, 8 SQL refused or failed, 9 trace still being written, 130 cancelled.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(std::cout);
    return argc < 2 ? fpscope::cli::kExitUsage : fpscope::cli::kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "fpscope, trace schema " << fpscope::analysis::kOldestSchemaVersion << " to "
              << fpscope::analysis::kNewestSchemaVersion << "\n";
    return 0;
  }
  const std::string verb = argv[1];
#ifdef FPSCOPE_HAVE_RUN
  if (verb == "run") return fpscope::run_main(argc - 1, argv + 1);
#endif
  bool known = false;
  for (const auto& v : kVerbs) known = known || verb == v.name;
  if (!known) {
    std::cerr << "fpscope: unknown verb '" << verb << "'\n\n";
    print_usage(std::cerr);
    return fpscope::cli::kExitUsage;
  }
  CLI::App app{"fpscope"};
  app.name("fpscope");
  app.require_subcommand(1);
  std::map<std::string, fpscope::cli::Action> actions = {
      {"report", fpscope::cli::add_report(app)},   {"compare", fpscope::cli::add_compare(app)},
      {"advise", fpscope::cli::add_advise(app)},   {"export", fpscope::cli::add_export(app)},
      {"query", fpscope::cli::add_query(app)}};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "fpscope " << verb << ": " << e.what() << "\nRun 'fpscope " << verb << " --help' for its options.\n";
    return fpscope::cli::kExitUsage;
  }
  try {
    return actions.at(verb)();
  } catch (const fpscope::analysis::TraceError& e) {
    std::cerr << "fpscope " << verb << ": " << e.what() << "\n";
    return fpscope::analysis::exit_code_of(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "fpscope " << verb << ": " << e.what() << "\n";
    return fpscope::cli::kExitFailure;
  }
}
