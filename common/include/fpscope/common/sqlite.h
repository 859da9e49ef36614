// The one way to SQLite in fpscope: a small RAII wrapper over an sqlite3 connection and its
// prepared statements, used by the trace writer, the analyzer and the synthetic trace generator.
//
// Failures are reported through the connection's error handler, which must throw. The default
// throws sql::Error, which carries SQLite's result code (so a full disk can be told apart from a
// bug); a part that speaks to users in its own terms installs its own handler (the analyzer turns
// damaged files into TraceError{Corrupt}, interrupted queries into TraceError{Cancelled}).
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// Called with the connection (null when it could not be opened), SQLite's result code and what was
// being done; must throw. SQLite's own message is sqlite3_errmsg(db) (or sqlite3_errstr(code)).
using ErrorHandler = void (*)(sqlite3* db, int code, std::string_view what);

// The default handler: throws Error("<what>: <SQLite's message>").
[[noreturn]] void throw_error(sqlite3* db, int code, std::string_view what);

// The statements of a script (the embedded schema and summaries), each without the comments and
// blank lines before it.
std::vector<std::string> statements_of(const char* script);

// "CREATE TABLE <table> AS <select>" (a summary of trace_finalize.sql), taken apart.
struct CreateTableAs {
  std::string table;
  std::string select;
};
std::optional<CreateTableAs> create_table_as(const std::string& statement);

class Database {
 public:
  Database() = default;
  // Opens (creating if `flags` say so) the file. Extended result codes are on.
  Database(const std::string& path, int flags, ErrorHandler on_error = throw_error);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // The same as the constructor, for a connection that is a member; closes any earlier one.
  void open(const std::string& path, int flags, ErrorHandler on_error = throw_error);
  bool is_open() const { return db_ != nullptr; }

  // Runs one or more statements that return no rows we need.
  void exec(std::string_view sql) const;
  // Waits up to `ms` for another connection's lock instead of failing at once.
  void busy_timeout(int ms) const { sqlite3_busy_timeout(db_, ms); }
  // True if a table or view of that name exists (in the temporary schema too, if asked).
  bool has_table(std::string_view name, bool temp_too = true) const;
  // The first column of the first row as an integer; nullopt for no row or NULL.
  std::optional<int64_t> query_int(std::string_view sql) const;

  sqlite3* handle() const { return db_; }
  // Reports a failure through the error handler (it throws).
  [[noreturn]] void fail(int code, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  ErrorHandler on_error_ = throw_error;
};

class Statement {
 public:
  // `persistent`: a statement kept for the connection's life (SQLITE_PREPARE_PERSISTENT).
  Statement(const Database& db, std::string_view sql, bool persistent = false);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite. Each bind returns the statement, so binds chain.
  Statement& bind(int i, int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, uint64_t v) { return check(sqlite3_bind_int64(stmt_, i, static_cast<int64_t>(v))); }
  Statement& bind(int i, int32_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, uint32_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, double v);  // NaN becomes NULL
  Statement& bind(int i, std::string_view v) {
    // A null data pointer would bind NULL; an empty string is text.
    return check(sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  // The same, without a copy: `v` must stay valid until run() or step() has finished.
  Statement& bind_static(int i, std::string_view v) {
    return check(sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_STATIC));
  }
  Statement& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  // Binds the id, or NULL when it is 0 ("none" on the wire).
  Statement& bind_id_or_null(int i, uint64_t id) { return id ? bind(i, id) : bind_null(i); }
  Statement& bind(int i, std::nullptr_t) { return bind_null(i); }
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  // Binds the arguments to parameters 1, 2, ... and runs the statement: one row written.
  template <typename... Args>
  void run_with(const Args&... args) {
    int i = 0;
    (bind(++i, args), ...);
    run();
  }

  // Steps a statement that returns no row, then resets it for the next use (bindings stay).
  void run();
  // Steps once; true if a row is available (read it with the column accessors).
  bool step();
  // Back to the start, bindings cleared.
  void reset();

  int columns() const { return sqlite3_column_count(stmt_); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double f64(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  std::optional<int64_t> opt_i64(int col) const;
  std::optional<double> opt_f64(int col) const;
  std::optional<std::string> opt_text(int col) const;
  sqlite3_stmt* handle() const { return stmt_; }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) db_->fail(rc, "binding a parameter");
    return *this;
  }
  const Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// A statement prepared when it is first used: for the statements a connection may never need
// (the trace writer's rows of kinds a run does not make). Preparing fails, if it does, at that use.
class DeferredStatement {
 public:
  DeferredStatement(const Database& db, std::string sql) : db_(&db), sql_(std::move(sql)) {}

  Statement& operator*() {
    if (!st_) st_.emplace(*db_, sql_);
    return *st_;
  }
  Statement* operator->() { return &**this; }

 private:
  const Database* db_;
  std::string sql_;
  std::optional<Statement> st_;
};

}  // namespace fpscope::sql
