// Writing the rolled-up summary tables (summary_rollup.h).
#include "summary_rollup.h"

#include "fpscope/embedded_sql.h"

namespace fpscope {

sql::Statement declare_like(const sql::Database& from, const std::string& master, sql::Database& db,
                            const std::string& table) {
  sql::Statement declared(from, "SELECT sql FROM " + master + " WHERE type = 'table' AND name = ?1");
  declared.bind(1, table);
  if (!declared.step()) throw sql::Error(SQLITE_ERROR, table + " was not made");
  db.exec(declared.text(0));
  const sql::Statement probe(db, "SELECT * FROM " + table);
  std::string insert = "INSERT INTO " + table + " VALUES (";
  for (int c = 0; c < probe.columns(); ++c) insert += c ? ",?" : "?";
  return sql::Statement(db, insert + ")");
}

void write_rolled_up(sql::Database& db,
                     const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& tables) {
  if (tables.empty()) return;
  sql::Database shape(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
  shape.exec(embedded::kTraceSchemaSql);
  for (const auto& [create, rollup] : tables) {
    shape.exec("CREATE TABLE " + create.table + " AS " + create.select);
    sql::Statement into = declare_like(shape, "sqlite_master", db, create.table);
    const int columns = sqlite3_bind_parameter_count(into.handle());
    if (columns != rollup->columns(create.table))
      throw sql::Error(SQLITE_ERROR, create.table + " has " + std::to_string(columns) + " columns, its rollup " +
                                         std::to_string(rollup->columns(create.table)));
    rollup->write_rows(create.table, into);
  }
}

}  // namespace fpscope
