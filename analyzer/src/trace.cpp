// Opening a trace: file checks before SQLite sees it, validation of the schema, the summary tables
// (precomputed or built into temporary tables), and the read-only query entry point.
#include "trace_impl.h"

#include "fpscope/common/process_identity.h"
#include "fpscope/common/recipe_rows.h"
#include "fpscope/contract/embedded_sql.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace fpscope::analysis {
namespace {


constexpr std::array<const char*, 8> kSummaryTables = {
    "summary_ranges", "summary_layer_steps", "summary_steps", "summary_nonfinite",
    "summary_memory", "summary_allocations", "summary_counts", "summary_ranks"};

// The tables and columns the reports read; a trace missing any is damaged.
constexpr std::array<std::pair<const char*, const char*>, 11> kRequiredColumns = {{
    {"meta", "key, value"},
    {"strings", "id, value"},
    {"dtypes", "id, name, bits"},
    {"categories", "id, name"},
    {"nvtx_ranges", "id, start_ns, end_ns, thread, depth, kind, name_id, domain_id, step"},
    {"kernels", "id, start_ns, end_ns, name_id, layer_id, phase_id, step, thread, device, status, sampled"},
    {"tensors", "id, kernel_id, role, slot, tensor_uid, name_id, dtype, shape, count, nan, pos_inf, neg_inf, "
                "zero, subnormal, min, max, absmax, min_nonzero, mean, rms, f16_overflow, f16_underflow, "
                "f16_subnormal, f16_near_max, bf16_overflow, bf16_underflow, bf16_subnormal, bf16_near_max, "
                "e4m3_overflow, e4m3_underflow, e4m3_subnormal, e4m3_near_max, e5m2_overflow, "
                "e5m2_underflow, e5m2_subnormal, e5m2_near_max, exp_hist"},
    {"nonfinite", "id, tensor_id, kernel_id, kind, first_index, first_bits, origin"},
    {"memory_events", "id, t_ns, kind, alloc_id, bytes, category, name_id, device, step"},
    {"loss_scale", "id, kernel_id, t_ns, step, scale_before, scale_after, found_inf, skipped, event, growth_tracker"},
    {"scalars", "id, t_ns, step, name_id, value"},
}};

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

int64_t file_size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// What can be told from the file itself before SQLite opens it.
void check_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw TraceError(TraceErrorKind::NotFound,
                     fmt::format("{}: no such file ({}); give the path of a trace written by "
                                 "`fpscope run -o FILE`", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    throw TraceError(TraceErrorKind::NotFound, fmt::format("{}: is a folder, not a trace file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(TraceErrorKind::NotFound, fmt::format("{}: cannot be read (permissions?)", path));
  std::array<unsigned char, 100> header{};
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  const auto got = in.gcount();
  if (got == 0) throw TraceError(TraceErrorKind::NotSqlite, fmt::format("{}: is empty, not a trace", path));
  if (got < 100 || std::memcmp(header.data(), "SQLite format 3", 16) != 0) {
    throw TraceError(TraceErrorKind::NotSqlite,
                     fmt::format("{}: not an SQLite file, so not an fpscope trace (traces are written "
                                 "by `fpscope run -o FILE`)", path));
  }
  uint32_t page_size = (uint32_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) {
    throw TraceError(TraceErrorKind::Corrupt, fmt::format("{}: damaged SQLite header (page size {})", path, page_size));
  }
  const int64_t size = static_cast<int64_t>(st.st_size);
  const int64_t wal_size = file_size_of(path + "-wal");
  const bool header_size_valid = be32(&header[92]) == be32(&header[24]);
  const int64_t pages = be32(&header[28]);
  if (wal_size <= 0 && (size % page_size != 0 || (header_size_valid && pages * page_size > size))) {
    throw TraceError(TraceErrorKind::Corrupt,
                     fmt::format("{}: truncated: the file has {} bytes but its header describes {} pages "
                                 "of {} bytes; copy it again or re-run the program", path, size, pages,
                                 page_size));
  }
}

void check_identity(const sql::Database& db, const std::string& path) {
  const auto app_id = db.query_int("PRAGMA application_id").value_or(0);
  if (app_id != kApplicationId) {
    throw TraceError(TraceErrorKind::NotATrace,
                     fmt::format("{}: an SQLite database, but not an fpscope trace (application_id {:#x}, "
                                 "a trace has {:#x}); traces are written by `fpscope run -o FILE`",
                                 path, app_id, kApplicationId));
  }
  if (!db.has_table("meta", false)) {
    throw TraceError(TraceErrorKind::Corrupt, fmt::format("{}: an fpscope trace without its meta table: damaged", path));
  }
}

std::map<std::string, std::string> read_meta(const sql::Database& db) {
  std::map<std::string, std::string> meta;
  sql::Statement st(db, "SELECT key, value FROM meta");
  while (st.step()) meta[st.text(0)] = st.text(1);
  return meta;
}

int schema_version_of(const sql::Database& db, const std::map<std::string, std::string>& meta, const std::string& path) {
  int version = static_cast<int>(db.query_int("PRAGMA user_version").value_or(0));
  if (auto it = meta.find("schema_version"); it != meta.end()) {
    try {
      version = std::stoi(it->second);
    } catch (const std::exception&) {
      throw TraceError(TraceErrorKind::Corrupt,
                       fmt::format("{}: meta schema_version is '{}', not a number: damaged", path, it->second));
    }
  }
  if (version > kNewestSchemaVersion) {
    throw TraceError(TraceErrorKind::NewerSchema,
                     fmt::format("{}: this trace was written by a newer fpscope (schema {}); this fpscope "
                                 "reads up to {}. Use the fpscope that wrote it, or a newer one.",
                                 path, version, kNewestSchemaVersion));
  }
  if (version < kOldestSchemaVersion) {
    throw TraceError(TraceErrorKind::NewerSchema,
                     fmt::format("{}: trace schema {} is older than this fpscope reads ({} to {})", path,
                                 version, kOldestSchemaVersion, kNewestSchemaVersion));
  }
  return version;
}

void check_tables(const sql::Database& db, const std::string& path) {
  for (const auto& [table, columns] : kRequiredColumns) {
    if (!db.has_table(table, false)) {
      throw TraceError(TraceErrorKind::Corrupt,
                       fmt::format("{}: the table '{}' is missing: the trace is damaged or incomplete", path, table));
    }
    sqlite3_stmt* st = nullptr;
    std::string sql = fmt::format("SELECT {} FROM {} LIMIT 0", columns, table);
    int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr);
    std::string error = rc == SQLITE_OK ? "" : sqlite3_errmsg(db.handle());
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
      if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) detail::throw_sqlite(db.handle(), rc, "reading the schema");
      throw TraceError(TraceErrorKind::Corrupt,
                       fmt::format("{}: the table '{}' lacks columns the reports need ({}): damaged", path, table, error));
    }
  }
}

std::optional<long long> meta_integer(const std::map<std::string, std::string>& meta, const char* key) {
  auto it = meta.find(key);
  if (it == meta.end()) return std::nullopt;
  long long value = 0;
  const std::string& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Whether the `fpscope run` named in meta still runs; nullopt for traces that do not say.
std::optional<bool> collector_alive(const std::map<std::string, std::string>& meta) {
  const auto pid = meta_integer(meta, "collector_pid");
  const auto ticks = meta_integer(meta, "collector_start_ticks");
  auto boot = meta.find("collector_boot_id");
  if (!pid || !ticks || boot == meta.end()) return std::nullopt;
  return common::is_alive({static_cast<pid_t>(*pid), static_cast<unsigned long long>(*ticks), boot->second});
}

RunEnd state_of(const std::map<std::string, std::string>& meta) {
  auto it = meta.find("end_reason");
  if (it == meta.end() || it->second.empty()) return RunEnd::Unknown;
  const bool running = it->second == contract::info(RunEnd::Running).meta;
  return contract::run_end_of(it->second, meta_integer(meta, "exit_code"),
                              running ? collector_alive(meta) : std::nullopt);
}

// The `CREATE TABLE summary_...` statements of trace_finalize.sql, made temporary.
std::vector<std::string> temp_summary_statements() {
  std::vector<std::string> statements;
  for (const std::string& statement : sql::statements_of(embedded::kTraceFinalizeSql)) {
    const auto create = sql::create_table_as(statement);
    if (create && create->table.rfind("summary_", 0) == 0)
      statements.push_back("CREATE TEMP TABLE " + create->table + " AS " + create->select);
  }
  return statements;
}

// Whether main.`table` has `column`.
bool has_column(const sql::Database& db, const std::string& table, const char* column) {
  sqlite3_stmt* st = nullptr;
  const std::string sql = fmt::format("SELECT {} FROM main.{} LIMIT 0", column, table);
  const int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr);
  sqlite3_finalize(st);
  return rc == SQLITE_OK;
}

// The event tables that carry the rank of the process that recorded them (schema 3).
constexpr std::array<const char*, 14> kRankTables = {
    "nvtx_ranges", "kernels", "tensors", "nonfinite", "memory_events", "loss_scale", "scalars",
    "cuda_kernels", "cuda_memcpy", "cuda_memset", "cuda_memory", "tensor_recipes", "tensor_stores", "param_updates"};

// Makes each of `tables` the trace lacks as this build's schema declares it, temporary and empty.
// Returns whether any was made.
bool add_missing_tables(const sql::Database& db, std::initializer_list<const char*> tables) {
  bool added = false;
  for (const std::string& statement : sql::statements_of(embedded::kTraceSchemaSql)) {
    for (const char* table : tables) {
      const std::string create = std::string("CREATE TABLE ") + table + " (";
      if (statement.compare(0, create.size(), create) == 0 && !db.has_table(table, false)) {
        db.exec("CREATE TEMP TABLE " + statement.substr(std::string("CREATE TABLE ").size()));
        added = true;
      }
    }
  }
  return added;
}

// Columns and tables later schemas added: a trace of an older schema gets temporary views of the same
// names that add them with the values they would have held (SQLite resolves unqualified names in the
// temporary schema first), and this build's views over those, so every query reads one schema.
// Returns whether anything was added.
bool add_missing_columns(const sql::Database& db) {
  bool added = false;
  for (const char* table : kRankTables) {
    if (!db.has_table(table, false)) continue;
    std::string extra;
    // Schema 1: no allow rules existed, so nothing was allowed.
    if (std::strcmp(table, "nonfinite") == 0 && !has_column(db, table, "allowed")) extra += ", 0 AS allowed";
    // Schemas 1 to 3 measured no fp64 tensor: nothing lay beyond the histogram.
    if (std::strcmp(table, "tensors") == 0 && !has_column(db, table, "hist_below"))
      extra += ", CASE WHEN exp_hist IS NULL THEN NULL ELSE 0 END AS hist_below,"
               " CASE WHEN exp_hist IS NULL THEN NULL ELSE 0 END AS hist_above";
    // Schemas 1 and 2: one traced process, rank 0.
    if (!has_column(db, table, "rank")) extra += ", 0 AS rank";
    if (extra.empty()) continue;
    db.exec(fmt::format("CREATE TEMP VIEW {0} AS SELECT *{1} FROM main.{0}", table, extra));
    added = true;
  }
  if (!db.has_table("tensor_recipes", false)) {
    // Schemas 1 to 4 forecast no scaling recipe: `recipes` from the contract, `tensor_recipes` empty.
    add_missing_tables(db, {"recipes", "tensor_recipes"});
    sql::insert_recipe_rows(db, "temp.recipes");
    added = true;
  }
  // Schemas 1 to 5 counted no narrowing store and no parameter update.
  added |= add_missing_tables(db, {"tensor_stores", "param_updates"});
  if (!db.has_table("processes", false)) {
    // The one process meta describes.
    db.exec(
        "CREATE TEMP VIEW processes AS SELECT 0 AS id, 0 AS rank, NULL AS local_rank, NULL AS world_size,"
        " CAST((SELECT value FROM meta WHERE key = 'traced_pid') AS INTEGER) AS pid, '' AS host,"
        " NULL AS rank_source, coalesce((SELECT value FROM meta WHERE key = 'traced_exe'), '') AS exe,"
        " coalesce((SELECT value FROM meta WHERE key = 'injector_options'), '') AS injector_options,"
        " CAST((SELECT value FROM meta WHERE key = 'process.realtime_ns') AS INTEGER) AS realtime_ns,"
        " CAST((SELECT value FROM meta WHERE key = 'process.monotonic_ns') AS INTEGER) AS monotonic_ns,"
        " NULL AS ended, NULL AS exit_ns");
    added = true;
  }
  return added;
}

// OpenOptions::rank: temporary views of the event tables and `processes` that hold that rank's rows
// only (over the ones add_missing_columns made for an older trace, whose one process is rank 0).
void select_rank(const sql::Database& db, int32_t rank, bool older, const std::string& path) {
  sql::Statement ranks(db, "SELECT group_concat(rank, ', ') FROM (SELECT rank FROM processes UNION SELECT rank FROM kernels "
                           "ORDER BY rank)");
  std::string known = ranks.step() && !ranks.is_null(0) ? ranks.text(0) : "";
  sql::Statement has(db, "SELECT EXISTS (SELECT 1 FROM processes WHERE rank = ?1) OR EXISTS (SELECT 1 FROM kernels WHERE rank = ?1)");
  has.bind(1, static_cast<int64_t>(rank));
  if (!has.step() || has.i64(0) == 0) {
    throw TraceError(TraceErrorKind::NoSuchRank,
                     known.empty() ? fmt::format("{}: no rank {} in this trace (it holds no kernels or processes)", path, rank)
                                   : fmt::format("{}: no rank {} in this trace (it holds rank{} {})", path, rank,
                                                 known.find(',') == std::string::npos ? "" : "s", known));
  }
  if (older) return;  // one process, rank 0: nothing to leave out
  for (const char* table : kRankTables) {
    if (!db.has_table(table, false)) continue;
    db.exec(fmt::format("CREATE TEMP VIEW {0} AS SELECT * FROM main.{0} WHERE rank = {1}", table, rank));
  }
  db.exec(fmt::format("CREATE TEMP VIEW processes AS SELECT * FROM main.processes WHERE rank = {}", rank));
}

// A trace written by an earlier build may lack views this build's schema defines (the memory
// timeline the summaries and the memory plot read), or hold earlier definitions of them (a view
// gains columns within a schema version: v_memory_peak's peak_step, which the summaries read).
// Every view is created as a temporary view on this connection, from this build's schema,
// shadowing the trace's own; the file is not changed.
void add_views(const sql::Database& db) {
  const std::string prefix = "CREATE VIEW ";
  for (const std::string& statement : sql::statements_of(embedded::kTraceSchemaSql)) {
    if (statement.compare(0, prefix.size(), prefix) != 0) continue;
    db.exec("CREATE TEMP VIEW " + statement.substr(prefix.size()));
  }
}

struct ProgressContext {
  const ProgressCallback* callback;
  LoadProgress progress;
};

int on_progress(void* ctx) {
  auto* context = static_cast<ProgressContext*>(ctx);
  if (!context->callback || !*context->callback) return 0;
  return (*context->callback)(context->progress) ? 0 : 1;
}

bool report(const ProgressCallback& callback, const char* stage, double fraction) {
  return !callback || callback(LoadProgress{stage, fraction});
}

// Refuses, on the query connection, what could change it or reach other files.
int deny_changes(void* ctx, int action, const char* arg1, const char* arg2, const char*, const char*) {
  if (*static_cast<const bool*>(ctx)) return SQLITE_OK;
  if (action == SQLITE_ATTACH || action == SQLITE_DETACH) return SQLITE_DENY;
  if (action == SQLITE_PRAGMA && arg1 && arg2 && std::strcmp(arg1, "query_only") == 0) return SQLITE_DENY;
  return SQLITE_OK;
}

}  // namespace

