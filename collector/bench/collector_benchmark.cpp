// Throughput of the collector: wire records into SQLite through the trace writer (records/s on one
// core), the ring alone, and the ring feeding the writer as `fpscope run` does. The records are the
// ones a sampled launch produces: a Launch and, per tensor, TensorStats + TensorFormats +
// TensorHistogram (full statistics) or TensorStats only (basic). BM_SqliteRows stores the rows the
// writer made of the full-statistics stream again with nothing but SQLite's own statements: what
// SQLite alone costs for them, under the trace's settings and without a journal.
//   collector_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fpscope/collector/ring.h"
#include "fpscope/collector/trace_writer.h"
#include "row_batch.h"  // insert_sql(), the writer's own batch statements

namespace fpscope {
namespace {

struct alignas(64) Slot {
  unsigned char bytes[wire::kSlotBytes];
};

// A stream of records laid out back to back, as they sit in the ring.
struct RecordStream {
  std::vector<Slot> slots;
  std::size_t records = 0;

  void* append(uint16_t n) {
    slots.resize(slots.size() + n);
    ++records;
    return &slots[slots.size() - n];
  }
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t at = 0; at < slots.size();) {
      const auto* h = reinterpret_cast<const wire::RecordHeader*>(&slots[at]);
      fn(h);
      at += h->slots;
    }
  }
};

constexpr int kTensorsPerLaunch = 3;
constexpr int kHistogramBins = 30;

void add_string(RecordStream& s, uint32_t id, const char* text) {
  const std::size_t len = std::strlen(text);
  const uint16_t n = wire::slots_for(offsetof(wire::StringRecord, bytes), len);
  auto* r = static_cast<wire::StringRecord*>(s.append(n));
  r->h = {wire::RecordType::String, n, 1};
  r->id = id;
  r->length = static_cast<uint32_t>(len);
  std::memcpy(r->bytes, text, len);
}

void add_tensor(RecordStream& s, uint64_t seq, int slot, bool full) {
  auto* st = static_cast<wire::TensorStatsRecord*>(s.append(4));
  *st = {};
  st->h = {wire::RecordType::TensorStats, 4, 1};
  st->seq = seq;
  st->tensor_id = seq * 4 + static_cast<uint64_t>(slot);
  st->name = 3 + static_cast<uint32_t>(slot);
  st->role = slot == 0 ? wire::Role::Output : wire::Role::Input;
  st->slot = static_cast<uint8_t>(slot);
  st->ndim = 4;
  st->shape[0] = 64, st->shape[1] = 8, st->shape[2] = 26, st->shape[3] = 26;
  st->count = 64 * 8 * 26 * 26;
  st->zero = 1000 + seq % 7;
  st->min = -3.5, st->max = 4.25, st->absmax = 4.25, st->min_nonzero = 1e-7, st->mean = 0.01, st->rms = 0.9;
  if (!full) return;
  const uint8_t role_slot = contract::pack_role_slot(st->role, slot);
  auto* f = static_cast<wire::TensorFormatsRecord*>(s.append(3));
  *f = {};
  f->h = {wire::RecordType::TensorFormats, 3, 1};
  f->seq = seq;
  f->role_slot = role_slot;
  for (auto& c : f->formats) c = {seq % 3, seq % 5 + 10, 120, 4};
  const uint16_t n = wire::slots_for(sizeof(wire::TensorHistogramRecord), kHistogramBins * sizeof(wire::HistogramBin));
  auto* h = static_cast<wire::TensorHistogramRecord*>(s.append(n));
  std::memset(static_cast<void*>(h), 0, n * wire::kSlotBytes);
  h->h = {wire::RecordType::TensorHistogram, n, 1};
  h->seq = seq;
  h->role_slot = role_slot;
  h->bins = kHistogramBins;
  auto* bins = reinterpret_cast<wire::HistogramBin*>(h + 1);
  for (int b = 0; b < kHistogramBins; ++b) bins[b] = {-24 + b, 0, 1000u + static_cast<uint64_t>(b) * 37 + seq % 11};
}

