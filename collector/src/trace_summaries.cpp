// The trace writer's summaries: trace_finalize.sql's statements, shared out between two
// connections, and the rollups the writer kept as the rows arrived (trace_writer.cpp finishes the
// trace with them).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fpscope/contract/embedded_sql.h"
#include "trace_writer_impl.h"

namespace fpscope {

// [SECTION] Summaries -------------------------------------------------------------------------------
//
// trace_finalize.sql runs after the program has ended, while the user waits, and both processors
// are free by then. The summaries that read no other summary are shared out between this
// connection and a second one to the same file (it reads the trace and writes only a database of
// its own in memory), each taking the next in the script's order when it is free; the second
// connection's tables are then copied here, and the summaries that read others run last, in the
// script's order. Before all that, the summaries the writer kept up to date as the rows arrived
// (summary_rollup.h: the memory timeline's and the tensor rows' groups, the largest part of the
// statements' time) are written, where it could keep them exactly. Each table holds the rows, in
// the order, that one connection running the script writes.

namespace {

// A summary that reads base tables and views only: its table and its SELECT.
struct IndependentSummary {
  std::string name;
  std::string select;
  std::string statement;
};

// A summary whose SELECT reads no summary.
std::optional<IndependentSummary> independent_summary(const std::string& statement) {
  const std::optional<sql::CreateTableAs> create = sql::create_table_as(statement);
  if (!create || create->table.rfind("summary_", 0) != 0) return std::nullopt;
  if (create->select.find("summary_") != std::string::npos) return std::nullopt;
  return IndependentSummary{create->table, create->select, statement};
}

// When the scope ends, however it ends: no summary is left for the second connection to take,
// and its thread is joined.
struct Joiner {
  std::thread& thread;
  std::atomic<size_t>& next;
  size_t count;
  ~Joiner() {
    next = count;
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

const SummaryRollup* TraceWriter::Impl::usable_rollup_of(const std::string& table) const {
  for (const SummaryRollup* rollup : rollups()) {
    const std::vector<std::string> tables = rollup->tables();
    if (std::find(tables.begin(), tables.end(), table) != tables.end()) return rollup->usable() ? rollup : nullptr;
  }
  return nullptr;
}

// meta summaries_rolled_up: the tables written from a rollup; summaries_not_rolled_up: the others a
// rollup could have kept, and why it did not ("table,table: why; ...").
void TraceWriter::Impl::write_rollup_meta(const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& kept,
                                          const std::string& failure) {
  std::string kept_names, not_kept;
  for (const auto& [create, rollup] : kept) kept_names += (kept_names.empty() ? "" : ",") + create.table;
  for (const SummaryRollup* rollup : rollups()) {
    if (rollup->usable() && failure.empty()) continue;
    std::string names;
    for (const std::string& table : rollup->tables()) names += (names.empty() ? "" : ",") + table;
    const std::string why = rollup->usable() ? "writing them failed: " + failure : rollup->why_not();
    not_kept += (not_kept.empty() ? "" : "; ") + names + ": " + why;
  }
  for (const auto& [key, value] : {std::pair{"summaries_rolled_up", kept_names}, {"summaries_not_rolled_up", not_kept}}) {
    insert_meta.bind(1, std::string_view(key));
    insert_meta.bind(2, value);
    insert_meta.run();
  }
}

void TraceWriter::Impl::run_summaries() {
  const std::vector<std::string> statements = sql::statements_of(embedded::kTraceFinalizeSql);
  std::vector<IndependentSummary> independent;
  std::vector<bool> made_apart(statements.size(), false);  // shared out or rolled up
  std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>> rolled_up;
  size_t first_shared = statements.size();
  for (size_t i = 0; i < statements.size(); ++i) {
    const auto create = sql::create_table_as(statements[i]);
    if (const SummaryRollup* rollup = create ? usable_rollup_of(create->table) : nullptr) {
      rolled_up.emplace_back(*create, rollup);
      made_apart[i] = true;
      first_shared = std::min(first_shared, i);
    } else if (auto s = independent_summary(statements[i])) {
      independent.push_back(std::move(*s));
      made_apart[i] = true;
      first_shared = std::min(first_shared, i);
    }
  }
  db.exec("BEGIN");
  for (size_t i = 0; i < first_shared; ++i) db.exec(statements[i]);  // the DROPs
  // The summaries kept while the rows were written (summary_rollup.h), where they could be; their
  // statements, should writing them fail for any reason but the disk.
  std::string rollup_failure;
  db.exec("SAVEPOINT rollups");
  try {
    write_rolled_up(db, rolled_up);
  } catch (const sql::Error& e) {
    if (e.is_storage_failure()) throw;
    rollup_failure = e.what();
    db.exec("ROLLBACK TO rollups");
    for (const auto& [create, rollup] : rolled_up) db.exec("CREATE TABLE " + create.table + " AS " + create.select);
    rolled_up.clear();
  }
  db.exec("RELEASE rollups");
  write_rollup_meta(rolled_up, rollup_failure);

  // The second connection reads what this one committed last (every record) and writes its tables
  // into a database of its own in memory. Which summaries it made: meta summaries_beside.
  sql::Database side;
  std::thread worker;
  std::atomic<size_t> next{0};
  std::vector<const IndependentSummary*> made_beside;
  const Joiner joiner{worker, next, independent.size()};
  bool two_connections = independent.size() > 1;
  if (two_connections) {
    try {
      // Read-write, as the database attached in memory inherits the connection's mode; nothing
      // but that database is written.
      side.open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
      side.exec("PRAGMA temp_store=MEMORY; ATTACH DATABASE ':memory:' AS beside");
    } catch (const sql::Error&) {
      two_connections = false;  // everything is made here
    }
  }
  if (two_connections) {
    try {
      worker = std::thread([&] {
        try {
          for (size_t k = next++; k < independent.size(); k = next++) {
            side.exec("CREATE TABLE beside." + independent[k].name + " AS " + independent[k].select);
            made_beside.push_back(&independent[k]);
          }
        } catch (...) {
          next = independent.size();  // what is left falls to this connection
        }
      });
    } catch (const std::system_error&) {
      // No thread: everything is made here.
    }
  }
  for (size_t k = next++; k < independent.size(); k = next++) db.exec(independent[k].statement);
  if (worker.joinable()) worker.join();
  // The second connection's tables: their CREATE TABLE as SQLite wrote it, then their rows.
  for (const IndependentSummary* s : made_beside) {
    sql::Statement into = declare_like(side, "beside.sqlite_master", db, s->name);
    sql::Statement rows(side, "SELECT * FROM beside." + s->name);
    while (rows.step()) {
      for (int c = 0; c < rows.columns(); ++c) {
        const int rc = sqlite3_bind_value(into.handle(), c + 1, sqlite3_column_value(rows.handle(), c));
        if (rc != SQLITE_OK) db.fail(rc, "copying " + s->name);
      }
      into.run();
    }
  }
  // Whatever neither connection made (the second one failed) is made here.
  for (const IndependentSummary& s : independent)
    if (!db.has_table(s.name, false)) db.exec(s.statement);
  std::string names;
  for (const IndependentSummary* s : made_beside) names += (names.empty() ? "" : ",") + s->name;
  insert_meta.bind(1, std::string_view("summaries_beside"));
  insert_meta.bind(2, names);
  insert_meta.run();
  for (size_t i = first_shared; i < statements.size(); ++i)
    if (!made_apart[i]) db.exec(statements[i]);
  db.exec("COMMIT");
}

// The optional rollups of trace_finalize.sql: one transaction; the trace is valid without them.
void TraceWriter::Impl::run_finalize_script() {
  if (embedded::kTraceFinalizeSql[0] == '\0') return;
  std::string status = "ok";
  const auto started = std::chrono::steady_clock::now();
  try {
    run_summaries();
  } catch (const std::exception& e) {
    status = std::string("failed: ") + e.what();
    try {
      db.exec("ROLLBACK");
    } catch (const sql::Error&) {
    }
  }
  try {
    begin_if_needed();
  } catch (const sql::Error& e) {
    storage_failed(e);
    return;
  }
  set_meta("finalize_status", status);
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - started;
  set_meta("finalize_ms", fmt_ms(took.count()));
  commit();
}

}  // namespace fpscope
