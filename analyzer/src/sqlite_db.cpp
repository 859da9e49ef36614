// The analyzer's SQLite error handler: see sqlite_db.h.
#include "sqlite_db.h"

#include <fmt/format.h>

namespace fpscope::analysis::detail {

void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  const char* message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR) {
    throw TraceError(TraceErrorKind::Corrupt,
                     fmt::format("the trace is damaged ({}: {}); it may be truncated or overwritten",
                                 what, message));
  }
  if (primary == SQLITE_INTERRUPT) throw TraceError(TraceErrorKind::Cancelled, "cancelled");
  throw TraceError(TraceErrorKind::Query, fmt::format("{}: {}", what, message));
}

void open_trace_readonly(sql::Database& db, const std::string& path) {
  db.open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, throw_sqlite);
  // A trace still being written holds its write lock only briefly; wait for it rather than fail.
  db.busy_timeout(5000);
}

}  // namespace fpscope::analysis::detail
