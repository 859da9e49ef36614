// The trace writer's state, shared by its two source files: trace_writer.cpp (opening, batching,
// dispatch, finishing) and trace_records.cpp (one handler per record type). Private to the collector.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fpscope/trace_writer.h"
#include "fpscope/sqlite.h"

namespace fpscope {

// Strings the collector itself needs live above every wire id (wire ids are 32-bit).
inline constexpr int64_t kEmptyStringId = int64_t{1} << 32;

// A tensor whose TensorStats arrived and whose other records may still follow.
struct PendingTensor {
  bool active = false;
  int64_t row_id = 0;
  wire::TensorStatsRecord stats{};
  bool has_formats = false;
  wire::FormatCounts formats[wire::kFormatCount]{};
  bool has_histogram = false;
  std::string histogram;  // JSON object text; its buffer is reused from tensor to tensor
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
  uint32_t name_id;
  uint32_t domain_id;
  std::optional<int64_t> step;
};

// Per producer thread: its tensor in assembly and its open NVTX ranges.
struct ThreadState {
  PendingTensor tensor;
  std::vector<OpenRange> ranges;
};

struct Allocation {
  uint64_t bytes;
  uint32_t name_id;
  uint8_t category;
  uint8_t device;
  int64_t row = 0;  // its alloc row in memory_events
};

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
  void handle(const wire::LossScaleRecord& r);
  void handle(const wire::ScalarRecord& r);
  void handle(const wire::TextRecord& r);
  void handle(const wire::DumpRecord& r);
  void handle(const wire::TrapRecord& r);
  void handle(const wire::CudaKernelRecord& r);
  void handle(const wire::CudaMemcpyRecord& r);
  void handle(const wire::CudaMemsetRecord& r);
  void handle(const wire::CudaMemoryRecord& r);

  void flush_tensor(PendingTensor& t);  // to the ready batch
  void flush_all_tensors();             // every tensor in assembly, then the ready batch
  void insert_ready_tensors();          // the ready batch into `tensors`
  void bind_tensor(sql::Statement& st, int first, const PendingTensor& t);
  void insert_range(const OpenRange& r, std::optional<int64_t> end_ns, uint32_t thread);
  void close_open_ranges();
  std::optional<int64_t> current_step(uint32_t thread) const;
  ThreadState& thread_state(uint32_t thread);
  std::optional<int64_t> tensor_row(uint64_t seq, uint8_t role_slot) const;

  // [batching] (trace_writer.cpp)
  void begin_if_needed();
  void row_written() { ++rows_in_batch_; }
  void maybe_commit();
  bool commit();
  bool commit_if_due();
  void storage_failed(const std::string& what);
  bool failed() const;
  void set_meta(const std::string& key, const std::string& value);
  bool finish(TraceWriter::Summaries summaries);
  void add_missing_strings();
  void write_counts();
  void run_finalize_script();

  const std::string& string_value(uint32_t id) const;

  sql::Database db;
  std::string dump_folder;
  TraceCounts counts;
  TrapInfo trap;
  std::string error;

  sql::Statement insert_meta;
  sql::Statement insert_string;
  sql::Statement insert_kernel;
  // Finished tensors are inserted kTensorsPerInsert at a time: one statement per row costs more
  // than the row itself for a table this wide.
  static constexpr int kTensorsPerInsert = 16;
  static constexpr int kTensorColumns = 37;
  sql::Statement insert_tensor;
  sql::Statement insert_tensor_batch;
  PendingTensor ready_tensors[kTensorsPerInsert];
  int ready_count = 0;
  sql::Statement update_tensor_formats;
  sql::Statement update_tensor_histogram;
  sql::Statement insert_nonfinite;
  sql::Statement insert_range_row;
  sql::Statement insert_memory;
  sql::Statement relabel_memory;
  sql::Statement insert_loss_scale;
  sql::Statement insert_scalar;
  sql::Statement insert_dump;
  sql::Statement insert_cuda_kernel;
  sql::Statement insert_cuda_memcpy;
  sql::Statement insert_cuda_memset;
  sql::Statement insert_cuda_memory;

 private:
  bool in_transaction_ = false;
  uint64_t rows_in_batch_ = 0;
  uint32_t records_since_clock_ = 0;
  std::chrono::steady_clock::time_point batch_started_;

 public:
  std::vector<std::string> strings;      // by wire id
  uint32_t mptrain_domain_id = 0;        // the wire id of the string "mptrain", 0 until seen
  std::unordered_map<uint32_t, ThreadState> threads;
  uint32_t last_thread = 0;
  ThreadState* last_thread_state = nullptr;
  RecentTensors recent_tensors;
  std::unordered_map<uint64_t, Allocation> live_allocations;
  int64_t next_tensor_id = 1;
  int64_t next_range_id = 1;
};

}  // namespace fpscope