void Trace::Impl::ensure_summaries(const ProgressCallback& progress) {
  std::lock_guard lock(summaries_mutex);
  if (summaries_ready) return;
  if (!summaries_precomputed) {
    ProgressContext context{&progress, {"computing summaries (the trace has none yet)", 0.1}};
    sqlite3_progress_handler(db.handle(), 100000, on_progress, &context);
    internal_writes = true;
    db.exec("PRAGMA query_only = 0");
    // The summaries sort every tensor record: a larger cache (temp_store is MEMORY from the open;
    // setting it here would drop the temporary views made there).
    db.exec("PRAGMA cache_size = -262144");
    try {
      db.exec("BEGIN");
      const auto statements = temp_summary_statements();
      for (size_t i = 0; i < statements.size(); ++i) {
        context.progress.fraction = 0.1 + 0.85 * static_cast<double>(i) / statements.size();
        db.exec(statements[i].c_str());
      }
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
      sqlite3_exec(db.handle(), "PRAGMA query_only = 1", nullptr, nullptr, nullptr);
      internal_writes = false;
      sqlite3_progress_handler(db.handle(), 0, nullptr, nullptr);
      throw;
    }
    sqlite3_progress_handler(db.handle(), 0, nullptr, nullptr);
    db.exec("PRAGMA query_only = 1");
    internal_writes = false;
  }
  sql::Statement st(db, "SELECT key, value FROM summary_counts");
  while (st.step()) counts[st.text(0)] = st.opt_i64(1);
  summaries_ready = true;
}

