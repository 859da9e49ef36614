// The trace writer's state, shared by its two source files: trace_writer.cpp (opening, batching,
// dispatch, finishing) and trace_records.cpp (one handler per record type). Private to the collector.
#pragma once

#include <array>
#include <type_traits>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fpscope/collector/trace_writer.h"
#include "fpscope/common/sqlite.h"
#include "memory_rollup.h"
#include "row_batch.h"
#include "run_rollup.h"
#include "tensor_rollup.h"

namespace fpscope {

// Strings the collector itself needs live above every wire id (wire ids are 32-bit).
inline constexpr int64_t kEmptyStringId = int64_t{1} << 32;

// A tensor whose TensorStats arrived and whose other records may still follow.
struct PendingTensor {
  bool active = false;
  int64_t row_id = 0;
  // The record's ids in the trace's terms (Source): bound when the row is written, by which time
  // records of another process may be in hand.
  int64_t kernel_id = 0;
  int64_t name_id = 0;
  int64_t uid = 0;  // 0: none
  int32_t rank = 0;
  wire::TensorStatsRecord stats{};
  bool has_formats = false;
  wire::FormatCounts formats[wire::kFormatCount]{};
  bool has_histogram = false;
  std::string histogram;  // JSON object text; its buffer is reused from tensor to tensor
  uint64_t hist_below = 0, hist_above = 0;  // fp64 values beyond the histogram's range
  bool intended = false;  // its Nonfinite record came: an allow rule covers its NaN/Inf
};

// The tensors written last, by (launch, role_slot): records that arrive after their tensor left
// assembly (Nonfinite, Dump, a late TensorFormats) find its row here. Direct-mapped: a newer
// tensor replaces an older one in its slot, which only ever forgets long-finished tensors.
class RecentTensors {
 public:
  void remember(uint64_t seq, uint8_t role_slot, int64_t row_id) {
    Entry& e = entries_[index(seq, role_slot)];
    e = {key(seq, role_slot), row_id};
  }
  std::optional<int64_t> find(uint64_t seq, uint8_t role_slot) const {
    const Entry& e = entries_[index(seq, role_slot)];
    if (e.row_id == 0 || e.key != key(seq, role_slot)) return std::nullopt;
    return e.row_id;
  }

 private:
  static constexpr std::size_t kSize = 4096;
  struct Entry {
    uint64_t key = 0;
    int64_t row_id = 0;
  };
  static uint64_t key(uint64_t seq, uint8_t role_slot) { return (seq << 8) | role_slot; }
  static std::size_t index(uint64_t seq, uint8_t role_slot) {
    return static_cast<std::size_t>(
        (seq * 8 + contract::slot_of(role_slot) * 2 + static_cast<unsigned>(contract::role_of(role_slot))) % kSize);
  }
  std::vector<Entry> entries_ = std::vector<Entry>(kSize);
};

enum class RangeKind : uint8_t { Range, Step, Phase, Layer };

struct OpenRange {
  int64_t row_id;
  int64_t start_ns;
  int32_t depth;
  RangeKind kind;
  int64_t name_id;     // trace string id
  uint32_t domain;     // the wire's domain string id: a pop closes a range of its domain
  int64_t domain_id;   // trace string id, 0 for the default domain
  std::optional<int64_t> step;
};

// Per producer thread: its tensor in assembly and its open NVTX ranges.
struct ThreadState {
  PendingTensor tensor;
  std::vector<OpenRange> ranges;
};

struct Allocation {
  uint64_t bytes;
  int64_t name_id;  // trace string id
  uint8_t category;
  uint8_t device;
  int64_t row = 0;  // its alloc row in memory_events
};

// One traced process, one ring. Its records number strings, launches, allocations and threads in
// its own terms; the writer maps them into the trace's: strings by their text (one id per text in
// the whole trace), launches and allocations by adding id_base (the ring's number << 40, so the
// first process keeps its own numbers), threads as they are (with the rank beside them).
struct Source {
  uint32_t index = 0;
  int64_t id_base = 0;
  int32_t rank = 0;
  bool announced = false;
  bool exited = false;
  bool active = false;  // sent a record of its own work (not only its start, configuration, exit)
  bool left_out = false;  // idle: its row was taken out of `processes` (leave_out_idle_processes)
  std::vector<int64_t> ranges_while_idle;  // nvtx_ranges rows it closed before any work
  std::vector<int64_t> string_ids;   // wire id -> trace string id, 0 unknown
  std::vector<std::string> strings;  // wire id -> text
  uint32_t mptrain_domain = 0;       // the wire id of the string "mptrain", 0 until seen
  std::unordered_map<uint32_t, ThreadState> threads;
  uint32_t last_thread = 0;
  ThreadState* last_thread_state = nullptr;
  RecentTensors recent_tensors;
  std::unordered_map<uint64_t, Allocation> live_allocations;
};
inline constexpr int kSourceIdShift = 40;

class TraceWriter::Impl {
 public:
  Impl(const std::string& path, std::string dump_folder);

