// The verbs of the fpscope command line, each registered on the CLI11 app and run after parsing.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace fpscope::cli {

// Exit codes beyond those of TraceErrorKind (exit_code_of): docs/cli.md lists them all.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // an output could not be written, or an internal error
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitInProgress = 9;   // the output is complete for what the trace holds, but the run had not ended
inline constexpr int kExitCollectorLost = 10;  // the same, and it never will: the collector that wrote it died

using Action = std::function<int()>;

// Each adds its subcommand to `app` and returns what runs it once parsed.
Action add_report(CLI::App& app);
Action add_compare(CLI::App& app);
Action add_advise(CLI::App& app);
Action add_export(CLI::App& app);
Action add_query(CLI::App& app);

}  // namespace fpscope::cli
