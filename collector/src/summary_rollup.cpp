// Writing the rolled-up summary tables (summary_rollup.h).
#include "summary_rollup.h"

#include "fpscope/embedded_sql.h"

namespace fpscope {

void write_rolled_up(sql::Database& db,
                     const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& tables) {
  if (tables.empty()) return;
  sql::Database shape(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
  shape.exec(embedded::kTraceSchemaSql);
  sql::Statement declared(shape, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1");
  for (const auto& [create, rollup] : tables) {
    shape.exec("CREATE TABLE " + create.table + " AS " + create.select);
    declared.reset();
    declared.bind(1, create.table);
    if (!declared.step()) throw sql::Error(SQLITE_ERROR, create.table + " was not made");
    db.exec(declared.text(0));
    sql::Statement probe(db, "SELECT * FROM " + create.table);
    if (probe.columns() != rollup->columns(create.table))
      throw sql::Error(SQLITE_ERROR, create.table + " has " + std::to_string(probe.columns()) + " columns, its rollup " +
                                         std::to_string(rollup->columns(create.table)));
    std::string insert = "INSERT INTO " + create.table + " VALUES (";
    for (int c = 0; c < probe.columns(); ++c) insert += c ? ",?" : "?";
    sql::Statement into(db, insert + ")");
    rollup->write_rows(create.table, into);
  }
}

}  // namespace fpscope
