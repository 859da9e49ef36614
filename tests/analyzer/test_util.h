// Helpers for the analyzer tests: temporary folders, synthetic traces and direct SQL on a trace
// (the independent reference the library's numbers are checked against).
#pragma once

#include "temp_path.h"
#include "synthetic_trace.h"

#include <sqlite3.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <unistd.h>

namespace fpscope::test {

// This test process's own folder (mkdtemp), removed at exit.
inline std::string temp_dir() { return process_temp_dir().str(); }

inline std::string make_trace(const std::string& name, synthetic::Options o) {
  const std::string path = temp_dir() + "/" + name + ".sqlite";
  synthetic::write_trace(path, o);
  return path;
}

// An 8-step amp-fp16 run with dynamic loss scaling whose step 4 makes a NaN.
inline synthetic::Options nan_run() {
  synthetic::Options o;
  o.steps = 8;
  o.precision = "amp-fp16";
  o.loss_scale = "dynamic";
  o.growth_interval = 3;
  o.nan_at_step = 4;
  return o;
}

// Runs SQL on the file with a connection of its own and returns the first column of the first row.
inline std::optional<double> sql_value(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::string e = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error(sql + ": " + e);
  }
  std::optional<double> v;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

// The first column of the first row as text (nullopt: no row or NULL).
inline std::optional<std::string> sql_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::optional<std::string> v;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

inline void sql_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string e = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(sql + ": " + e);
}

// Every row of every table whose name starts with `prefix`, each value quoted as SQL would
// write it: "table|rowid|v1|v2...", tables by name, rows by rowid.
inline std::vector<std::string> table_rows(const std::string& path, const std::string& prefix) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::vector<std::string> tables, rows;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, length(?1)) = ?1 ORDER BY name",
                     -1, &st, nullptr);
  sqlite3_bind_text(st, 1, prefix.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  for (const std::string& table : tables) {
    sqlite3_prepare_v2(db, ("SELECT rowid, * FROM " + table + " ORDER BY rowid").c_str(), -1, &st, nullptr);
    sqlite3_stmt* quote = nullptr;
    sqlite3_prepare_v2(db, "SELECT quote(?1)", -1, &quote, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row = table;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        sqlite3_bind_value(quote, 1, sqlite3_column_value(st, c));
        sqlite3_step(quote);
        row += "|" + std::string(reinterpret_cast<const char*>(sqlite3_column_text(quote, 0)));
        sqlite3_reset(quote);
      }
      rows.push_back(std::move(row));
    }
    sqlite3_finalize(quote);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return rows;
}

}  // namespace fpscope::test
