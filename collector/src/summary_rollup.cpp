// Writing the rolled-up summary tables (summary_rollup.h).
#include "summary_rollup.h"

#include "fpscope/collector/trace_template.h"

namespace fpscope {

sql::Statement declare_like(const sql::Database& from, const std::string& master, sql::Database& db,
                            const std::string& table) {
  sql::Statement declared(from, "SELECT sql FROM " + master + " WHERE type = 'table' AND name = ?1");
  declared.bind(1, table);
  if (!declared.step()) throw sql::Error(SQLITE_ERROR, table + " was not made");
  return declare(db, declared.text(0), table);
}

sql::Statement declare(sql::Database& db, const std::string& create, const std::string& table) {
  db.exec(create);
  const sql::Statement probe(db, "SELECT * FROM " + table);
  std::string insert = "INSERT INTO " + table + " VALUES (";
  for (int c = 0; c < probe.columns(); ++c) insert += c ? ",?" : "?";
  return sql::Statement(db, insert + ")");
}

void write_rolled_up(sql::Database& db,
                     const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& tables) {
  for (const auto& [create, rollup] : tables) {
    const embedded::SummaryDeclaration* d = embedded::kSummaryDeclarations;
    while (d->table != nullptr && create.table != d->table) ++d;
    if (d->table == nullptr) throw sql::Error(SQLITE_ERROR, create.table + " is not a summary this build declared");
    sql::Statement into = declare(db, d->create, create.table);
    const int columns = sqlite3_bind_parameter_count(into.handle());
    if (columns != rollup->columns(create.table))
      throw sql::Error(SQLITE_ERROR, create.table + " has " + std::to_string(columns) + " columns, its rollup " +
                                         std::to_string(rollup->columns(create.table)));
    rollup->write_rows(create.table, into);
  }
}

}  // namespace fpscope
