// Thin RAII wrappers over an sqlite3 connection and its prepared statements, used by every part of
// libfpscope_analysis. Failures become TraceError with the kind a user can act on: damaged files
// (SQLITE_CORRUPT, SQLITE_NOTADB) are Corrupt, interrupted calls are Cancelled, the rest Query.
#pragma once

#include "fpscope/analysis.h"

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fpscope::analysis::detail {

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what);

class Db {
 public:
  Db() = default;
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Opens read-only (no create), serialized. Throws TraceError.
  void open_readonly(const std::string& path);
  void exec(const char* sql);
  sqlite3* handle() const { return db_; }
  bool has_table(std::string_view name, bool temp_too = true) const;

 private:
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(const Db& db, std::string_view sql);
  Stmt(sqlite3* db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int index, int64_t value);
  Stmt& bind(int index, double value);
  Stmt& bind(int index, std::string_view value);
  Stmt& bind_null(int index);
  bool step();  // true: a row is ready
  void reset();

  bool is_null(int col) const;
  int64_t i64(int col) const;
  double f64(int col) const;
  std::string text(int col) const;
  std::optional<int64_t> opt_i64(int col) const;
  std::optional<double> opt_f64(int col) const;
  std::optional<std::string> opt_text(int col) const;
  int columns() const;
  sqlite3_stmt* handle() const { return stmt_; }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// A single integer (or nullopt) from a one-row query.
std::optional<int64_t> query_i64(const Db& db, std::string_view sql);

}  // namespace fpscope::analysis::detail