RecordStream make_stream(uint64_t launches, bool full) {
  RecordStream s;
  add_string(s, 1, "conv2d_forward");
  add_string(s, 2, "conv1");
  for (uint32_t i = 0; i < kTensorsPerLaunch; ++i) add_string(s, 3 + i, "conv1.tensor");
  // Each launch before its tensors, as the injector writes them (the collector's tensor summaries
  // are kept only for tensors whose launch it has).
  for (uint64_t seq = 1; seq <= launches; ++seq) {
    auto* l = static_cast<wire::LaunchRecord*>(s.append(1));
    *l = {};
    l->h = {wire::RecordType::Launch, 1, 1};
    l->seq = seq;
    l->start_ns = static_cast<int64_t>(seq) * 1000;
    l->end_ns = l->start_ns + 700;
    l->kernel = 1;
    l->layer = 2;
    l->step = static_cast<int64_t>(seq / 100);
    l->n_inputs = kTensorsPerLaunch - 1;
    l->n_outputs = 1;
    l->sampled = 1;
    for (int t = 0; t < kTensorsPerLaunch; ++t) add_tensor(s, seq, t, full);
  }
  return s;
}

// CPU time of the calling thread: the collector's one core, whatever else the machine is doing.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void report_cpu_rate(benchmark::State& state, double records, double cpu_seconds) {
  state.counters["records_per_cpu_s"] = benchmark::Counter(records / cpu_seconds);
}

// A trace path in a folder of this process's own (mkdtemp), removed when the benchmark ends.
std::string scratch_trace() {
  static const struct Folder {
    std::string path;
    Folder() {
      std::string pattern = (std::filesystem::temp_directory_path() / "fpscope-bench-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) {
        std::fprintf(stderr, "collector_benchmark: cannot make a scratch folder in %s: %s\n",
                     std::filesystem::temp_directory_path().c_str(), std::strerror(errno));
        std::exit(2);
      }
      path = pattern;
    }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } folder;
  return folder.path + "/trace.sqlite";
}

void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
}

// A new trace at `path` (an earlier one there removed) and its writer; null, with the benchmark
// skipped and saying why, if it cannot be made.
std::unique_ptr<TraceWriter> new_trace(benchmark::State& state, const std::string& path) {
  remove_trace(path);
  std::string error;
  auto writer = TraceWriter::create(path, "", &error);
  if (!writer) state.SkipWithError(error.c_str());
  return writer;
}

// Records into SQLite through the writer, committed; trace creation and finishing not timed.
void BM_WriterIngest(benchmark::State& state) {
  const bool full = state.range(0) == 1;
  const RecordStream stream = make_stream(100000, full);
  const std::string path = scratch_trace();
  double cpu = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto writer = new_trace(state, path);
    if (!writer) break;
    state.ResumeTiming();
    const double cpu0 = thread_cpu_seconds();
    stream.for_each([&](const wire::RecordHeader* h) { writer->on_record(h); });
    writer->commit();
    cpu += thread_cpu_seconds() - cpu0;
    state.PauseTiming();
    writer.reset();
    state.ResumeTiming();
  }
  remove_trace(path);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * stream.records));
  report_cpu_rate(state, static_cast<double>(state.iterations() * stream.records), cpu);
  state.SetLabel(full ? "full stats: Launch + 3x(Stats+Formats+Histogram)" : "basic stats: Launch + 3x Stats");
}
BENCHMARK(BM_WriterIngest)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The rows of the kernels and tensors tables the writer made of the full-statistics stream, each
// value as SQLite holds it, in the order the writer stored them (a launch's row, then its tensors').
struct StoredRows {
  struct Table {
    std::string table_columns;  // "t (c1, ...)", as insert_sql() takes it
    int columns = 0;
    std::vector<sqlite3_value*> values;  // row after row
  };
  Table kernels, tensors;
  std::size_t records = 0;  // wire records they were made of
  ~StoredRows() {
    for (Table* t : {&kernels, &tensors})
      for (sqlite3_value* v : t->values) sqlite3_value_free(v);
  }
};

void read_table(sqlite3* db, const char* table, StoredRows::Table& out) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, (std::string("SELECT * FROM ") + table + " ORDER BY id").c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "collector_benchmark: %s\n", sqlite3_errmsg(db));
    std::exit(2);
  }
  out.columns = sqlite3_column_count(st);
  std::string names;
  for (int c = 0; c < out.columns; ++c) names += std::string(c ? ", " : "") + sqlite3_column_name(st, c);
  out.table_columns = std::string(table) + " (" + names + ")";
  while (sqlite3_step(st) == SQLITE_ROW)
    for (int c = 0; c < out.columns; ++c) out.values.push_back(sqlite3_value_dup(sqlite3_column_value(st, c)));
  sqlite3_finalize(st);
}

