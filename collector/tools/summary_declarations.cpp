// A build step: the declaration SQLite gives each summary table of trace_finalize.sql, written as
// fpscope/summary_declarations.h. The collector writes the summaries it kept as the rows arrived
// (summary_rollup.h) into tables declared exactly as their statements would declare them; running
// the statements on an empty trace here, once, saves every run from doing it at its end.
//
// Usage: fpscope_summary_declarations OUTPUT_HEADER
#include <cstdio>
#include <fstream>
#include <string>

#include "fpscope/embedded_sql.h"
#include "fpscope/sqlite.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_HEADER\n", argv[0]);
    return 2;
  }
  using namespace fpscope;
  std::string body;
  try {
    sql::Database shape(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
    shape.exec(embedded::kTraceSchemaSql);
    for (const std::string& statement : sql::statements_of(embedded::kTraceFinalizeSql)) {
      shape.exec(statement);
      const auto create = sql::create_table_as(statement);
      if (!create) continue;
      sql::Statement declared(shape, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1");
      declared.bind(1, create->table);
      if (!declared.step()) throw sql::Error(SQLITE_ERROR, create->table + " was not made");
      body += "    {\"" + create->table + "\", R\"fpscope_sql(" + declared.text(0) + ")fpscope_sql\"},\n";
    }
  } catch (const sql::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  std::ofstream out(argv[1]);
  out << "// Generated at build time by collector/tools/summary_declarations.cpp from\n"
         "// collector/schema/*.sql: each summary table of the finalize script as SQLite declares it\n"
         "// when its statement runs. Edit the .sql files.\n"
         "#pragma once\n\n"
         "namespace fpscope::embedded {\n\n"
         "struct SummaryDeclaration {\n"
         "  const char* table;\n"
         "  const char* create;  // the CREATE TABLE statement, as sqlite_master keeps it\n"
         "};\n\n"
         "// Ends with {nullptr, nullptr}.\n"
         "inline constexpr SummaryDeclaration kSummaryDeclarations[] = {\n"
      << body
      << "    {nullptr, nullptr},\n"
         "};\n\n"
         "}  // namespace fpscope::embedded\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
