// Rows written a batch at a time (row_batch.h).
#include "row_batch.h"

#include <algorithm>

namespace fpscope {

std::string insert_sql(std::string_view verb, std::string_view table, int columns, int rows) {
  std::string row = "(";
  for (int c = 0; c < columns; ++c) row += c ? ",?" : "?";
  row += ")";
  std::string sql = std::string(verb) + " " + std::string(table) + " VALUES ";
  for (int r = 0; r < rows; ++r) sql += (r ? "," : "") + row;
  return sql;
}

int write_rows_singly(int from, int to, const std::function<void(int)>& write_one,
                      const std::function<void(int)>& refused) {
  int written = 0;
  for (int r = from; r < to; ++r) {
    try {
      write_one(r);
      ++written;
    } catch (const sql::Error& e) {
      if (e.is_storage_failure()) throw;
      refused(r);
    }
  }
  return written;
}

int run_batch(const sql::Database& db, sql::Statement& batch, int rows, bool undone_whole,
              const std::function<void(int)>& write_one, const std::function<void(int)>& refused) {
  try {
    batch.run();
    return rows;
  } catch (const sql::Error& e) {
    if (e.is_storage_failure()) throw;
    if (undone_whole) return write_rows_singly(0, rows, write_one, refused);
    const int before = std::clamp(sqlite3_changes(db.handle()), 0, rows - 1);
    refused(before);
    return before + write_rows_singly(before + 1, rows, write_one, refused);
  }
}

RowBatch::RowBatch(const sql::Database& db, std::string table, int columns)
    : db_(&db),
      columns_(columns),
      one_(db, insert_sql("INSERT INTO", table, columns, 1)),
      many_(db, insert_sql("INSERT OR FAIL INTO", table, columns, kRowsPerInsert)),
      many_undone_whole_(db, insert_sql("INSERT INTO", table, columns, kRowsPerInsert)),
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

int RowBatch::flush(const std::function<void(int)>& refused, bool near_full) {
  if (pending_ == 0) return 0;
  const auto write_one = [&](int r) {
    bind_row(*one_, 1, r);
    one_->run();
  };
  int written = 0;
  if (pending_ < kRowsPerInsert) {
    written = write_rows_singly(0, pending_, write_one, refused);
  } else {
    sql::Statement& many = near_full ? *many_undone_whole_ : *many_;
    for (int r = 0; r < pending_; ++r) bind_row(many, 1 + r * columns_, r);
    written = run_batch(*db_, many, pending_, near_full, write_one, refused);
  }
  pending_ = 0;
  return written;
}

}  // namespace fpscope
