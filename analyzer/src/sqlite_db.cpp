// RAII wrappers over sqlite3: see sqlite_db.h.
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

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

void Db::open_readonly(const std::string& path) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "opening " + path);
  sqlite3_extended_result_codes(db_, 1);
  // A trace still being written holds its write lock only briefly; wait for it rather than fail.
  sqlite3_busy_timeout(db_, 5000);
}

void Db::exec(const char* sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw_sqlite(db_, rc, message);
  }
}

bool Db::has_table(std::string_view name, bool temp_too) const {
  Stmt st(*this, temp_too ? "SELECT 1 FROM sqlite_temp_master WHERE name = ?1 AND type IN ('table','view') "
                            "UNION ALL SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table','view')"
                          : "SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table','view')");
  st.bind(1, name);
  return st.step();
}

Stmt::Stmt(const Db& db, std::string_view sql) : Stmt(db.handle(), sql) {}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db) {
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "preparing a query");
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Stmt& Stmt::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Stmt& Stmt::bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, rc, "reading the trace");
}

void Stmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Stmt::i64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::f64(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : std::string();
}
std::optional<int64_t> Stmt::opt_i64(int col) const {
  if (is_null(col)) return std::nullopt;
  return i64(col);
}
std::optional<double> Stmt::opt_f64(int col) const {
  if (is_null(col)) return std::nullopt;
  return f64(col);
}
std::optional<std::string> Stmt::opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}
int Stmt::columns() const { return sqlite3_column_count(stmt_); }

std::optional<int64_t> query_i64(const Db& db, std::string_view sql) {
  Stmt st(db, sql);
  if (!st.step()) return std::nullopt;
  return st.opt_i64(0);
}

}  // namespace fpscope::analysis::detail