  // [records] one handler per record type (trace_records.cpp)
  void dispatch(const wire::RecordHeader* r);
  void handle(const wire::StringRecord& r);
  void handle(const wire::ProcessRecord& r);
  void handle(const wire::NvtxPushRecord& r);
  void handle(const wire::NvtxPopRecord& r);
  void handle(const wire::LaunchRecord& r);
  void handle(const wire::TensorStatsRecord& r);
  void handle(const wire::TensorFormatsRecord& r);
  void handle(const wire::TensorHistogramRecord& r);
  void handle(const wire::NonfiniteRecord& r);
  void handle(const wire::AllocRecord& r);
  void handle(const wire::FreeRecord& r);
  void handle(const wire::RelabelRecord& r);
  void handle(const wire::ProcessExitRecord& r);
  void handle(const wire::LossScaleRecord& r);
  void handle(const wire::ScalarRecord& r);
  void handle(const wire::TextRecord& r);
  void handle(const wire::DumpRecord& r);
  void handle(const wire::TensorRecipesRecord& r);
  void handle(const wire::TensorStoreRecord& r);
  void handle(const wire::ParamUpdateRecord& r);
  void handle(const wire::TrapRecord& r);
  void handle(const wire::CudaKernelRecord& r);
  void handle(const wire::CudaMemcpyRecord& r);
  void handle(const wire::CudaMemsetRecord& r);
  void handle(const wire::CudaMemoryRecord& r);

  void flush_rows();                    // every batch of rows and every tensor: into their tables
  void flush_batch(RowBatch& batch, uint64_t& count);  // `count`: the counter of the batch's table
  void flush_tensor(PendingTensor& t);  // to the ready batch
  void flush_all_tensors();             // every tensor in assembly, then the ready batch
  void insert_ready_tensors();          // the ready batch into `tensors`
  void bind_tensor(sql::Statement& st, int first, const PendingTensor& t);
  void insert_range(const OpenRange& r, std::optional<int64_t> end_ns, uint32_t thread, int32_t rank);
  void close_open_ranges();
  std::optional<int64_t> current_step(uint32_t thread) const;
  ThreadState& thread_state(uint32_t thread);
  std::optional<int64_t> tensor_row(uint64_t seq, uint8_t role_slot) const;

  // [sources] the process whose records are in hand, and its ids in the trace's terms
  void select_source(uint32_t index);
  int64_t sid(uint32_t wire_string);  // 0 -> the empty string; unknown ids get a placeholder id
  int64_t kernel_id(uint64_t seq) const { return src->id_base + static_cast<int64_t>(seq); }
  int64_t alloc_id(uint64_t id) const { return id ? src->id_base + static_cast<int64_t>(id) : 0; }

  // [batching] (trace_writer.cpp)
  void begin_if_needed();
  void row_written() { ++rows_in_batch_; }
  // Little room left on the disk, or a size limit: batches are written by statements that undo
  // only themselves when the room runs out (RowBatch::flush).
  bool near_full() const { return low_space_ || max_pages.has_value(); }
  void maybe_commit();
  bool commit();
  bool commit_if_due();
  bool uncommitted() const { return in_transaction_; }
  void storage_failed(const sql::Error& e);
  void disk_filled();
  void release_reserve();
  bool finish_full();  // finish() of a trace whose disk or size limit filled
  bool failed() const;
  void set_meta(const std::string& key, const std::string& value);
  bool complete(TraceWriter::Summaries summaries, bool during_exit);
  bool prepare_finish(TraceWriter::Summaries summaries);
  bool finish(TraceWriter::Summaries summaries);
  void add_missing_strings();
  void write_counts();
  void describe_first_process();  // trace_processes.cpp: meta from the first row of `processes`
  void run_finalize_script();  // trace_summaries.cpp, as the three below
  static std::string fmt_ms(double ms);  // "12.3": milliseconds, one decimal
  void run_summaries();  // the statements of trace_finalize.sql, in the transaction it runs
  const SummaryRollup* usable_rollup_of(const std::string& table) const;  // nullptr: run its statement
  void write_rollup_meta(const std::vector<std::pair<sql::CreateTableAs, const SummaryRollup*>>& kept,
                         const std::string& failure);

  const std::string& string_value(uint32_t id) const;  // of the source in hand
  void finish_processes();
  void leave_out_idle_processes();
  void resolve_collective_origins();

