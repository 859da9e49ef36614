// Opening a trace: the Trace handle every call takes, how opening reports progress and failure, and
// the errors the library throws.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/analysis/formats.h"

namespace fpscope::analysis {

// Why a trace could not be read. Each kind has its own process exit code (docs/cli.md).
enum class TraceErrorKind {
  NotFound,      // no such file, or it cannot be read                       exit 3
  NotSqlite,     // the file is not an SQLite database                       exit 4
  NotATrace,     // an SQLite database, but not an fpscope trace             exit 5
  NewerSchema,   // written by a newer fpscope than this one reads          exit 6
  Corrupt,       // truncated or damaged                                     exit 7
  Query,         // an SQL statement failed or was refused (query verb)      exit 8
  Cancelled,     // the progress callback or interrupt() stopped the call   exit 130
  NoSuchRank,    // OpenOptions::rank names a rank the trace does not hold   exit 2
};
int exit_code_of(TraceErrorKind kind);

class TraceError : public std::runtime_error {
 public:
  TraceError(TraceErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  TraceErrorKind kind() const { return kind_; }

 private:
  TraceErrorKind kind_;
};

struct LoadProgress {
  std::string stage;    // what is being done: "validating", "computing summaries", ...
  double fraction = 0;  // 0..1 over the whole open, rough
};
// Return false to cancel: open() then throws TraceError(Cancelled).
using ProgressCallback = std::function<bool(const LoadProgress&)>;

struct OpenOptions {
  ProgressCallback progress;
  // Compute the summary tables into temporary tables when the trace lacks them. With false, the
  // report functions still work but run live aggregates over the whole trace each time.
  bool build_missing_summaries = true;
  // Only this rank of a multi-process trace: every table, view, summary and report then reads that
  // rank's rows alone (temporary views of the same names filter them), as if it were traced alone.
  std::optional<int32_t> rank;
};

// How the traced run ended: the trace contract's endings (fpscope/contract/run_end.h), read from
// meta end_reason and exit_code; a trace still 'running' whose collector no longer runs is
// CollectorLost. contract::label() names an ending, contract::is_failure() says how to show it.
using RunEnd = contract::RunEnd;

// A single cell of a query result.
using Value = std::variant<std::monostate, int64_t, double, std::string>;
std::string value_text(const Value& value);  // "" for NULL, shortest round-trip for doubles

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
  bool truncated = false;  // more rows existed than max_rows
};

class Trace {
 public:
  // Opens read-only and validates: an SQLite file, application_id, a meta table, a schema version
  // this library reads, the tables and columns the reports need, a file not shorter than its
  // header says. Throws TraceError with a message that says what is wrong and what to do.
  static std::unique_ptr<Trace> open(const std::string& path, const OpenOptions& options = {});
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  const std::string& path() const;
  int schema_version() const;
  RunEnd state() const;
  // The run had not ended when the trace was read: it is still being written (Running) or its
  // collector died (CollectorLost).
  bool unfinished() const { return contract::is_unfinished(state()); }
  // True when the summary tables were written by trace_finalize.sql (not computed at open).
  bool summaries_precomputed() const;
  const std::map<std::string, std::string>& meta() const;
  std::optional<std::string> meta_value(std::string_view key) const;
  // The program was a PyTorch program (its front end wrote config.framework "torch <version>"):
  // advice names GradScaler rather than mptrain's flags.
  bool from_pytorch() const;

  // Runs one read-only SQL statement. Writing statements are refused (TraceError Query), as is
  // more than one statement. max_rows 0: no limit.
  QueryResult query(std::string_view sql, std::size_t max_rows = 0) const;

  // Stops the call running on another thread; it throws TraceError(Cancelled).
  void interrupt() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Trace(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fpscope::analysis
