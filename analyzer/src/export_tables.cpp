// Table exports: every table of the trace as CSV files, or the whole trace as one JSON document.
#include "fpscope/export.h"
#include "report_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fpscope::analysis {


namespace {

std::vector<std::string> table_names(const Trace& trace) {
  sql::Statement st(detail::db(trace),
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rootpage");
  std::vector<std::string> names;
  while (st.step()) names.push_back(st.text(0));
  return names;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// A cell as JSON: numbers stay numbers, NULL is null; NaN/Inf (not JSON) become strings.
void write_json_cell(std::ostream& out, sqlite3_stmt* st, int col) {
  switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER: out << sqlite3_column_int64(st, col); break;
    case SQLITE_FLOAT: {
      double v = sqlite3_column_double(st, col);
      if (std::isfinite(v)) {
        out << fmt::format("{}", v);
      } else {
        out << '"' << human_number(v) << '"';
      }
      break;
    }
    case SQLITE_NULL: out << "null"; break;
    default: {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, col));
      std::string text(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, col)));
      out << nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
}

}  // namespace

std::vector<std::string> export_csv(const Trace& trace, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create the folder (" + ec.message() + ")");
  std::vector<std::string> written;
  for (const auto& table : table_names(trace)) {
    const std::string path = (fs::path(dir) / (table + ".csv")).string();
    std::ofstream out(path, std::ios::binary);
    if (!out) throw std::runtime_error(path + ": cannot be written");
    sql::Statement st(detail::db(trace), "SELECT * FROM \"" + table + "\"");
    for (int c = 0; c < st.columns(); ++c) {
      out << (c ? "," : "") << csv_field(sqlite3_column_name(st.handle(), c));
    }
    out << "\r\n";
    while (st.step()) {
      for (int c = 0; c < st.columns(); ++c) {
        if (c) out << ',';
        if (st.is_null(c)) continue;
        if (sqlite3_column_type(st.handle(), c) == SQLITE_FLOAT) {
          out << human_number_exact(st.f64(c));
        } else {
          out << csv_field(st.text(c));
        }
      }
      out << "\r\n";
    }
    if (!out) throw std::runtime_error(path + ": write failed (disk full?)");
    written.push_back(path);
  }
  return written;
}

void export_json(const Trace& trace, std::ostream& out) {
  nlohmann::json meta(trace.meta());
  out << "{\"schema_version\":" << trace.schema_version() << ",\"meta\":" << meta.dump() << ",\"tables\":{";
  bool first_table = true;
  for (const auto& table : table_names(trace)) {
    if (table == "meta") continue;
    out << (first_table ? "" : ",") << nlohmann::json(table).dump() << ":[";
    first_table = false;
    sql::Statement st(detail::db(trace), "SELECT * FROM \"" + table + "\"");
    std::vector<std::string> keys;
    for (int c = 0; c < st.columns(); ++c) keys.push_back(nlohmann::json(sqlite3_column_name(st.handle(), c)).dump());
    bool first_row = true;
    while (st.step()) {
      out << (first_row ? "{" : ",{");
      first_row = false;
      for (int c = 0; c < st.columns(); ++c) {
        out << (c ? "," : "") << keys[c] << ':';
        write_json_cell(out, st.handle(), c);
      }
      out << '}';
    }
    out << ']';
  }
  out << "}}\n";
}

}  // namespace fpscope::analysis
