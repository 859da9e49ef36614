// Rows of one narrow table gathered in memory and written kRowsPerInsert at a time by one INSERT of
// that many rows. SQLite's cost of running a statement (its program started, the cursors on the
// table and on each of its indexes opened, positioned and closed) is then paid once a batch instead
// of once a row; for the launches, memory events and ranges, two or three small rows a record,
// that cost was most of the row's. Fewer rows than a batch (at a commit, before the table is read
// or changed) are written one statement a row. Private to the collector.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fpscope/common/sqlite.h"

namespace fpscope {

// "<verb> <table (columns)> VALUES (?,...,?),...": `rows` rows of `columns` parameters each.
std::string insert_sql(std::string_view verb, std::string_view table, int columns, int rows);

// Writes rows `from` .. `to` - 1 one statement each: `write_one(r)` binds and runs row r's. A row
// SQLite refuses for what it holds is passed to `refused` and the next one written; a failure of the
// storage is thrown. Returns how many rows were written.
int write_rows_singly(int from, int to, const std::function<void(int)>& write_one,
                      const std::function<void(int)>& refused);

// Runs `batch`, one statement of `rows` rows with every row bound. When SQLite refuses a row, the
// rows it left out are written with `write_one` (write_rows_singly): with `undone_whole` (the plain
// INSERT, which a refusal undoes whole) all of them; otherwise (OR FAIL) the rows before the refused
// one are in the table, SQLite counts them as the statement's changes, and the refused row is passed
// to `refused` and the ones after it written. A failure of the storage is thrown. Returns how many
// rows were written.
int run_batch(const sql::Database& db, sql::Statement& batch, int rows, bool undone_whole,
              const std::function<void(int)>& write_one, const std::function<void(int)>& refused);

class RowBatch {
 public:
  static constexpr int kRowsPerInsert = 64;
  // A cell's value. Text is bound without a copy: only text that lives as long as the program (a
  // literal) may be put in a row.
  using Cell = std::variant<std::monostate, int64_t, double, std::string_view>;

  // `table`: "<table> (<column>, ...)" naming `columns` columns. The statements are prepared when
  // first needed.
  RowBatch(const sql::Database& db, std::string table, int columns);

  // One pending row: set(column, value), columns counted from 1 as SQLite's parameters are.
  class Row {
   public:
    Row& set(int column, int64_t v) { return put(column, v); }
    Row& set(int column, uint64_t v) { return put(column, static_cast<int64_t>(v)); }
    Row& set(int column, int32_t v) { return put(column, int64_t{v}); }
    Row& set(int column, uint32_t v) { return put(column, int64_t{v}); }
    Row& set(int column, double v) { return put(column, v); }  // NaN is written NULL
    Row& set_static(int column, std::string_view literal) { return put(column, literal); }
    Row& set_null(int column) { return put(column, std::monostate{}); }
    Row& set(int column, std::optional<int64_t> v) { return v ? put(column, *v) : set_null(column); }
    const Cell& get(int column) const { return cells_[column - 1]; }

   private:
    friend class RowBatch;
    explicit Row(Cell* cells) : cells_(cells) {}
    Row& put(int column, Cell v) {
      cells_[column - 1] = v;
      return *this;
    }
    Cell* cells_;
  };

  // The next row, every cell NULL. Write the batch (flush) once full() says so.
  Row add();
  bool full() const { return pending_ == kRowsPerInsert; }
  int pending() const { return pending_; }
  // The pending row whose first column holds `id`, if one does (to change a row not yet written).
  std::optional<Row> pending_with_id(int64_t id);

  // Writes the pending rows, in the order they were added. A row SQLite refuses for what it holds
  // (a constraint: a second row with one id) is left out and its position among them passed to
  // `refused`; the others are written. A failure of the storage (a full disk) is thrown, the rows
  // left pending (so that the writer can count them among those lost). Returns how many rows were
  // written.
  //
  // A full batch is one INSERT OR FAIL: a row refused leaves the rows before it in the table, so
  // SQLite keeps no statement journal to undo them (a copy of every page the statement changes,
  // 32 KiB each in a trace, for every batch). But a statement without one that meets a full disk
  // rolls the whole transaction back, so `near_full` (little room left on the disk, or a size
  // limit) asks for the plain INSERT, which undoes only itself and leaves the transaction's
  // earlier rows to be committed.
  int flush(const std::function<void(int)>& refused, bool near_full);

 private:
  void bind_row(sql::Statement& st, int first, int row) const;

  const sql::Database* db_;
  const int columns_;
  sql::DeferredStatement one_;
  sql::DeferredStatement many_;             // OR FAIL
  sql::DeferredStatement many_undone_whole_;  // ABORT: a statement journal
  std::vector<Cell> cells_;
  int pending_ = 0;
};

}  // namespace fpscope
