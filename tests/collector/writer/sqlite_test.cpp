// The one SQLite wrapper (fpscope/common/sqlite.h): binding round trips, NULL for NaN and empty optionals,
// errors with SQLite's code through the default handler, and a part's own handler; scripts split
// into their statements.
#include "fpscope/common/sqlite.h"

#include "fpscope/contract/embedded_sql.h"
#include "temp_path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

namespace {

using fpscope::sql::Database;
using fpscope::sql::Error;
using fpscope::sql::Statement;

constexpr int kCreate = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;

TEST(Sqlite, BindsAndReadsBackEveryType) {
  fpscope::test::TempDir dir("sqlite-wrapper");
  Database db((dir.path() / "a.sqlite").string(), kCreate);
  db.exec("CREATE TABLE t (i INTEGER, u INTEGER, d REAL, s TEXT, n INTEGER, o INTEGER, e TEXT)");
  Statement insert(db, "INSERT INTO t VALUES (?,?,?,?,?,?,?)");
  insert.run_with(int64_t{-5}, uint64_t{1} << 62, 0.1, "text", std::nan(""), std::optional<int64_t>(), std::string());
  insert.run_with(int32_t{7}, uint32_t{4000000000u}, -2.5, std::string("x"), nullptr, std::optional<int64_t>(3), "");

  Statement read(db, "SELECT i, u, d, s, n, o, e FROM t ORDER BY rowid");
  ASSERT_TRUE(read.step());
  EXPECT_EQ(read.i64(0), -5);
  EXPECT_EQ(read.i64(1), int64_t{1} << 62);
  EXPECT_EQ(read.f64(2), 0.1);
  EXPECT_EQ(read.text(3), "text");
  EXPECT_TRUE(read.is_null(4));  // NaN is stored as NULL
  EXPECT_EQ(read.opt_i64(5), std::nullopt);
  EXPECT_FALSE(read.is_null(6));  // an empty string is text, not NULL
  EXPECT_EQ(read.opt_text(6), std::string());
  ASSERT_TRUE(read.step());
  EXPECT_EQ(read.i64(0), 7);
  EXPECT_EQ(read.i64(1), 4000000000);
  EXPECT_EQ(read.opt_f64(2), -2.5);
  EXPECT_TRUE(read.is_null(4));
  EXPECT_EQ(read.opt_i64(5), 3);
  EXPECT_FALSE(read.step());
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 2);
  EXPECT_EQ(db.query_int("SELECT n FROM t"), std::nullopt);
  EXPECT_TRUE(db.has_table("t"));
  EXPECT_FALSE(db.has_table("missing"));
}

TEST(Sqlite, ResetClearsBindings) {
  fpscope::test::TempDir dir("sqlite-wrapper");
  Database db((dir.path() / "a.sqlite").string(), kCreate);
  Statement st(db, "SELECT ?1");
  st.bind(1, int64_t{9});
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.i64(0), 9);
  st.reset();
  ASSERT_TRUE(st.step());
  EXPECT_TRUE(st.is_null(0));
}

TEST(Sqlite, ErrorsCarrySqlitesCodeAndMessage) {
  fpscope::test::TempDir dir("sqlite-wrapper");
  try {
    Database missing((dir.path() / "no/such/folder.sqlite").string(), SQLITE_OPEN_READONLY);
    FAIL() << "opened a file that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code() & 0xff, SQLITE_CANTOPEN);
    EXPECT_TRUE(e.is_storage_failure());
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
  Database db((dir.path() / "a.sqlite").string(), kCreate);
  try {
    Statement bad(db, "SELECT * FROM nowhere");
    FAIL() << "prepared a query on a missing table";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), SQLITE_ERROR);
    EXPECT_FALSE(e.is_storage_failure());
    EXPECT_NE(std::string(e.what()).find("no such table: nowhere"), std::string::npos) << e.what();
  }
  db.exec("CREATE TABLE u (k INTEGER PRIMARY KEY)");
  Statement insert(db, "INSERT INTO u VALUES (?)");
  insert.run_with(int64_t{1});
  try {
    insert.run_with(int64_t{1});
    FAIL() << "a duplicate key was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), SQLITE_CONSTRAINT_PRIMARYKEY);
  }
}