const StoredRows& stored_rows() {
  static const StoredRows rows = [] {
    StoredRows r;
    const RecordStream stream = make_stream(100000, true);
    r.records = stream.records;
    const std::string path = scratch_trace();
    remove_trace(path);
    std::string error;
    auto writer = TraceWriter::create(path, "", &error);
    if (!writer) {
      std::fprintf(stderr, "collector_benchmark: %s\n", error.c_str());
      std::exit(2);
    }
    stream.for_each([&](const wire::RecordHeader* h) { writer->on_record(h); });
    writer->commit();
    writer.reset();
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    read_table(db, "kernels", r.kernels);
    read_table(db, "tensors", r.tensors);
    sqlite3_close(db);
    remove_trace(path);
    return r;
  }();
  return rows;
}

void must(sqlite3* db, int rc) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "collector_benchmark: %s\n", sqlite3_errmsg(db));
    std::exit(2);
  }
}

// The rows of BM_WriterIngest's full-statistics case, stored again into a new trace (the writer's
// schema) by SQLite's own statements alone: INSERTs of 64 rows (insert_sql; the writer's batches
// of launches are as large, its tensor batches hold 16), a commit every kBatchRows rows.
// Against BM_WriterIngest/1 (same records_per_cpu_s unit): what the writer adds to SQLite's cost.
// 0: the trace's settings while the program runs (TraceWriter::kLivePragmas: WAL); 1: the same
// with synchronous=OFF (no fsync at the checkpoints); 2: no journal at all (journal_mode=OFF,
// synchronous=OFF), which a killed collector could leave corrupt: what journaling costs.
void BM_SqliteRows(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const StoredRows& rows = stored_rows();
  constexpr int kRowsPerInsert = RowBatch::kRowsPerInsert;  // for the tensors' rows too
  const std::size_t launches = rows.kernels.values.size() / static_cast<std::size_t>(rows.kernels.columns);
  const std::string path = scratch_trace();
  double cpu = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!new_trace(state, path)) break;  // the schema; closed before SQLite alone opens it
    sqlite3* db = nullptr;
    must(db, sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr));
    must(db, sqlite3_exec(db, TraceWriter::kLivePragmas, nullptr, nullptr, nullptr));
    if (mode == 1) must(db, sqlite3_exec(db, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr));
    if (mode == 2) must(db, sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF", nullptr, nullptr, nullptr));
    sqlite3_stmt* batch[2] = {};
    const StoredRows::Table* tables[2] = {&rows.kernels, &rows.tensors};
    for (int t = 0; t < 2; ++t) {
      const std::string sql = insert_sql("INSERT INTO", tables[t]->table_columns, tables[t]->columns, kRowsPerInsert);
      must(db, sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &batch[t], nullptr));
    }
    state.ResumeTiming();
    const double cpu0 = thread_cpu_seconds();
    must(db, sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr));
    // A batch of 64 launches' rows, then their tensors' (kTensorsPerLaunch batches), as they come.
    std::size_t since_commit = 0;
    for (std::size_t first = 0; first + kRowsPerInsert <= launches; first += kRowsPerInsert) {
      for (int t = 0; t < 2; ++t) {
        const StoredRows::Table& table = *tables[t];
        const std::size_t per_launch = t == 0 ? 1 : kTensorsPerLaunch;
        for (std::size_t b = 0; b < per_launch; ++b) {
          const std::size_t row0 = first * per_launch + b * kRowsPerInsert;
          const sqlite3_value* const* v = &table.values[row0 * static_cast<std::size_t>(table.columns)];
          for (int i = 0; i < kRowsPerInsert * table.columns; ++i) sqlite3_bind_value(batch[t], i + 1, v[i]);
          must(db, sqlite3_step(batch[t]));
          sqlite3_reset(batch[t]);
          since_commit += kRowsPerInsert;
        }
      }
      if (since_commit >= TraceWriter::kBatchRows) {
        must(db, sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr));
        since_commit = 0;
      }
    }
    must(db, sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr));
    cpu += thread_cpu_seconds() - cpu0;
    state.PauseTiming();
    for (sqlite3_stmt* st : batch) sqlite3_finalize(st);
    sqlite3_close(db);
    state.ResumeTiming();
  }
  remove_trace(path);
  // The records of the launches stored (whole batches: all but the last 100000 % 64).
  const double records = static_cast<double>(rows.records) * static_cast<double>(launches / kRowsPerInsert * kRowsPerInsert) /
                         static_cast<double>(launches);
  state.SetItemsProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * records));
  report_cpu_rate(state, static_cast<double>(state.iterations()) * records, cpu);
  const char* labels[] = {"SQLite alone, the live trace's settings (WAL)", "SQLite alone, WAL without fsync",
                          "SQLite alone, no journal"};
  state.SetLabel(labels[mode]);
}
BENCHMARK(BM_SqliteRows)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The finishing work at the end of a run (pending rows, counts, trace_finalize.sql, journal switch).
void BM_WriterFinish(benchmark::State& state) {
  const RecordStream stream = make_stream(100000, true);
  const std::string path = scratch_trace();
  for (auto _ : state) {
    state.PauseTiming();
    auto writer = new_trace(state, path);
    if (!writer) break;
    stream.for_each([&](const wire::RecordHeader* h) { writer->on_record(h); });
    writer->commit();
    state.ResumeTiming();
    writer->finish();
  }
  remove_trace(path);
  state.SetLabel("300k tensors, 100k kernels");
}
BENCHMARK(BM_WriterFinish)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// Producer thread to consumer through the shared mapping; records of `slots` slots.
void BM_RingThroughput(benchmark::State& state) {
  const auto slots = static_cast<uint16_t>(state.range(0));
  constexpr uint64_t kRecords = 2000000;
  for (auto _ : state) {
    std::string error;
    auto consumer = RingConsumer::create("/fpscope-bench-" + std::to_string(getpid()), 1 << 16, &error);
    auto producer = RingProducer::attach(consumer->name().c_str(), &error);
    producer->claim();
    std::thread writer([&] {
      for (uint64_t i = 0; i < kRecords; ++i) {
        auto* h = static_cast<wire::RecordHeader*>(producer->reserve(slots));
        *h = {wire::RecordType::Scalar, slots, 1};
        producer->publish();
      }
    });
    uint64_t received = 0;
    while (received < kRecords) received += consumer->drain([](const wire::RecordHeader* h) { benchmark::DoNotOptimize(h); });
    writer.join();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_RingThroughput)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// What `fpscope run` does: a producer thread publishes the full-statistics stream into the ring,
// the consumer drains it into the writer.
void BM_RingIntoTrace(benchmark::State& state) {
  const RecordStream stream = make_stream(100000, true);
  const std::string path = scratch_trace();
  double cpu = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto writer = new_trace(state, path);
    if (!writer) break;
    std::string error;
    auto consumer = RingConsumer::create("/fpscope-bench-" + std::to_string(getpid()), 1 << 20, &error);
    auto producer = RingProducer::attach(consumer->name().c_str(), &error);
    producer->claim();
    state.ResumeTiming();
    const double cpu0 = thread_cpu_seconds();
    std::thread program([&] {
      stream.for_each([&](const wire::RecordHeader* h) {
        void* at = producer->reserve(h->slots);
        std::memcpy(at, h, h->slots * wire::kSlotBytes);
        producer->publish();
      });
    });
    std::size_t received = 0;
    while (received < stream.records) received += consumer->drain([&](const wire::RecordHeader* h) { writer->on_record(h); });
    program.join();
    writer->commit();
    cpu += thread_cpu_seconds() - cpu0;
    state.PauseTiming();
    writer.reset();
    consumer.reset();
    state.ResumeTiming();
  }
  remove_trace(path);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * stream.records));
  report_cpu_rate(state, static_cast<double>(state.iterations() * stream.records), cpu);
  state.SetLabel("collector thread's CPU in records_per_cpu_s");
}
BENCHMARK(BM_RingIntoTrace)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace
}  // namespace fpscope

BENCHMARK_MAIN();
