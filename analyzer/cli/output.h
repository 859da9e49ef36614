// The output model of the fpscope command line: a report is a list of sections, each with notes
// and tables whose cells carry both a human text and a machine value. One model, four renderings:
// aligned text for people, and CSV, Markdown and JSON for programs.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fpscope::cli {

struct Cell {
  std::string text;        // what a person reads: "1.50 MiB"
  nlohmann::json value;    // what a program reads: 1572864 (null when unknown)
  bool numeric = false;    // right-aligned in text tables

  Cell() = default;
  Cell(std::string t) : text(std::move(t)), value(text) {}
  Cell(const char* t) : text(t), value(text) {}
  Cell(std::string t, nlohmann::json v, bool num = true) : text(std::move(t)), value(std::move(v)), numeric(num) {}
};

Cell int_cell(int64_t v);
Cell bytes_cell(int64_t v);
Cell number_cell(const std::optional<double>& v);
Cell percent_cell(std::optional<double> share);  // share 0..1
Cell log2_cell(const std::optional<double>& v);  // "2^5.3"
Cell opt_text_cell(const std::optional<std::string>& v);
Cell opt_int_cell(const std::optional<int64_t>& v);

struct Table {
  std::string name;                 // machine name: "ranges"
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  // Where set, the rows a person reads (text and Markdown), by index; CSV and JSON keep them all.
  // The section's notes say what was left out.
  std::optional<std::vector<size_t>> rows_for_people = std::nullopt;
};

struct Section {
  std::string name;                 // machine name: "memory"
  std::string title;                // "Memory"
  std::vector<std::string> notes;   // sentences shown before the tables
  std::vector<Table> tables;
  nlohmann::json extra = nlohmann::json::object();  // key facts for JSON output
};

enum class Format { Text, Json, Csv, Markdown };
Format parse_format(const std::string& name);

void render(const std::vector<Section>& sections, Format format, std::ostream& out);
void render_table_text(const Table& table, std::ostream& out, const std::string& indent = "  ");

}  // namespace fpscope::cli