std::optional<int64_t> Trace::Impl::count(const std::string& key) {
  ensure_summaries();
  auto it = counts.find(key);
  return it == counts.end() ? std::nullopt : it->second;
}

Trace::Trace(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trace::~Trace() = default;

std::unique_ptr<Trace> Trace::open(const std::string& path, const OpenOptions& options) {
  auto cancelled = [] { return TraceError(TraceErrorKind::Cancelled, "opening the trace was cancelled"); };
  if (!report(options.progress, "checking the file", 0)) throw cancelled();
  check_file(path);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  detail::open_trace_readonly(impl->db, path);
  try {
    check_identity(impl->db, path);
    impl->meta = read_meta(impl->db);
    impl->schema_version = schema_version_of(impl->db, impl->meta, path);
    check_tables(impl->db, path);
    // Small files are checked page by page; a big one is checked as it is read.
    if (file_size_of(path) < (64 << 20)) {
      sql::Statement st(impl->db, "PRAGMA quick_check(1)");
      if (st.step() && st.text(0) != "ok") {
        throw TraceError(TraceErrorKind::Corrupt, fmt::format("{}: the trace is damaged ({})", path, st.text(0)));
      }
    }
  } catch (const TraceError&) {
    throw;
  }
  impl->state = state_of(impl->meta);
  bool all_tables = true;
  for (const char* table : kSummaryTables) all_tables = all_tables && impl->db.has_table(table, false);
  auto version = impl->meta.find("summary_version");
  impl->summaries_precomputed = all_tables && version != impl->meta.end() && version->second == std::to_string(embedded::kTraceSummaryVersion);
  // Temporary objects live in memory. Set before any exists: changing temp_store drops them all.
  impl->db.exec("PRAGMA temp_store = MEMORY");
  const bool older = add_missing_columns(impl->db);
  if (options.rank) {
    select_rank(impl->db, *options.rank, older, path);
    impl->summaries_precomputed = false;  // the file's summaries cover every rank
  }
  add_views(impl->db);
  impl->db.exec("PRAGMA query_only = 1");
  if (!report(options.progress, "validated", 0.1)) throw cancelled();
  if (options.build_missing_summaries || impl->summaries_precomputed) impl->ensure_summaries(options.progress);
  sqlite3_set_authorizer(impl->db.handle(), deny_changes, &impl->internal_writes);
  if (!report(options.progress, "ready", 1.0)) throw cancelled();
  return std::unique_ptr<Trace>(new Trace(std::move(impl)));
}

const std::string& Trace::path() const { return impl_->path; }
int Trace::schema_version() const { return impl_->schema_version; }
RunEnd Trace::state() const { return impl_->state; }
bool Trace::summaries_precomputed() const { return impl_->summaries_precomputed; }
const std::map<std::string, std::string>& Trace::meta() const { return impl_->meta; }

std::optional<std::string> Trace::meta_value(std::string_view key) const {
  auto it = impl_->meta.find(std::string(key));
  if (it == impl_->meta.end()) return std::nullopt;
  return it->second;
}

bool Trace::from_pytorch() const { return meta_value("config.framework").value_or("").starts_with("torch"); }

void Trace::interrupt() const { sqlite3_interrupt(impl_->db.handle()); }

QueryResult Trace::query(std::string_view sql, std::size_t max_rows) const {
  sqlite3* db = impl_->db.handle();
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, &tail);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  if (rc != SQLITE_OK) {
    if (rc == SQLITE_AUTH) {
      throw TraceError(TraceErrorKind::Query, "refused: fpscope query reads the trace only (no ATTACH, no query_only changes)");
    }
    detail::throw_sqlite(db, rc, "the query");
  }
  if (!raw) throw TraceError(TraceErrorKind::Query, "the query is empty");
  std::string_view rest(tail, static_cast<size_t>(sql.data() + sql.size() - tail));
  if (rest.find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    throw TraceError(TraceErrorKind::Query, "give one SQL statement at a time");
  }
  if (!sqlite3_stmt_readonly(raw)) {
    throw TraceError(TraceErrorKind::Query,
                     "refused: fpscope query only reads; this statement would change the trace. "
                     "Work on a copy with sqlite3 if you need to edit it.");
  }
  QueryResult result;
  for (int i = 0; i < sqlite3_column_count(raw); ++i) result.columns.emplace_back(sqlite3_column_name(raw, i));
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    if (max_rows && result.rows.size() == max_rows) {
      result.truncated = true;
      break;
    }
    std::vector<Value> row;
    for (int i = 0; i < sqlite3_column_count(raw); ++i) {
      switch (sqlite3_column_type(raw, i)) {
        case SQLITE_INTEGER: row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(raw, i))); break;
        case SQLITE_FLOAT: row.emplace_back(sqlite3_column_double(raw, i)); break;
        case SQLITE_NULL: row.emplace_back(std::monostate{}); break;
        case SQLITE_BLOB: {
          const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(raw, i));
          std::string hex = "x'";
          for (int b = 0; b < sqlite3_column_bytes(raw, i); ++b) hex += fmt::format("{:02x}", p[b]);
          row.emplace_back(hex + "'");
          break;
        }
        default: {
          const auto* p = sqlite3_column_text(raw, i);
          row.emplace_back(std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(raw, i)));
        }
      }
    }
    result.rows.push_back(std::move(row));
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) detail::throw_sqlite(db, rc, "the query");
  return result;
}

std::string value_text(const Value& value) {
  if (std::holds_alternative<int64_t>(value)) return std::to_string(std::get<int64_t>(value));
  if (std::holds_alternative<double>(value)) return fmt::format("{}", std::get<double>(value));
  if (std::holds_alternative<std::string>(value)) return std::get<std::string>(value);
  return "";
}

}  // namespace fpscope::analysis
