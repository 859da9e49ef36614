// Summary tables of trace_finalize.sql kept up to date while the records are written, so that the
// end of the run, while the user waits, need not recompute them from every row (memory_rollup.h,
// tensor_rollup.h).
//
// The SQL statements stay the definition. A rollup writes the rows, in the order, that its
// statements write, and only while that is certain: each one gives up, and its statements run,
// the moment a record arrives that it cannot follow exactly (the reason goes to meta
// summaries_not_rolled_up). RealRun.SummariesEqualOneConnectionRunningTheScript and
// tests/collector/writer/summary_rollup_test.cpp hold the tables against the statements.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fpscope/common/sqlite.h"

namespace fpscope {

class SummaryRollup {
 public:
  virtual ~SummaryRollup() = default;

  // The summary tables it keeps, whether or not it still can.
  virtual std::vector<std::string> tables() const = 0;
  // The columns of `table` that write_rows() binds, and those rows through `insert` (INSERT INTO
  // table VALUES (?, ...)).
  virtual int columns(const std::string& table) const = 0;
  virtual void write_rows(const std::string& table, sql::Statement& insert) const = 0;

  // Whether its tables can be written from it; a rollup that reads another's summary is usable
  // only while that one is too.
  virtual bool usable() const { return usable_; }
  virtual std::string why_not() const { return why_not_; }  // "" while usable
  // A record arrived that it cannot follow: its statements must run.
  void give_up(const char* why) {
    if (usable_) why_not_ = why;
    usable_ = false;
  }

 private:
  bool usable_ = true;
  std::string why_not_;
};

// Creates `table` in `db` as it is declared in `from` (`master`: its sqlite_master, schema-qualified
// where need be) and returns INSERT INTO table VALUES (?, ...) with one parameter per column.
sql::Statement declare_like(const sql::Database& from, const std::string& master, sql::Database& db,
                            const std::string& table);

// Creates `table` in `db` by its CREATE TABLE statement `create`; returns the INSERT as above.
sql::Statement declare(sql::Database& db, const std::string& create, const std::string& table);

// Creates each table as its statement would and writes its rollup's rows into it. The columns are
// declared as SQLite declares them for the statement: the build ran the statements on an empty
// trace (fpscope/collector/trace_template.h; on the trace itself a statement would read every row,
// even with LIMIT 0). Throws sql::Error when a statement's columns are not the ones its rollup
// writes (the statement changed, the rollup not), or the build declared no such table.
void write_rolled_up(sql::Database& db,
                     const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& tables);

}  // namespace fpscope
