// The analyzer's side of the SQLite wrapper (fpscope/common/sqlite.h): failures become TraceError with
// the kind a user can act on. Damaged files (SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_IOERR) are
// Corrupt, interrupted calls are Cancelled, the rest Query.
#pragma once

#include "fpscope/analysis.h"
#include "fpscope/common/sqlite.h"

#include <string>
#include <string_view>

namespace fpscope::analysis::detail {

// The analyzer's error handler for sql::Database: throws TraceError.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what);

// Opens a trace read-only (never creating it), serialized, waiting for a writer's brief locks.
void open_trace_readonly(sql::Database& db, const std::string& path);

}  // namespace fpscope::analysis::detail
