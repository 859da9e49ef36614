// A small read-only SQLite helper for the collector tests: open a trace, run a query, read values.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

namespace fpscope::test {

// One value of a result: NULL, an integer, a real or text, compared exactly by the tests.
struct Value {
  int type = SQLITE_NULL;
  int64_t i = 0;
  double d = 0;
  std::string s;
  bool is_null() const { return type == SQLITE_NULL; }
};

class Reader {
 public:
  explicit Reader(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db_);
  }
  ~Reader() { sqlite3_close(db_); }

  std::vector<std::vector<Value>> rows(const std::string& sql) {
    std::vector<std::vector<Value>> out;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return out;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      std::vector<Value> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        Value v;
        v.type = sqlite3_column_type(st, c);
        if (v.type == SQLITE_INTEGER) v.i = sqlite3_column_int64(st, c);
        if (v.type == SQLITE_FLOAT) v.d = sqlite3_column_double(st, c);
        if (v.type == SQLITE_TEXT)
          v.s = reinterpret_cast<const char*>(sqlite3_column_text(st, c));
        row.push_back(v);
      }
      out.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    return out;
  }
  Value one(const std::string& sql) {
    auto r = rows(sql);
    if (r.size() != 1 || r[0].size() != 1) {
      ADD_FAILURE() << sql << ": expected one value, got " << r.size() << " rows";
      return {};
    }
    return r[0][0];
  }
  int64_t integer(const std::string& sql) { return one(sql).i; }
  std::string text(const std::string& sql) { return one(sql).s; }
  std::optional<std::string> meta(const std::string& key) {
    auto r = rows("SELECT value FROM meta WHERE key = '" + key + "'");
    if (r.empty()) return std::nullopt;
    return r[0][0].s;
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace fpscope::test
