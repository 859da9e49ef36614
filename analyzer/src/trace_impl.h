// The inside of fpscope::analysis::Trace, shared by the report sources of libfpscope_analysis.
#pragma once

#include "fpscope/analysis.h"
#include "sqlite_db.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace fpscope::analysis {

struct Trace::Impl {
  std::string path;
  sql::Database db;
  int schema_version = 0;
  RunEnd state = RunEnd::Unknown;
  bool summaries_precomputed = false;
  bool summaries_ready = false;
  std::map<std::string, std::string> meta;
  std::map<std::string, std::optional<int64_t>> counts;  // summary_counts
  std::mutex summaries_mutex;
  bool internal_writes = false;  // lets ensure_summaries() past the query authorizer

  // Builds the summary tables into temporary tables when the file lacks them (once).
  void ensure_summaries(const ProgressCallback& progress = {});
  std::optional<int64_t> count(const std::string& key);
};

namespace detail {
inline Trace::Impl& impl(const Trace& trace) { return trace.impl(); }
inline const sql::Database& db(const Trace& trace) {
  trace.impl().ensure_summaries();
  return trace.impl().db;
}
}  // namespace detail

}  // namespace fpscope::analysis
