// The trace writer: turns wire records drained from the ring into rows of an fpscope trace
// (SQLite, schema in contract/schema/trace_schema.sql, documented in docs/schema.md).
//
// One switch, generated from the wire's record list, dispatches each record to its handler. Rows go through prepared statements in
// batched transactions (a commit every ~250 ms or every kBatchRows rows), in WAL mode, so a trace
// can be read while it is written. A tensor's TensorStats, TensorFormats, TensorHistogram and
// Nonfinite records become one `tensors` row (plus a `nonfinite` row). When the storage fails (disk
// full), the open batch is rolled back, the writer stops writing, keeps counting what it could not
// store, and says why in error().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fpscope/contract/wire.h"

namespace fpscope {

// What the trace holds so far (rows written or queued in the open batch).
struct TraceCounts {
  uint64_t records = 0;        // wire records received (Pad excluded)
  uint64_t kernels = 0;
  uint64_t tensors = 0;
  uint64_t nonfinite = 0;
  uint64_t nvtx_ranges = 0;
  uint64_t memory_events = 0;
  uint64_t loss_scale = 0;
  uint64_t scalars = 0;
  uint64_t dumps = 0;
  uint64_t tensor_recipes = 0;    // rows of tensor_recipes (one per forecast tensor and recipe)
  uint64_t tensor_stores = 0;     // rows of tensor_stores (outputs a kernel's narrowing store counted)
  uint64_t param_updates = 0;     // rows of param_updates (one per optimizer step and parameter)
  uint64_t strings = 0;
  uint64_t cuda_activity = 0;     // rows of cuda_kernels, cuda_memcpy, cuda_memset, cuda_memory
  uint64_t unknown_records = 0;   // record types this collector does not know
  uint64_t malformed_records = 0; // records whose contents were impossible (skipped)
  uint64_t unmatched_events = 0;  // NvtxPop without a push, Free of an unknown allocation, ...
  uint64_t lost_to_storage = 0;   // records received after the storage failed
  // Processes that exited having traced nothing (no launch, range, allocation, scalar) while
  // others did: launchers such as torchrun's agent, left out of `processes`.
  uint64_t idle_processes = 0;
  // Rows of the event tables: nvtx_ranges, memory_events, loss_scale and scalars.
  uint64_t events() const { return nvtx_ranges + memory_events + loss_scale + scalars; }
};

// What the trace holds of NaN/Inf that no allow rule covers: their values over output tensors, those
// tensors, and the first that a launch made from finite inputs (v_first_nonfinite), in words.
struct NonfiniteOutcome {
  uint64_t values = 0, tensors = 0;
  std::string first_origin;  // "exp (layer blocks.1, phase forward, step 5) made +inf"; "" if none measured
};

// What a Trap record said.
struct TrapInfo {
  bool seen = false;
  uint64_t kernel_id = 0;
  int64_t t_ns = 0;
  std::string message;
};

class TraceWriter {
 public:
  static constexpr uint64_t kBatchRows = 50000;
  // Each commit writes again the last, partly filled page (32 KiB) of every table and index it
  // added rows to. With a commit every 50 ms the collector took 6 to 8% more CPU time than now;
  // live readers gain little from seeing rows sooner (the GUI looks every 2 s).
  static constexpr auto kBatchInterval = std::chrono::milliseconds(250);
  // The connection's settings while the program runs: WAL, so that the trace can be read live and
  // a killed collector leaves it sound; the WAL copied into the file each time it passes 64 pages
  // (2 MiB), so that little is left to copy at the end, while the user waits.
  static constexpr const char* kLivePragmas =
      "PRAGMA synchronous=NORMAL; PRAGMA journal_mode=WAL; PRAGMA temp_store=MEMORY;"
      " PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=64;";

  // Creates a new trace at `path` (the file must not exist) and runs the schema on it.
  // `dump_folder` is the folder of --dump's .npy files relative to the trace's folder
  // ("run.sqlite.dumps"); Dump records' paths are taken relative to it. nullptr + *error on failure.
  static std::unique_ptr<TraceWriter> create(const std::string& path, const std::string& dump_folder,
                                             std::string* error);

  // When the disk fills (SQLite's SQLITE_FULL), later records are counted and discarded, and what
  // was written before is kept: space held back in a file beside the trace (<trace>-reserve,
  // kReserveBytes) is given back in two parts, the first to commit the batch being written (rolled
  // back if it still does not fit), the last kEndReserveBytes for the run's end: its meta (how the
  // program ended, trace_incomplete, incomplete_at_step, records_not_stored). The file is removed
  // when the trace is finished. A size limit (limit_size) fills the same way.
  static constexpr int64_t kReserveBytes = 1024 * 1024;
  static constexpr int64_t kEndReserveBytes = 256 * 1024;
  // Stops the trace from growing past `bytes` (PRAGMA max_page_count): fpscope run --max-size.
  void limit_size(int64_t bytes);
  // "" while the trace holds every record; otherwise why it does not, and from where: "the disk
  // filled at step 12", "the trace reached its size limit (--max-size) at step 12".
  std::string incomplete() const;
  // Kernels and tensors the file holds, counted in it (counts() has what was received).
  std::pair<uint64_t, uint64_t> stored_kernels_and_tensors() const;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stores one record (valid only during the call) of the process writing ring `source` (0 the
  // first ring, k its sibling k). Commits when a batch is due.
  void on_record(const wire::RecordHeader* record, uint32_t source = 0);

  // Sets a meta key (in the current batch).
  void set_meta(const std::string& key, const std::string& value);
  // How many processes wrote a ring: meta traced_processes is that less the idle ones left out
  // (TraceCounts::idle_processes), written when the trace is completed.
  void set_traced_processes(uint64_t rings);

  // Commits the open batch now. False once the storage has failed.
  bool commit();

  // Commits the open batch if it is older than kBatchInterval: for a collector that has nothing to
  // read right now, so that live readers see what arrived without a commit per trickling record.
  bool commit_if_due();
  // Whether records stored since the last commit wait for one (commit_if_due() will make it).
  bool uncommitted() const;

  // Completes the trace: pending tensors, ranges still open (end_ns NULL), strings referenced but
  // never received, counts in meta, then trace_finalize.sql when the build has one. Call once,
  // after the last record and meta. False if anything failed (error() says what).
  // Summaries::Skip leaves the summary tables out, the shape of a trace whose finalize step was cut
  // off (readers build them themselves): for tests and benchmarks of that path.
  enum class Summaries { Write, Skip };
  bool finish(Summaries summaries = Summaries::Write);

  // Does finish()'s work but closing the file ahead of time: for a collector that knows every
  // traced process has written its last record (said_exit) while they are still being torn down.
  // finish() then only commits the meta set since, unless records arrived after this call; then
  // it completes the trace again, from the start. False if anything failed.
  bool prepare_finish(Summaries summaries = Summaries::Write);

  // Whether the process writing ring `source` has said it exits (its last record, ProcessExit).
  bool said_exit(uint32_t source) const;

  const TraceCounts& counts() const;
  const TrapInfo& trap() const;
  // Read from the trace as written so far (after finish(), the whole run); nothing when it cannot
  // be read.
  NonfiniteOutcome nonfinite_outcome() const;
  // Empty while everything was stored; otherwise the first failure.
  const std::string& error() const;
  bool failed() const { return !error().empty(); }

  // The interned string for a wire id, or "" if none was received.
  const std::string& string_value(uint32_t id) const;

  class Impl;

 private:
  explicit TraceWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fpscope
