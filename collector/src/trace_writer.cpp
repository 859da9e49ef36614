// The trace writer's frame: writing out the empty trace and opening it, the prepared statements,
// batched transactions, storage failures, meta, and finishing the trace. The record handlers are
// in trace_records.cpp, the summaries finishing writes in trace_summaries.cpp.
#include "fpscope/collector/trace_writer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <system_error>
#include <optional>
#include <thread>
#include <vector>

#include "fpscope/contract/collectives.h"
#include "fpscope/contract/embedded_sql.h"
#include "fpscope/collector/trace_template.h"
#include "trace_writer_impl.h"

namespace fpscope {

// "12.3": milliseconds, one decimal.
std::string TraceWriter::Impl::fmt_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", ms);
  return text;
}

namespace {

// CPU time (user and system) of this process's threads so far, in milliseconds.
std::optional<double> process_cpu_ms() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return std::nullopt;
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

constexpr const char* kTensorTable =
    "tensors (id, kernel_id, role, slot, tensor_uid, name_id, dtype, shape, count, nan,"
    " pos_inf, neg_inf, zero, subnormal, min, max, absmax, min_nonzero, mean, rms,"
    " f16_overflow, f16_underflow, f16_subnormal, f16_near_max,"
    " bf16_overflow, bf16_underflow, bf16_subnormal, bf16_near_max,"
    " e4m3_overflow, e4m3_underflow, e4m3_subnormal, e4m3_near_max,"
    " e5m2_overflow, e5m2_underflow, e5m2_subnormal, e5m2_near_max, exp_hist, hist_below, hist_above, rank)";

constexpr const char* kTensorRecipeTable =
    "tensor_recipes (tensor_id, kernel_id, operand, recipe, quantized, underflow, subnormal,"
    " saturated, blocks, blocks_lost, blocks_nonfinite, sse, signal, scale, amax, rank)";

constexpr const char* kUpdateFormats =
    "UPDATE tensors SET f16_overflow=?2, f16_underflow=?3, f16_subnormal=?4, f16_near_max=?5,"
    " bf16_overflow=?6, bf16_underflow=?7, bf16_subnormal=?8, bf16_near_max=?9,"
    " e4m3_overflow=?10, e4m3_underflow=?11, e4m3_subnormal=?12, e4m3_near_max=?13,"
    " e5m2_overflow=?14, e5m2_underflow=?15, e5m2_subnormal=?16, e5m2_near_max=?17 WHERE id=?1";

// Writes the empty trace (fpscope/collector/trace_template.h: the schema, made at build time) to `path`,
// which must not exist. Returns "" or what went wrong; a file it could not finish is removed.
std::string write_empty_trace(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno == EEXIST ? path + " already exists" : "cannot create trace " + path + ": " + std::strerror(errno);
  int failure = ftruncate(fd, static_cast<off_t>(embedded::kEmptyTraceBytes)) == 0 ? 0 : errno;
  for (const embedded::ByteRun& run : embedded::kEmptyTraceRuns) {
    for (std::size_t done = 0; failure == 0 && done < run.length;) {
      const ssize_t n = pwrite(fd, run.bytes + done, run.length - done, static_cast<off_t>(run.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) failure = n < 0 ? errno : EIO;
      done += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
  }
  if (close(fd) != 0 && failure == 0) failure = errno;
  if (failure == 0) return "";
  unlink(path.c_str());
  return "cannot create trace " + path + ": " + std::strerror(failure);
}

// The connection's settings (TraceWriter::kLivePragmas), before the statements are prepared
// against it. The file says WAL in its header already; asking again keeps a file system without
// the shared memory WAL needs in its rollback journal, as SQLite decides. The checkpoints run in
// commits of the drain thread while the program runs.
sql::Database& configure_trace(sql::Database& db) {
  db.exec(TraceWriter::kLivePragmas);
  return db;
}

}  // namespace

TraceWriter::Impl::Impl(const std::string& path_in, std::string dump_folder_in)
    : db(path_in, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX),
      path(path_in),
      dump_folder(std::move(dump_folder_in)),
      insert_meta(configure_trace(db), "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"),
      insert_string(db, "INSERT OR REPLACE INTO strings (id, value) VALUES (?, ?)"),
      kernel_rows(db,
                  "kernels (id, start_ns, end_ns, name_id, layer_id, phase_id, step, thread, device,"
                  " status, sampled, rank)",
                  12),
      range_rows(db, "nvtx_ranges (id, start_ns, end_ns, thread, depth, kind, name_id, domain_id, step, rank)",
                 10),
      memory_rows(db, "memory_events (id, t_ns, kind, alloc_id, bytes, category, name_id, device, step, rank)",
                  10),
      insert_tensor(db, insert_sql("INSERT INTO", kTensorTable, kTensorColumns, 1)),
      insert_tensor_batch(db, insert_sql("INSERT OR FAIL INTO", kTensorTable, kTensorColumns, kTensorsPerInsert)),
      insert_tensor_batch_undone_whole(db, insert_sql("INSERT INTO", kTensorTable, kTensorColumns, kTensorsPerInsert)),
      update_tensor_formats(db, kUpdateFormats),
      update_tensor_histogram(db, "UPDATE tensors SET exp_hist = ?2, hist_below = ?3, hist_above = ?4 WHERE id = ?1"),
      insert_nonfinite(db,
                       "INSERT INTO nonfinite (tensor_id, kernel_id, kind, first_index, first_bits, origin, allowed,"
                       " rank) VALUES (?,?,?,?,?,?,?,?)"),
      relabel_memory(db, "UPDATE memory_events SET category = ?2, name_id = ?3 WHERE id = ?1"),
      insert_loss_scale(db,
                        "INSERT INTO loss_scale (kernel_id, t_ns, step, scale_before, scale_after, found_inf,"
                        " skipped, event, growth_tracker, rank) VALUES (?,?,?,?,?,?,?,?,?,?)"),
      insert_scalar(db, "INSERT INTO scalars (t_ns, step, name_id, value, rank) VALUES (?,?,?,?,?)"),
      insert_dump(db, "INSERT INTO dumps (tensor_id, path) VALUES (?,?)"),
      insert_tensor_recipes(db, insert_sql("INSERT INTO", kTensorRecipeTable, kTensorRecipeColumns, contract::kRecipeCount)),
      insert_tensor_store(db,
                          "INSERT INTO tensor_stores (tensor_id, results, flushed, subnormal, overflowed, rank)"
                          " VALUES (?,?,?,?,?,?)"),
      insert_param_update(db,
                          "INSERT INTO param_updates (kernel_id, name_id, alloc_id, dtype, elements, changed, nonzero,"
                          " lost, computed_abs_sum, computed_sq_sum, applied_abs_sum, applied_sq_sum, weight_sq_sum,"
                          " rank, step, nonzero_from) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
      insert_cuda_kernel(db,
                         "INSERT INTO cuda_kernels (start_ns, end_ns, name_id, correlation_id, device, stream,"
                         " grid_x, grid_y, grid_z, block_x, block_y, block_z, rank)"
                         " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"),
      insert_cuda_memcpy(db,
                         "INSERT INTO cuda_memcpy (start_ns, end_ns, bytes, kind, src_kind, dst_kind,"
                         " correlation_id, device, stream, rank) VALUES (?,?,?,?,?,?,?,?,?,?)"),
      insert_cuda_memset(db,
                         "INSERT INTO cuda_memset (start_ns, end_ns, bytes, value, correlation_id, device,"
                         " stream, rank) VALUES (?,?,?,?,?,?,?,?)"),
      insert_cuda_memory(db,
                         "INSERT INTO cuda_memory (t_ns, kind, bytes, address, memory_kind, device, stream, rank)"
                         " VALUES (?,?,?,?,?,?,?,?)"),
      insert_process(db,
                     "INSERT OR REPLACE INTO processes (id, rank, local_rank, world_size, pid, host, rank_source, exe,"
                     " injector_options, realtime_ns, monotonic_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?)"),
      end_process(db, "UPDATE processes SET ended = ?2, exit_ns = ?3 WHERE id = ?1") {
  select_source(0);
  begin_if_needed();
  insert_string.bind(1, kEmptyStringId);
  insert_string.bind(2, std::string_view());
  insert_string.run();
}

// [SECTION] Batching --------------------------------------------------------------------------------

void TraceWriter::Impl::begin_if_needed() {
  if (in_transaction_ || failed()) return;
  // Near a full disk, small batches: a batch that does not fit is lost whole (a look a batch).
  struct statvfs fs {};
  low_space_ = statvfs(path.c_str(), &fs) == 0 &&
               static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize) < kLowSpaceBytes;
  db.exec("BEGIN");
  in_transaction_ = true;
  rows_in_batch_ = 0;
  batch_started_ = std::chrono::steady_clock::now();
}

void TraceWriter::Impl::maybe_commit() {
  if (rows_in_batch_ >= (low_space_ ? kLowSpaceBatchRows : kBatchRows)) {
    commit();
    return;
  }
  // Reading the clock for every record would cost more than the check is worth.
  if (++records_since_clock_ < 256) return;
  records_since_clock_ = 0;
  if (std::chrono::steady_clock::now() - batch_started_ >= kBatchInterval) commit();
}

// A row SQLite refuses (a second launch with one number) is a record that could not be written:
// counted as such and not in its table, and the rollups can no longer be sure of the tables.
void TraceWriter::Impl::flush_batch(RowBatch& batch, uint64_t& count) {
  rows_in_batch_ += static_cast<uint64_t>(batch.flush(
      [&](int) {
        ++counts.malformed_records;
        --count;
        give_up_rollups("a record that could not be written");
      },
      near_full()));
}

void TraceWriter::Impl::flush_rows() {
  flush_batch(kernel_rows, counts.kernels);
  flush_batch(range_rows, counts.nvtx_ranges);
  flush_batch(memory_rows, counts.memory_events);
  flush_all_tensors();
}

bool TraceWriter::Impl::commit() {
  if (failed()) return false;
  try {
    flush_rows();
    if (in_transaction_) {
      in_transaction_ = false;
      db.exec("COMMIT");
    }
    return true;
  } catch (const sql::Error& e) {
    storage_failed(e);
    return false;
  }
}

bool TraceWriter::Impl::commit_if_due() {
  if (!in_transaction_ || std::chrono::steady_clock::now() - batch_started_ < kBatchInterval) return !failed();
  return commit();
}

void TraceWriter::Impl::storage_failed(const sql::Error& e) {
  if (error.empty()) error = e.what();
  if ((e.code() & 0xff) == SQLITE_FULL && !full.happened) return disk_filled();
  if (in_transaction_) {
    in_transaction_ = false;
    try {
      db.exec("ROLLBACK");
    } catch (const sql::Error&) {
      // SQLite may have rolled back on its own already (SQLITE_FULL does).
    }
  }
}

// The disk or the size limit filled. The batch being written is committed in the room the first
// part of the reserve makes (what SQLite kept of it: a failed statement is rolled back, a failed
// COMMIT leaves the transaction open), or rolled back when that does not fit either.
void TraceWriter::Impl::disk_filled() {
  full.happened = true;
  in_transaction_ = false;
  // The size limit, unless the disk itself has less room left than the reserve.
  struct statvfs fs {};
  const bool disk_has_room = statvfs(path.c_str(), &fs) == 0 &&
                             static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize) > TraceWriter::kReserveBytes;
  full.size_limit = max_pages.has_value() && disk_has_room;
  if (!reserve_path.empty() && truncate(reserve_path.c_str(), TraceWriter::kEndReserveBytes) != 0) release_reserve();
  try {
    if (max_pages) {
      const int64_t room = TraceWriter::kReserveBytes / db.query_int("PRAGMA page_size").value_or(4096);
      db.exec("PRAGMA max_page_count = " + std::to_string(*max_pages + room));
    }
  } catch (const sql::Error&) {
  }
  // The launches, ranges and memory events gathered for a batch came before the record that
  // failed: written first, in that room, so that the trace keeps a prefix of the run. Not when
  // SQLite rolled the transaction back on its own: they would land without the rows before them.
  const bool transaction_open = !sqlite3_get_autocommit(db.handle());
  if (transaction_open) {
    try {
      flush_batch(kernel_rows, counts.kernels);
      flush_batch(range_rows, counts.nvtx_ranges);
      flush_batch(memory_rows, counts.memory_events);
    } catch (const sql::Error&) {
      // They did not fit either: counted below with the rest.
    }
  }
  // The rows of the batch, and the tensors and rows still waiting to be written, when they are lost too.
  const uint64_t pending = static_cast<uint64_t>(ready_count + kernel_rows.pending() + range_rows.pending() +
                                                 memory_rows.pending());
  const uint64_t waiting = rows_in_batch_ + pending;
  if (!transaction_open) {
    full.rows_rolled_back = waiting;  // SQLite rolled the batch back on its own
  } else if (sqlite3_exec(db.handle(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    full.rows_rolled_back = waiting;
  } else {
    full.rows_rolled_back = pending;
  }
  try {
    full.step = db.query_int("SELECT max(step) FROM kernels");
  } catch (const sql::Error&) {
    // What cannot be read now is left out of the end's meta.
  }
}

void TraceWriter::Impl::release_reserve() {
  if (reserve_path.empty()) return;
  unlink(reserve_path.c_str());
  reserve_path.clear();
}

bool TraceWriter::Impl::failed() const { return !error.empty(); }

void TraceWriter::Impl::set_meta(const std::string& key, const std::string& value) {
  if (failed() && !full.happened) return;  // a full disk still takes the run's end
  try {
    begin_if_needed();
    insert_meta.bind(1, key);
    insert_meta.bind(2, value);
    insert_meta.run();
  } catch (const sql::Error& e) {
    storage_failed(e);
  }
}

const std::string& TraceWriter::Impl::string_value(uint32_t id) const {
  static const std::string kNone;
  return id < src->strings.size() ? src->strings[id] : kNone;
}

// [SECTION] Finishing -------------------------------------------------------------------------------

// contract/collectives.h: a collective's non-finite output made "from finite inputs" on one rank
// was handed over when the same collective (the kernel's n-th launch on each rank) had a non-finite
// input on another rank.
void TraceWriter::Impl::resolve_collective_origins() {
  // Only an origin of one rank can be another rank's: with one rank, or no origin, there is nothing
  // to resolve, and no need to read every kernel.
  std::optional<int32_t> first_rank;
  bool several_ranks = false;
  for (const auto& s : sources) {
    if (!s) continue;
    if (!first_rank) first_rank = s->rank;
    several_ranks = several_ranks || s->rank != *first_rank;
  }
  if (!several_ranks || !db.query_int("SELECT EXISTS (SELECT 1 FROM nonfinite WHERE origin = 1)").value_or(0)) return;
  std::string names;
  for (std::string_view k : contract::kCollectiveKernels) names += (names.empty() ? "'" : ",'") + std::string(k) + "'";
  db.exec(
      "WITH coll AS (SELECT k.id, k.rank, k.name_id, row_number() OVER (PARTITION BY k.rank, k.name_id ORDER BY k.id) AS nth"
      "  FROM kernels k JOIN strings s ON s.id = k.name_id WHERE s.value IN (" + names + ")),"
      " tainted AS (SELECT DISTINCT c.rank, c.name_id, c.nth FROM coll c JOIN tensors t ON t.kernel_id = c.id"
      "  WHERE t.role = 'in' AND t.nan + t.pos_inf + t.neg_inf > 0)"
      " UPDATE nonfinite SET origin = 0 WHERE origin = 1 AND kernel_id IN ("
      "  SELECT c.id FROM coll c JOIN tainted x ON x.name_id = c.name_id AND x.nth = c.nth AND x.rank != c.rank)");
}

// A String record lost in a drop must not make kernels vanish from the joins of the views.
void TraceWriter::Impl::add_missing_strings() {
  // Every id a row can refer to is the empty string's, one with its text, or one of these: when
  // none is left, there is no need to read every table.
  if (awaiting_text.empty()) return;
  static const char* const kReferences[][2] = {
      {"kernels", "name_id"},   {"kernels", "layer_id"},       {"kernels", "phase_id"},
      {"tensors", "name_id"},   {"nvtx_ranges", "name_id"},    {"nvtx_ranges", "domain_id"},
      {"scalars", "name_id"},   {"memory_events", "name_id"},  {"param_updates", "name_id"}};
  for (const auto& ref : kReferences) {
    db.exec(std::string("INSERT OR IGNORE INTO strings (id, value) SELECT DISTINCT ") + ref[1] +
            ", '<missing string ' || " + ref[1] + " || '>' FROM " + ref[0] + " WHERE " + ref[1] +
            " IS NOT NULL AND " + ref[1] + " NOT IN (SELECT id FROM strings)");
  }
}

void TraceWriter::Impl::write_counts() {
  const std::pair<const char*, uint64_t> values[] = {
      {"records", counts.records},
      {"kernels", counts.kernels},
      {"tensors", counts.tensors},
      {"events", counts.events()},
      {"nonfinite", counts.nonfinite},
      {"tensor_recipes", counts.tensor_recipes},
      {"tensor_stores", counts.tensor_stores},
      {"param_updates", counts.param_updates},
      {"unknown_records", counts.unknown_records},
      {"malformed_records", counts.malformed_records},
      {"unmatched_events", counts.unmatched_events},
      {"cuda_activity", counts.cuda_activity},
      {"idle_processes", counts.idle_processes},
  };
  for (const auto& [key, value] : values) set_meta(key, std::to_string(value));
  if (traced_rings) set_meta("traced_processes", std::to_string(*traced_rings - counts.idle_processes));
}

// Everything finish() does but closing the file: once the records are in, so more than once if
// records arrive after a first time (each step replaces what it made before). Meta
// finished_during_exit says whether the trace was completed while the program was being torn down.
bool TraceWriter::Impl::complete(TraceWriter::Summaries summaries, bool during_exit) {
  begin_if_needed();
  set_meta("finished_during_exit", during_exit ? "1" : "0");
  close_open_ranges();
  flush_rows();
  finish_processes();
  resolve_collective_origins();
  add_missing_strings();
  write_counts();
  if (!commit()) return false;
  // From here on the writes go to the operating system without waiting for the disk: the
  // program's records are committed, and waiting for the summaries and the final checkpoint to
  // reach the platter cost 30 to 100 ms per run here. A killed collector still leaves a sound
  // trace (SQLite's WAL guarantees that without syncs); only a power failure in the seconds
  // after the run could lose the summaries or corrupt the file.
  db.exec("PRAGMA synchronous=OFF");
  if (summaries == TraceWriter::Summaries::Write) run_finalize_script();
  return !failed();
}

bool TraceWriter::Impl::prepare_finish(TraceWriter::Summaries summaries) {
  if (failed()) return false;
  try {
    if (!complete(summaries, true)) return false;
    completed_at_records = counts.records;
    return true;
  } catch (const sql::Error& e) {
    storage_failed(e);
    return false;
  }
}

// The end of a trace whose disk or size limit filled: the meta already set (how the program
// ended), why the trace is incomplete and from where, in the room the reserve made; no summaries
// (the analyzer makes them from what the trace holds). False: the trace is not complete.
bool TraceWriter::Impl::finish_full() {
  release_reserve();
  set_meta("trace_incomplete", full.size_limit ? "size_limit" : "disk_full");
  if (full.step) set_meta("incomplete_at_step", std::to_string(*full.step));
  set_meta("records_not_stored", std::to_string(counts.lost_to_storage));
  set_meta("rows_rolled_back", std::to_string(full.rows_rolled_back));
  try {
    if (in_transaction_) {
      in_transaction_ = false;
      db.exec("COMMIT");
    }
    db.exec("PRAGMA journal_mode=DELETE");
  } catch (const sql::Error&) {
    // Nothing more fits: the trace keeps what was committed.
  }
  return false;
}

bool TraceWriter::Impl::finish(TraceWriter::Summaries summaries) {
  if (full.happened) return finish_full();
  if (failed()) return false;
  try {
    // Completed already, unless records arrived since prepare_finish() (or it was not called).
    if (completed_at_records != counts.records && !complete(summaries, false)) return false;
    // With the meta set since, and the CPU time this process has spent on the trace, the
    // summaries included.
    begin_if_needed();
    if (const auto cpu = process_cpu_ms(); cpu && cpu_at_create)
      set_meta("collector_cpu_ms", fmt_ms(std::max(0.0, *cpu - *cpu_at_create)));
    if (!commit()) return false;
    // A finished trace needs no -wal/-shm beside it: readers on read-only media can open it.
    db.exec("PRAGMA journal_mode=DELETE");
    release_reserve();
    return true;
  } catch (const sql::Error& e) {
    storage_failed(e);
    return false;
  }
}

// [SECTION] Public interface ------------------------------------------------------------------------

namespace {

// Holds kReserveBytes of disk in `path` (replacing a file left by a writer that was killed), so
// that a full disk still has room for the run's end once it is removed. The blocks are allocated
// without being written where the file system can (fallocate), else written with zeros. "" when
// the room cannot be had: the trace is written all the same, with less hope for its end on a full
// disk.
std::string hold_back_space(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  int64_t held = 0;
  if (fallocate(fd, 0, 0, TraceWriter::kReserveBytes) == 0) {
    held = TraceWriter::kReserveBytes;
  } else if (errno == EOPNOTSUPP || errno == ENOSYS) {
    static const std::vector<char> zeros(64 * 1024, 0);
    while (held < TraceWriter::kReserveBytes) {
      const ssize_t n = write(fd, zeros.data(), zeros.size());
      if (n <= 0) break;
      held += n;
    }
  }
  close(fd);
  if (held < TraceWriter::kReserveBytes) {
    unlink(path.c_str());
    return "";
  }
  return path;
}

}  // namespace

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const std::string& dump_folder,
                                                 std::string* error) {
  // SQLite's memory statistics take a global mutex on every allocation; the writer needs none.
  // Only possible before SQLite initializes; if this process opened a database already, it is not.
  static const bool configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)configured;
  const std::optional<double> cpu_at_create = process_cpu_ms();
  if (std::string failure = write_empty_trace(path); !failure.empty()) {
    *error = std::move(failure);
    return nullptr;
  }
  try {
    std::unique_ptr<TraceWriter> writer(new TraceWriter(std::make_unique<Impl>(path, dump_folder)));
    writer->impl_->cpu_at_create = cpu_at_create;
    writer->impl_->reserve_path = hold_back_space(path + "-reserve");
    writer->set_meta("schema_version", std::to_string(embedded::kTraceSchemaVersion));
    return writer;
  } catch (const sql::Error& e) {
    *error = "cannot create trace " + path + ": " + e.what();
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
    return nullptr;
  }
}

TraceWriter::TraceWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceWriter::~TraceWriter() {
  if (impl_) impl_->release_reserve();
}

void TraceWriter::on_record(const wire::RecordHeader* record, uint32_t source) {
  Impl& w = *impl_;
  ++w.counts.records;
  if (w.failed()) {
    ++w.counts.lost_to_storage;
    return;
  }
  try {
    w.begin_if_needed();
    w.select_source(source);
    w.dispatch(record);
    w.maybe_commit();
  } catch (const sql::Error& e) {
    if (e.is_storage_failure()) {
      w.storage_failed(e);
      ++w.counts.lost_to_storage;
    } else {
      ++w.counts.malformed_records;  // e.g. a duplicate id: the record contradicts an earlier one
      // Part of what it wrote may be in the tables: a rollup can no longer be sure of them.
      w.give_up_rollups("a record that could not be written");
    }
  }
}

void TraceWriter::limit_size(int64_t bytes) {
  Impl& w = *impl_;
  const int64_t page = w.db.query_int("PRAGMA page_size").value_or(4096);
  w.max_pages = std::max<int64_t>(1, bytes / page);
  w.db.exec("PRAGMA max_page_count = " + std::to_string(*w.max_pages));
}

std::string TraceWriter::incomplete() const {
  const Impl& w = *impl_;
  if (!w.full.happened) return w.failed() ? "writing it failed: " + w.error : "";
  const std::string where = w.full.step ? " at step " + std::to_string(*w.full.step) : "";
  return (w.full.size_limit ? "the trace reached its size limit (--max-size)" : std::string("the disk filled")) + where;
}

std::pair<uint64_t, uint64_t> TraceWriter::stored_kernels_and_tensors() const {
  try {
    const auto kernels = impl_->db.query_int("SELECT count(*) FROM kernels");
    const auto tensors = impl_->db.query_int("SELECT count(*) FROM tensors");
    return {static_cast<uint64_t>(kernels.value_or(0)), static_cast<uint64_t>(tensors.value_or(0))};
  } catch (const sql::Error&) {
    return {0, 0};
  }
}

NonfiniteOutcome TraceWriter::nonfinite_outcome() const {
  NonfiniteOutcome outcome;
  if (impl_->failed() && !impl_->full.happened) return outcome;  // a full trace's rows can be read
  try {
    // One nonfinite row per output tensor holding NaN/Inf: a join on the few such rows.
    sql::Statement values(impl_->db,
                          "SELECT count(*), coalesce(sum(t.nan + t.pos_inf + t.neg_inf), 0) FROM nonfinite n "
                          "JOIN tensors t ON t.id = n.tensor_id WHERE n.allowed = 0");
    if (values.step()) {
      outcome.tensors = static_cast<uint64_t>(values.i64(0));
      outcome.values = static_cast<uint64_t>(values.i64(1));
    }
    sql::Statement first(impl_->db, "SELECT kernel, layer, phase, step, value FROM v_first_nonfinite");
    if (first.step()) {
      std::string where;
      if (!first.is_null(1)) where += "layer " + first.text(1);
      if (!first.is_null(2)) where += (where.empty() ? "" : ", ") + std::string("phase ") + first.text(2);
      if (!first.is_null(3)) where += (where.empty() ? "" : ", ") + std::string("step ") + std::to_string(first.i64(3));
      outcome.first_origin = first.text(0) + (where.empty() ? "" : " (" + where + ")") + " made " + first.text(4);
    }
  } catch (const sql::Error&) {
    return NonfiniteOutcome{};
  }
  return outcome;
}

void TraceWriter::set_meta(const std::string& key, const std::string& value) { impl_->set_meta(key, value); }
void TraceWriter::set_traced_processes(uint64_t rings) {
  impl_->traced_rings = rings;
  impl_->set_meta("traced_processes", std::to_string(rings - impl_->counts.idle_processes));
}
bool TraceWriter::commit() { return impl_->commit(); }
bool TraceWriter::commit_if_due() { return impl_->commit_if_due(); }
bool TraceWriter::uncommitted() const { return impl_->uncommitted(); }
bool TraceWriter::prepare_finish(Summaries summaries) { return impl_->prepare_finish(summaries); }
bool TraceWriter::finish(Summaries summaries) { return impl_->finish(summaries); }
bool TraceWriter::said_exit(uint32_t source) const {
  const auto& sources = impl_->sources;
  return source < sources.size() && sources[source] && sources[source]->exited;
}
const TraceCounts& TraceWriter::counts() const { return impl_->counts; }
const TrapInfo& TraceWriter::trap() const { return impl_->trap; }
const std::string& TraceWriter::error() const { return impl_->error; }
const std::string& TraceWriter::string_value(uint32_t id) const { return impl_->string_value(id); }

}  // namespace fpscope
