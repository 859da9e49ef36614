// Thin RAII wrappers around the sqlite3 C API for the trace writer: an open database, a prepared
// statement that is reset and rebound for every row, and an exception that carries SQLite's
// error code (so a full disk can be told apart from a bug).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fpscope::sql {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }
  // SQLITE_FULL, SQLITE_IOERR and friends: the medium failed, not the SQL.
  bool is_storage_failure() const;

 private:
  int code_;
};

class Database {
 public:
  // Opens (creating if asked) the file; throws Error on failure.
  Database(const std::string& path, int flags);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows we need.
  void exec(std::string_view sql);
  sqlite3* handle() const { return db_; }
  [[noreturn]] void fail(int code, const char* what) const;

 private:
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite.
  void bind(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind(int i, uint64_t v) { check(sqlite3_bind_int64(stmt_, i, static_cast<int64_t>(v))); }
  void bind(int i, int32_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind(int i, uint32_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind(int i, double v);  // NaN becomes NULL
  void bind(int i, std::string_view v) {
    // A null data pointer would bind NULL; an empty string is text.
    check(sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  // The same, without a copy: `v` must stay valid until run() or step() has finished.
  void bind_static(int i, std::string_view v) {
    check(sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_STATIC));
  }
  void bind_null(int i) { check(sqlite3_bind_null(stmt_, i)); }
  // Binds the id, or NULL when it is 0 ("none" on the wire).
  void bind_id_or_null(int i, uint64_t id) { id ? bind(i, id) : bind_null(i); }

  // Steps a statement that returns no row, then resets it for the next use.
  void run();
  // Steps once; true if a row is available (read it with column_*). Call reset() when done.
  bool step();
  void reset() { sqlite3_reset(stmt_); }
  int64_t column_int(int i) const { return sqlite3_column_int64(stmt_, i); }
  std::string column_text(int i) const;

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) db_->fail(rc, "bind");
  }
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace fpscope::sql
