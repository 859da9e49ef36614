// Rows written a batch at a time (row_batch.h).
#include "row_batch.h"

#include <algorithm>

namespace fpscope {

namespace {

// "<verb> <table (columns)> VALUES (?,...,?),...": `rows` rows of `columns` parameters.
std::string insert_of(const char* verb, const std::string& table, int columns, int rows) {
  std::string row = "(";
  for (int c = 0; c < columns; ++c) row += c ? ",?" : "?";
  row += ")";
  std::string sql = std::string(verb) + " " + table + " VALUES ";
  for (int r = 0; r < rows; ++r) sql += (r ? "," : "") + row;
  return sql;
}

}  // namespace

RowBatch::RowBatch(const sql::Database& db, std::string table, int columns)
    : db_(&db),
      columns_(columns),
      one_(db, insert_of("INSERT INTO", table, columns, 1)),
      many_(db, insert_of("INSERT OR FAIL INTO", table, columns, kRowsPerInsert)),
      many_undone_whole_(db, insert_of("INSERT INTO", table, columns, kRowsPerInsert)),
      cells_(static_cast<size_t>(columns) * kRowsPerInsert) {}

RowBatch::Row RowBatch::add() {
  Cell* row = &cells_[static_cast<size_t>(pending_++) * static_cast<size_t>(columns_)];
  for (int c = 0; c < columns_; ++c) row[c] = std::monostate{};
  return Row(row);
}

std::optional<RowBatch::Row> RowBatch::pending_with_id(int64_t id) {
  for (int r = 0; r < pending_; ++r) {
    Cell* row = &cells_[static_cast<size_t>(r) * static_cast<size_t>(columns_)];
    if (const auto* v = std::get_if<int64_t>(&row[0]); v && *v == id) return Row(row);
  }
  return std::nullopt;
}

void RowBatch::bind_row(sql::Statement& st, int first, int row) const {
  const Cell* cells = &cells_[static_cast<size_t>(row) * static_cast<size_t>(columns_)];
  for (int c = 0; c < columns_; ++c) {
    const int i = first + c;
    const Cell& v = cells[c];
    if (const auto* n = std::get_if<int64_t>(&v)) st.bind(i, *n);
    else if (const auto* d = std::get_if<double>(&v)) st.bind(i, *d);
    else if (const auto* s = std::get_if<std::string_view>(&v)) st.bind_static(i, *s);
    else st.bind_null(i);
  }
}

// Rows `from` .. pending_-1, one statement each; a refused row is reported and skipped.
int RowBatch::write_one_by_one(int from, const std::function<void(int)>& refused) {
  int written = 0;
  for (int r = from; r < pending_; ++r) {
    try {
      bind_row(*one_, 1, r);
      one_->run();
      ++written;
    } catch (const sql::Error& e) {
      if (e.is_storage_failure()) throw;
      refused(r);
    }
  }
  return written;
}

int RowBatch::flush(const std::function<void(int)>& refused, bool near_full) {
  if (pending_ == 0) return 0;
  int written = 0;
  if (pending_ < kRowsPerInsert) {
    written = write_one_by_one(0, refused);
  } else {
    sql::Statement& many = near_full ? *many_undone_whole_ : *many_;
    for (int r = 0; r < pending_; ++r) bind_row(many, 1 + r * columns_, r);
    try {
      many.run();
      written = pending_;
    } catch (const sql::Error& e) {
      if (e.is_storage_failure()) throw;
      if (near_full) {
        written = write_one_by_one(0, refused);  // the statement was undone whole
      } else {
        // The rows before the refused one are in the table (SQLite counts them as the statement's
        // changes); the others, a row at a time.
        const int before = std::clamp(sqlite3_changes(db_->handle()), 0, pending_ - 1);
        refused(before);
        written = before + write_one_by_one(before + 1, refused);
      }
    }
  }
  pending_ = 0;
  return written;
}

}  // namespace fpscope