// A part that speaks to its users in its own terms installs its own handler.
struct Handled : std::runtime_error {
  int code;
  Handled(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};
[[noreturn]] void own_handler(sqlite3* db, int code, std::string_view what) {
  throw Handled(code, std::string(what) + " / " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(code)));
}

TEST(Sqlite, APartsOwnErrorHandlerIsUsedForEveryFailure) {
  fpscope::test::TempDir dir("sqlite-wrapper");
  EXPECT_THROW(Database((dir.path() / "no/such/folder.sqlite").string(), SQLITE_OPEN_READONLY, own_handler), Handled);
  Database db((dir.path() / "a.sqlite").string(), kCreate, own_handler);
  EXPECT_THROW(db.exec("NOT SQL"), Handled);
  EXPECT_THROW(Statement(db, "SELECT * FROM nowhere"), Handled);
  Statement st(db, "SELECT ?1");
  try {
    st.bind(2, int64_t{1});  // out of range
    FAIL() << "bound a parameter that does not exist";
  } catch (const Handled& e) {
    EXPECT_EQ(e.code, SQLITE_RANGE);
  }
}

// A script split by asking SQLite at every line whether the text so far is a whole statement: the
// slow, plain reading statements_of must agree with.
std::vector<std::string> split_line_by_line(const std::string& script) {
  std::vector<std::string> statements;
  std::string current;
  for (size_t at = 0; at < script.size();) {
    const size_t end = script.find('\n', at);
    const size_t next = end == std::string::npos ? script.size() : end + 1;
    current += script.substr(at, next - at);
    at = next;
    if (!sqlite3_complete(current.c_str())) continue;
    size_t start = 0;
    while (start < current.size()) {
      if (std::isspace(static_cast<unsigned char>(current[start]))) {
        ++start;
      } else if (current.compare(start, 2, "--") == 0) {
        start = std::min(current.find('\n', start), current.size());
      } else {
        break;
      }
    }
    statements.push_back(current.substr(start));
    current.clear();
  }
  return statements;
}

TEST(Sqlite, SplitsScriptsIntoTheirStatements) {
  const std::string script =
      "-- a comment; with a semicolon\n"
      "CREATE TABLE t (a TEXT DEFAULT ';',\n"
      "  b INTEGER); SELECT 1;\n"
      "\n"
      "INSERT INTO t VALUES ('x;\n"
      "y', 2);\n"
      "SELECT /* ; */ 3\n"
      "  ;\n"
      "SELECT 5; /* a comment that\n"
      "ends here */\n"
      "SELECT 4";
  const std::vector<std::string> expected = {"CREATE TABLE t (a TEXT DEFAULT ';',\n  b INTEGER); SELECT 1;\n",
                                             "INSERT INTO t VALUES ('x;\ny', 2);\n", "SELECT /* ; */ 3\n  ;\n",
                                             "SELECT 5; /* a comment that\nends here */\n"};
  EXPECT_EQ(fpscope::sql::statements_of(script.c_str()), expected);  // an unfinished last one is left out
  EXPECT_EQ(split_line_by_line(script), expected);
  for (const char* embedded : {fpscope::embedded::kTraceSchemaSql, fpscope::embedded::kTraceFinalizeSql}) {
    if (embedded[0] == '\0') continue;  // a build without the summaries script
    const std::vector<std::string> statements = fpscope::sql::statements_of(embedded);
    EXPECT_GT(statements.size(), 10u);
    EXPECT_EQ(statements, split_line_by_line(embedded));
  }
}

}  // namespace
