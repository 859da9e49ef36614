// Renders the command line's sections as aligned text, CSV, Markdown or JSON (see output.h).
#include "output.h"

#include "fpscope/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fpscope::cli {

using namespace fpscope::analysis;

Cell int_cell(int64_t v) { return {std::to_string(v), v}; }
Cell bytes_cell(int64_t v) { return {human_bytes(v), v}; }
Cell number_cell(const std::optional<double>& v) {
  if (!v) return {"-", nullptr};
  return {human_number(*v), std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(human_number(*v))};
}
Cell percent_cell(std::optional<double> share) {
  if (!share) return {"-", nullptr};
  return {human_percent(*share), *share};
}
Cell log2_cell(const std::optional<double>& v) {
  if (!v) return {"-", nullptr};
  return {fmt::format("2^{:.1f}", *v), *v};
}
Cell opt_text_cell(const std::optional<std::string>& v) {
  if (!v) return {"-", nullptr, false};
  return Cell(*v);
}
Cell opt_int_cell(const std::optional<int64_t>& v) {
  if (!v) return {"-", nullptr};
  return int_cell(*v);
}

Format parse_format(const std::string& name) {
  if (name == "text" || name == "table") return Format::Text;
  if (name == "json") return Format::Json;
  if (name == "csv") return Format::Csv;
  if (name == "md" || name == "markdown") return Format::Markdown;
  throw std::invalid_argument("unknown format '" + name + "'");
}

namespace {

// Display width of UTF-8 text: counts code points, not bytes.
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string q = "\"";
  for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string machine_text(const Cell& c) {
  if (c.value.is_null()) return "";
  if (c.value.is_string()) return c.value.get<std::string>();
  return c.value.dump();
}

// Calls f(row) for each row a person reads.
template <typename F>
void for_rows_for_people(const Table& t, F f) {
  if (!t.rows_for_people) {
    for (const auto& row : t.rows) f(row);
    return;
  }
  for (size_t i : *t.rows_for_people)
    if (i < t.rows.size()) f(t.rows[i]);
}

void render_csv(const std::vector<Section>& sections, std::ostream& out) {
  bool first = true;
  for (const auto& s : sections) {
    for (const auto& t : s.tables) {
      if (!first) out << "\n";
      first = false;
      out << "# " << s.name << "/" << t.name << "\n";
      for (size_t i = 0; i < t.columns.size(); ++i) out << (i ? "," : "") << csv_field(t.columns[i]);
      out << "\n";
      for (const auto& row : t.rows) {
        for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(machine_text(row[i]));
        out << "\n";
      }
    }
  }
}

void render_markdown(const std::vector<Section>& sections, std::ostream& out) {
  for (const auto& s : sections) {
    out << "## " << s.title << "\n\n";
    for (const auto& n : s.notes) out << n << "\n\n";
    for (const auto& t : s.tables) {
      out << "|";
      for (const auto& c : t.columns) out << " " << c << " |";
      out << "\n|";
      for (size_t i = 0; i < t.columns.size(); ++i) out << "---|";
      out << "\n";
      for_rows_for_people(t, [&](const std::vector<Cell>& row) {
        out << "|";
        for (const auto& c : row) {
          std::string text = c.text;
          for (size_t p = 0; (p = text.find('|', p)) != std::string::npos; p += 2) text.replace(p, 1, "\\|");
          out << " " << text << " |";
        }
        out << "\n";
      });
      out << "\n";
    }
  }
}

void render_json(const std::vector<Section>& sections, std::ostream& out) {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& s : sections) {
    nlohmann::json section = s.extra;
    if (!s.notes.empty()) section["notes"] = s.notes;
    for (const auto& t : s.tables) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& row : t.rows) {
        nlohmann::json r = nlohmann::json::object();
        for (size_t i = 0; i < row.size() && i < t.columns.size(); ++i) r[t.columns[i]] = row[i].value;
        rows.push_back(std::move(r));
      }
      section[t.name] = std::move(rows);
    }
    doc[s.name] = std::move(section);
  }
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

void render_table_text(const Table& t, std::ostream& out, const std::string& indent) {
  std::vector<size_t> widths(t.columns.size());
  for (size_t i = 0; i < t.columns.size(); ++i) widths[i] = width(t.columns[i]);
  for_rows_for_people(t, [&](const std::vector<Cell>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], width(row[i].text));
  });
  auto line = [&](auto cell_text, auto right) {
    std::string s = indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string text = cell_text(i);
      const std::string pad(widths[i] - std::min(widths[i], width(text)), ' ');
      s += (i ? "  " : "") + (right(i) ? pad + text : text + (i + 1 < widths.size() ? pad : ""));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  auto numeric_column = [&](size_t i) {
    return !t.rows.empty() && i < t.rows.front().size() && t.rows.front()[i].numeric;
  };
  line([&](size_t i) { return t.columns[i]; }, numeric_column);
  line([&](size_t i) { return std::string(widths[i], '-'); }, [](size_t) { return false; });
  for_rows_for_people(t, [&](const std::vector<Cell>& row) {
    line([&](size_t i) { return i < row.size() ? row[i].text : std::string(); },
         [&](size_t i) { return i < row.size() && row[i].numeric; });
  });
}

void render(const std::vector<Section>& sections, Format format, std::ostream& out) {
  switch (format) {
    case Format::Json: render_json(sections, out); return;
    case Format::Csv: render_csv(sections, out); return;
    case Format::Markdown: render_markdown(sections, out); return;
    case Format::Text: break;
  }
  for (size_t k = 0; k < sections.size(); ++k) {
    const auto& s = sections[k];
    if (k) out << "\n";
    out << s.title << "\n" << std::string(width(s.title), '=') << "\n";
    for (const auto& n : s.notes) out << "  " << n << "\n";
    bool first_table = true;
    for (const auto& t : s.tables) {
      if (t.rows.empty()) continue;  // a header over nothing says nothing to a person (CSV and JSON keep it)
      if (!s.notes.empty() || !first_table) out << "\n";
      first_table = false;
      render_table_text(t, out);
    }
  }
}

}  // namespace fpscope::cli
