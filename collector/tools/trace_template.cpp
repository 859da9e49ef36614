// A build step: what every trace starts from, derived from contract/schema/*.sql once here rather
// than at every run, written as fpscope/collector/trace_template.h:
//   - the empty trace: the file SQLite makes of the schema (32 KiB pages, WAL mode in its header),
//     as the runs of nonzero bytes of a file that is otherwise zeros. `fpscope run` writes it out
//     instead of running the schema's statements while the program waits to start;
//   - how SQLite declares each summary table of trace_finalize.sql, from running the script on
//     that empty trace. The collector writes the summaries it kept as the rows arrived
//     (summary_rollup.h) into tables declared exactly so.
//
// Usage: fpscope_trace_template OUTPUT_HEADER
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "fpscope/contract/embedded_sql.h"
#include "fpscope/common/recipe_rows.h"
#include "fpscope/common/sqlite.h"

namespace {

using namespace fpscope;

// The page size of every trace: few pages for wide tensor rows.
constexpr int kPageSize = 32768;

// The bytes of `db`, an empty trace, with the header's read and write versions set to 2 (WAL): a
// file that says so opens in WAL mode with no journal_mode switch.
std::string empty_trace(const sql::Database& db) {
  sqlite3_int64 size = 0;
  unsigned char* bytes = sqlite3_serialize(db.handle(), "main", &size, 0);
  if (bytes == nullptr) throw sql::Error(SQLITE_NOMEM, "serializing the empty trace");
  std::string image(reinterpret_cast<const char*>(bytes), static_cast<size_t>(size));
  sqlite3_free(bytes);
  if (image.size() < 100 || image.compare(0, 16, std::string("SQLite format 3\0", 16)) != 0)
    throw sql::Error(SQLITE_CORRUPT, "the serialized empty trace has no SQLite header");
  image[18] = image[19] = 2;
  return image;
}

// A C++ string literal of `bytes` (octal escapes, so no digit that follows is taken into one).
std::string literal(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?' && !(c >= '0' && c <= '7')) {
      out += static_cast<char>(c);
    } else {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\%03o", c);
      out += esc;
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_HEADER\n", argv[0]);
    return 2;
  }
  std::ostringstream runs, declarations;
  size_t image_size = 0;
  try {
    sql::Database db(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
    db.exec("PRAGMA page_size=" + std::to_string(kPageSize));
    db.exec("BEGIN");
    db.exec(embedded::kTraceSchemaSql);
    sql::insert_recipe_rows(db);
    db.exec("COMMIT");
    const std::string image = empty_trace(db);
    image_size = image.size();
    // Runs of nonzero bytes; zero gaps shorter than 64 bytes stay inside a run.
    size_t i = 0;
    while (i < image.size()) {
      if (image[i] == 0) {
        ++i;
        continue;
      }
      size_t end = i, zeros = 0;
      for (size_t j = i; j < image.size() && zeros < 64; ++j) {
        zeros = image[j] == 0 ? zeros + 1 : 0;
        if (image[j] != 0) end = j + 1;
      }
      runs << "    {" << i << ", " << end - i << ", " << literal(image.substr(i, end - i)) << "},\n";
      i = end;
    }

    // The summaries, run on the same empty trace once its bytes are taken.
    for (const std::string& statement : sql::statements_of(embedded::kTraceFinalizeSql)) {
      db.exec(statement);
      const auto create = sql::create_table_as(statement);
      if (!create) continue;
      sql::Statement declared(db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1");
      declared.bind(1, create->table);
      if (!declared.step()) throw sql::Error(SQLITE_ERROR, create->table + " was not made");
      declarations << "    {\"" << create->table << "\", R\"fpscope_sql(" << declared.text(0) << ")fpscope_sql\"},\n";
    }
  } catch (const sql::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  std::ofstream out(argv[1]);
  out << "// Generated at build time by collector/tools/trace_template.cpp from contract/schema/*.sql.\n"
         "// Edit the .sql files.\n"
         "#pragma once\n\n"
         "#include <cstddef>\n\n"
         "namespace fpscope::embedded {\n\n"
         "// The empty trace: a file of kEmptyTraceBytes bytes, zeros but for these runs.\n"
         "inline constexpr std::size_t kEmptyTraceBytes = "
      << image_size
      << ";\n"
         "struct ByteRun {\n"
         "  std::size_t offset, length;\n"
         "  const char* bytes;\n"
         "};\n"
         "inline constexpr ByteRun kEmptyTraceRuns[] = {\n"
      << runs.str()
      << "};\n\n"
         "// Each summary table of the finalize script as SQLite declares it when its statement runs.\n"
         "struct SummaryDeclaration {\n"
         "  const char* table;\n"
         "  const char* create;  // the CREATE TABLE statement, as sqlite_master keeps it\n"
         "};\n"
         "// Ends with {nullptr, nullptr}.\n"
         "inline constexpr SummaryDeclaration kSummaryDeclarations[] = {\n"
      << declarations.str()
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