  sql::Database db;
  std::optional<uint64_t> traced_rings;  // set_traced_processes
  std::string path;
  std::string dump_folder;
  TraceCounts counts;
  TrapInfo trap;
  std::string error;
  // The disk (or the size limit) filled: the trace keeps what was committed before, and its end.
  struct Full {
    bool happened = false;
    bool size_limit = false;              // the limit of limit_size(), not the disk
    std::optional<int64_t> step;          // the last step the trace holds kernels of
    uint64_t rows_rolled_back = 0;        // rows of the batch being written that did not fit either
  } full;
  std::string reserve_path;               // "" once released, or when none could be made
  std::optional<int64_t> max_pages;       // limit_size()

  sql::Statement insert_meta;
  sql::Statement insert_string;
  // The narrow rows most records make, a batch at a time (row_batch.h): flush_rows() writes what
  // they hold before anything reads or changes their tables.
  RowBatch kernel_rows;
  RowBatch range_rows;
  RowBatch memory_rows;  // memory_events, their ids handed out here (next_memory_id)
  // Finished tensors are inserted kTensorsPerInsert at a time: one statement per row costs more
  // than the row itself for a table this wide.
  static constexpr int kTensorsPerInsert = 16;
  static constexpr int kTensorColumns = 40;
  sql::DeferredStatement insert_tensor;
  sql::DeferredStatement insert_tensor_batch;                // OR FAIL, as RowBatch (row_batch.h)
  sql::DeferredStatement insert_tensor_batch_undone_whole;   // near_full()
  PendingTensor ready_tensors[kTensorsPerInsert];
  int ready_count = 0;
  sql::DeferredStatement update_tensor_formats;
  sql::DeferredStatement update_tensor_histogram;
  sql::DeferredStatement insert_nonfinite;
  sql::DeferredStatement relabel_memory;
  sql::DeferredStatement insert_loss_scale;
  sql::DeferredStatement insert_scalar;
  sql::DeferredStatement insert_dump;
  static constexpr int kTensorRecipeColumns = 16;
  sql::DeferredStatement insert_tensor_recipes;  // every recipe's row of one tensor
  sql::DeferredStatement insert_tensor_store;
  sql::DeferredStatement insert_param_update;
  sql::DeferredStatement insert_cuda_kernel;
  sql::DeferredStatement insert_cuda_memcpy;
  sql::DeferredStatement insert_cuda_memset;
  sql::DeferredStatement insert_cuda_memory;
  sql::DeferredStatement insert_process;
  sql::DeferredStatement end_process;

 private:
  bool in_transaction_ = false;
  // Less than kLowSpaceBytes free on the trace's file system: batches of kLowSpaceBatchRows rows.
  static constexpr int64_t kLowSpaceBytes = 64 << 20;
  static constexpr uint64_t kLowSpaceBatchRows = 500;
  bool low_space_ = false;
  uint64_t rows_in_batch_ = 0;
  uint32_t records_since_clock_ = 0;
  std::chrono::steady_clock::time_point batch_started_;

 public:
  std::vector<std::unique_ptr<Source>> sources;  // by ring number
  Source* src = nullptr;                         // the source of the record in hand
  std::unordered_map<std::string, int64_t> string_by_text;
  // Summaries kept as the rows are written (summary_rollup.h).
  MemoryRollup memory_rollup;
  TensorRollup tensor_rollup;
  StepsRollup steps_rollup{tensor_rollup};
  RunRollup run_rollup{db, memory_rollup};
  template <typename Self>  // Impl or const Impl
  static auto rollups_of(Self& self) {
    using Rollup = std::conditional_t<std::is_const_v<Self>, const SummaryRollup*, SummaryRollup*>;
    return std::array<Rollup, 4>{&self.memory_rollup, &self.tensor_rollup, &self.steps_rollup, &self.run_rollup};
  }
  auto rollups() { return rollups_of(*this); }
  auto rollups() const { return rollups_of(*this); }
  // A record that could not be written (or only in part): no rollup can be sure of the tables.
  void give_up_rollups(const char* why) {
    for (SummaryRollup* rollup : rollups()) rollup->give_up(why);
  }
  int64_t next_string_id = 1;
  // Ids handed out for a string whose text has not arrived (add_missing_strings names those left).
  std::unordered_set<int64_t> awaiting_text;
  int64_t next_tensor_id = 1;
  int64_t next_range_id = 1;
  int64_t next_memory_id = 1;
  // counts.records when prepare_finish() completed the trace; none if it has not.
  std::optional<uint64_t> completed_at_records;
  // This process's CPU milliseconds when the trace was created (meta collector_cpu_ms counts from there).
  std::optional<double> cpu_at_create;
};

}  // namespace fpscope
