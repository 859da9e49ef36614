// The sqlite3 wrapper of fpscope/common/sqlite.h.
#include "fpscope/common/sqlite.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <string_view>

namespace fpscope::sql {

bool Error::is_storage_failure() const {
  switch (code_ & 0xff) {
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return true;
    default:
      return false;
  }
}

void throw_error(sqlite3* db, int code, std::string_view what) {
  const char* message = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  throw Error(code, std::string(what) + ": " + message);
}

std::vector<std::string> statements_of(const char* script) {
  std::vector<std::string> statements;
  std::string current;
  while (*script) {
    const char* end = std::strchr(script, '\n');
    const size_t len = end ? static_cast<size_t>(end - script) + 1 : std::strlen(script);
    const std::string_view line(script, len);
    current.append(script, len);
    script += len;
    // A statement ends at a ';' token, after which only blanks and comments may come; a line
    // without a ';' or the end of a /* comment cannot end one, so SQLite is asked only at lines
    // that hold either (asking at every line made the split quadratic in a statement's length).
    if (line.find(';') == std::string_view::npos && line.find("*/") == std::string_view::npos) continue;
    if (!sqlite3_complete(current.c_str())) continue;
    size_t start = 0;
    while (start < current.size()) {  // skip comments and blank lines before the statement
      if (std::isspace(static_cast<unsigned char>(current[start]))) {
        ++start;
      } else if (current.compare(start, 2, "--") == 0) {
        start = current.find('\n', start);
        if (start == std::string::npos) start = current.size();
      } else {
        break;
      }
    }
    statements.push_back(current.substr(start));
    current.clear();
  }
  return statements;
}

std::optional<CreateTableAs> create_table_as(const std::string& statement) {
  const std::string prefix = "CREATE TABLE ";
  if (statement.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const size_t name_end = statement.find_first_of(" \n", prefix.size());
  if (name_end == std::string::npos) return std::nullopt;
  const size_t as = statement.find_first_not_of(" \n", name_end);
  if (as == std::string::npos || (statement.compare(as, 3, "AS ") != 0 && statement.compare(as, 3, "AS\n") != 0))
    return std::nullopt;
  return CreateTableAs{statement.substr(prefix.size(), name_end - prefix.size()), statement.substr(as + 3)};
}

// [SECTION] Database --------------------------------------------------------------------------------

Database::Database(const std::string& path, int flags, ErrorHandler on_error) { open(path, flags, on_error); }

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

void Database::open(const std::string& path, int flags, ErrorHandler on_error) {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
  on_error_ = on_error ? on_error : throw_error;
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close_v2(db);  // the handler reads sqlite3_errstr(rc) instead
    on_error_(nullptr, rc, "cannot open " + path);
    throw Error(rc, "cannot open " + path);  // a handler that returned
  }
  db_ = db;
  sqlite3_extended_result_codes(db_, 1);
}

void Database::fail(int code, std::string_view what) const {
  on_error_(db_, code, what);
  throw Error(code, std::string(what));  // a handler that returned
}

void Database::exec(std::string_view sql) const {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    sqlite3_free(message);  // the same text as sqlite3_errmsg, which the handler reads
    fail(rc, "running SQL");
  }
}

bool Database::has_table(std::string_view name, bool temp_too) const {
  Statement st(*this,
               temp_too ? "SELECT 1 FROM sqlite_temp_master WHERE name = ?1 AND type IN ('table','view') "
                          "UNION ALL SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table','view')"
                        : "SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table','view')");
  st.bind(1, name);
  return st.step();
}

std::optional<int64_t> Database::query_int(std::string_view sql) const {
  Statement st(*this, sql);
  if (!st.step()) return std::nullopt;
  return st.opt_i64(0);
}

// [SECTION] Statement -------------------------------------------------------------------------------

Statement::Statement(const Database& db, std::string_view sql, bool persistent) : db_(&db) {
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()),
                                    persistent ? SQLITE_PREPARE_PERSISTENT : 0, &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(rc, "preparing a statement");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, double v) {
  // SQLite would store NaN as NULL anyway; say so here rather than rely on it.
  return check(std::isnan(v) ? sqlite3_bind_null(stmt_, i) : sqlite3_bind_double(stmt_, i, v));
}

void Statement::run() {
  const int rc = sqlite3_step(stmt_);
  sqlite3_reset(stmt_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) db_->fail(rc, "writing a row");
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  db_->fail(rc, "reading rows");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

std::optional<int64_t> Statement::opt_i64(int col) const {
  if (is_null(col)) return std::nullopt;
  return i64(col);
}

std::optional<double> Statement::opt_f64(int col) const {
  if (is_null(col)) return std::nullopt;
  return f64(col);
}

std::optional<std::string> Statement::opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}

}  // namespace fpscope::sql
