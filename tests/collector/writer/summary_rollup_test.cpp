// The summaries the writer keeps while rows arrive (collector/src/summary_rollup.h: the memory and
// the tensor rollups) against their statements in trace_finalize.sql: for each set of records, the
// trace the writer finished and a copy on which the statements ran hold the same summary tables,
// declared alike, row for row. The writer says in meta summaries_rolled_up which it kept, and in
// summaries_not_rolled_up which it left to the statements, and why.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/contract/embedded_sql.h"
#include "fpscope/collector/trace_writer.h"
#include "sqlite_reader.h"
#include "temp_path.h"
#include "wire_builder.h"

namespace fpscope {
namespace {

using test::blank;
using test::pack;
using test::Reader;
using wire::RecordType;
namespace fs = std::filesystem;

constexpr const char* kMemoryTables =
    "summary_memory_peak,summary_memory_by_rank,summary_memory,summary_allocations";
constexpr const char* kTensorTables = "summary_ranges,summary_layer_steps";
// In the script's order.
const std::string kAllKept =
    std::string(kTensorTables) + ",summary_steps," + kMemoryTables + ",summary_ranks,summary_counts";
// What the memory rollup keeps, with summary_ranks and summary_counts, which read its peaks.
const std::string kMemoryKept = std::string(kMemoryTables) + ",summary_ranks,summary_counts";
// Why summary_steps, summary_ranks and summary_counts are left to their statements when the rollup
// they read gave up.
std::string steps_not_kept(const std::string& why) {
  return "summary_steps: it reads summary_layer_steps, not rolled up: " + why;
}
std::string counts_not_kept(const std::string& why) {
  return "summary_ranks,summary_counts: it reads the memory summaries, not rolled up: " + why;
}

struct Event {
  uint32_t source;  // the ring; ring 1 is rank 1
  int64_t t_ns;
  bool alloc;
  uint64_t id;
  uint64_t bytes;
  uint8_t category;  // of an alloc (a free's is its allocation's)
};

// The Nonfinite record of launch `seq`'s tensor `role_slot` (contract::pack_role_slot).
wire::NonfiniteRecord nonfinite(uint64_t seq, uint8_t role_slot, wire::NonfiniteKind kind, uint8_t origin,
                                uint8_t allowed) {
  auto r = blank<wire::NonfiniteRecord>(RecordType::Nonfinite);
  r.seq = seq;
  r.role_slot = role_slot;
  r.kind = kind;
  r.origin = origin;
  r.allowed = allowed;
  return r;
}

class RollupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (temp_.path() / "t.sqlite").string();
    std::string error;
    writer_ = TraceWriter::create(path_, "t.sqlite.dumps", &error);
    ASSERT_TRUE(writer_) << error;
    // Ring 1 is a second process, of rank 1; ring 0 announces none and is rank 0. Both name their
    // allocations with strings 2 to 4.
    writer_->on_record(test::header(test::string_record(1, "rank1")), 1);
    for (uint32_t source : {0u, 1u}) {
      for (uint32_t id : {2u, 3u, 4u})
        writer_->on_record(test::header(test::string_record(id, std::string(1, static_cast<char>('a' + id)))), source);
      writer_->on_record(test::header(test::string_record(5, "mptrain")), source);
      writer_->on_record(test::header(test::string_record(6, "step")), source);
    }
    auto process = blank<wire::ProcessRecord>(RecordType::Process);
    process.protocol = wire::kProtocolVersion;
    process.pid = 2;
    process.exe = 1;
    process.options = 1;
    process.host = 1;
    process.rank = 1;
    process.local_rank = -1;
    process.world_size = -1;
    writer_->on_record(test::header(pack(process)), 1);
  }

  // Opens a range of mptrain's domain on ring `source`'s thread 1 (its category, its message's
  // string, a step range's number as its payload), or closes the innermost one (`open` false).
  void nvtx(uint32_t source, int64_t t_ns, bool open, contract::NvtxCategory category = {}, uint32_t message = 0,
            int64_t step = -1) {
    if (open) {
      auto r = blank<wire::NvtxPushRecord>(RecordType::NvtxPush);
      r.t_ns = t_ns;
      r.domain = 5;
      r.category = static_cast<uint32_t>(category);
      r.message = message;
      if (step >= 0) {
        r.payload_kind = 1;
        r.payload_i = step;
      }
      writer_->on_record(test::header(pack(r)), source);
    } else {
      auto r = blank<wire::NvtxPopRecord>(RecordType::NvtxPop);
      r.t_ns = t_ns;
      r.domain = 5;
      writer_->on_record(test::header(pack(r)), source);
    }
  }

  // Opens (step >= 0) or closes the step range of ring `source`'s thread 1, as mptrain's NVTX does.
  void step_range(uint32_t source, int64_t t_ns, int64_t step) {
    if (step >= 0) nvtx(source, t_ns, true, contract::NvtxCategory::Step, 6, step);
    else nvtx(source, t_ns, false);
  }

  void feed(const Event& e) {
    if (e.alloc) {
      auto a = blank<wire::AllocRecord>(RecordType::Alloc);
      a.t_ns = e.t_ns;
      a.id = e.id;
      a.bytes = e.bytes;
      a.category = e.category;
      a.name = 2 + static_cast<uint32_t>(e.id % 3);
      writer_->on_record(test::header(pack(a)), e.source);
    } else {
      auto f = blank<wire::FreeRecord>(RecordType::Free);
      f.t_ns = e.t_ns;
      f.id = e.id;
      f.bytes = e.bytes;
      writer_->on_record(test::header(pack(f)), e.source);
    }
  }

  // Finishes the trace and holds its summary tables against the statements run on a copy.
  void expect_the_statements_tables(const std::string& kept, const std::string& not_kept = "") {
    ASSERT_TRUE(writer_->finish()) << writer_->error();
    writer_.reset();
    const std::string copy = (temp_.path() / "statements.sqlite").string();
    fs::copy_file(path_, copy);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(copy.c_str(), &db), SQLITE_OK);
    const std::string script = std::string("BEGIN;") + embedded::kTraceFinalizeSql + "; COMMIT;";
    char* message = nullptr;
    EXPECT_EQ(sqlite3_exec(db, script.c_str(), nullptr, nullptr, &message), SQLITE_OK) << (message ? message : "");
    sqlite3_free(message);
    sqlite3_close(db);

    Reader trace(path_), ran(copy);
    EXPECT_EQ(trace.meta("finalize_status"), "ok");
    EXPECT_EQ(trace.meta("summaries_rolled_up"), kept);
    EXPECT_EQ(trace.meta("summaries_not_rolled_up"), not_kept);
    const auto tables = ran.rows("SELECT name, sql FROM sqlite_master WHERE name LIKE 'summary%' ORDER BY name");
    ASSERT_EQ(tables.size(), 10u);
    for (const auto& t : tables) {
      const std::string& table = t[0].s;
      EXPECT_EQ(trace.text("SELECT sql FROM sqlite_master WHERE name = '" + table + "'"), t[1].s);
      const auto a = trace.rows("SELECT * FROM " + table);
      const auto b = ran.rows("SELECT * FROM " + table);
      ASSERT_EQ(a.size(), b.size()) << table;
      for (size_t r = 0; r < a.size(); ++r) {
        ASSERT_EQ(a[r].size(), b[r].size());
        for (size_t c = 0; c < a[r].size(); ++c) {
          EXPECT_EQ(a[r][c].type, b[r][c].type) << table << " row " << r << " column " << c;
          EXPECT_EQ(a[r][c].i, b[r][c].i) << table << " row " << r << " column " << c;
          EXPECT_EQ(a[r][c].d, b[r][c].d) << table << " row " << r << " column " << c;
          EXPECT_EQ(a[r][c].s, b[r][c].s) << table << " row " << r << " column " << c;
        }
      }
    }
  }

  test::TempDir temp_{"fpscope-rollup"};
  std::string path_;
  std::unique_ptr<TraceWriter> writer_;
};

// Two ranks whose events arrive interleaved, each in its own time order: allocations and frees of
// every category, several at one instant, both ranks peaking at the same total (the lower rank's
// peak is the trace's) and each reaching its peak twice (the first time is the moment).
TEST_F(RollupTest, EventsInTimeOrderAreKeptAsTheStatementsWriteThem) {
  std::vector<Event> events;
  for (uint32_t source : {1u, 0u}) {
    uint64_t id = 1;
    int64_t t = source ? 50 : 100;
    for (uint8_t c = 0; c < contract::kMemoryCategoryCount; ++c) {
      events.push_back({source, t, true, id++, 1000u + 10u * c, c});
      events.push_back({source, t, true, id++, 3u, c});  // the same instant
      t += 10;
    }
    events.push_back({source, t, false, 1, 1000, 0});                 // weight falls, then
    events.push_back({source, t + 5, true, id++, 1000, 0});           // climbs back: the peak again
    events.push_back({source, t + 6, false, 3, 1010, 1});
    events.push_back({source, t + 7, false, id - 1, 1000, 0});
  }
  // Interleave the ranks: rank 1's times are older than rank 0's, which is no disorder.
  for (size_t i = 0; i < events.size() / 2; ++i) {
    feed(events[i]);
    feed(events[events.size() / 2 + i]);
  }
  expect_the_statements_tables(kAllKept);
}

TEST_F(RollupTest, RandomEventsInTimeOrderAreKeptAsTheStatementsWriteThem) {
  std::mt19937_64 random(7);
  std::vector<std::vector<uint64_t>> live(2);  // allocation ids per ring
  std::vector<int64_t> t(2, 0);
  uint64_t next_id = 1;
  std::vector<int64_t> step(2, -1);  // the open step range of each ring, -1 none
  for (int i = 0; i < 3000; ++i) {
    const uint32_t source = static_cast<uint32_t>(random() % 2);
    t[source] += static_cast<int64_t>(random() % 3);  // often the same instant
    if (random() % 50 == 0) {  // steps come and go: some events lie outside every step
      if (step[source] >= 0) step_range(source, t[source], -1);
      step[source] = step[source] >= 0 ? -1 : i;
      if (step[source] >= 0) step_range(source, t[source], step[source]);
    }
    auto& ids = live[source];
    if (!ids.empty() && random() % 5 < 2) {
      const size_t k = random() % ids.size();
      feed({source, t[source], false, ids[k], 0, 0});  // bytes 0: the allocation's
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const auto category = static_cast<uint8_t>(random() % contract::kMemoryCategoryCount);
      feed({source, t[source], true, next_id, 1000 * (1 + random() % 20), category});  // sizes recur
      ids.push_back(next_id++);
    }
  }
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_GT(db.integer("SELECT count(*) FROM summary_allocations WHERE first_step IS NOT NULL"), 0);
  EXPECT_GT(db.integer("SELECT count(*) FROM summary_allocations WHERE first_step IS NULL"), 0);
  EXPECT_GT(db.integer("SELECT max(count) FROM summary_allocations"), 1);
}

TEST_F(RollupTest, WithoutMemoryEventsThePeakIsUnknown) {
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM summary_memory_peak WHERE peak_t_ns IS NULL AND bytes = 0"),
            contract::kMemoryCategoryCount);
}

// Events arriving out of the timeline's order, in both ranks, several at one instant: the
// timeline is walked in (t_ns, id) order all the same.
TEST_F(RollupTest, EventsOutOfTimeOrderAreKeptAsTheStatementsWriteThem) {
  std::mt19937_64 random(5);
  std::vector<std::vector<uint64_t>> live(2);
  uint64_t next_id = 1;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t source = static_cast<uint32_t>(random() % 2);
    const auto t = static_cast<int64_t>(random() % 500);  // any order, many ties
    auto& ids = live[source];
    if (!ids.empty() && random() % 3 == 0) {
      feed({source, t, false, ids.back(), 0, 0});
      ids.pop_back();
    } else {
      feed({source, t, true, next_id, 1000 * (1 + random() % 20),
            static_cast<uint8_t>(random() % contract::kMemoryCategoryCount)});
      ids.push_back(next_id++);
    }
  }
  expect_the_statements_tables(kAllKept);
}

// Relabels change the category and name of allocations already counted (and of their frees,
// written after): some relabelled before any other event, some long after, some freed since.
TEST_F(RollupTest, RelabelledAllocationsAreKeptAsTheStatementsWriteThem) {
  std::mt19937_64 random(3);
  std::vector<uint64_t> live;
  uint64_t next_id = 1;
  for (int i = 0; i < 2000; ++i) {
    const int64_t t = i;
    const uint64_t what = random() % 6;
    if (!live.empty() && what < 2) {
      const size_t k = random() % live.size();
      auto r = blank<wire::RelabelRecord>(RecordType::Relabel);
      r.id = live[k];
      r.category = static_cast<uint8_t>(random() % contract::kMemoryCategoryCount);
      r.name = 2 + static_cast<uint32_t>(random() % 3);
      writer_->on_record(test::header(pack(r)), 0);
    } else if (!live.empty() && what < 4) {
      const size_t k = random() % live.size();
      feed({0, t, false, live[k], 0, 0});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      feed({0, t, true, next_id, 1000 * (1 + random() % 5), static_cast<uint8_t>(random() % 3)});
      live.push_back(next_id++);
    }
  }
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(DISTINCT category) FROM memory_events"), contract::kMemoryCategoryCount);
}

// A category the views do not know: their running totals leave it NULL.
TEST_F(RollupTest, AnUnknownCategoryLeavesItToTheStatements) {
  feed({0, 100, true, 1, 500, 3});
  feed({0, 110, true, 2, 700, contract::kMemoryCategoryCount});
  const std::string why = "a memory category the views do not know";
  expect_the_statements_tables(std::string(kTensorTables) + ",summary_steps",
                               std::string(kMemoryTables) + ": " + why + "; " + counts_not_kept(why));
}

// Tensors of launches of two ranks with the same launch numbers: several kernels, layers and phases
// (and none), steps (and none), inputs and outputs of three dtypes, with and without format counts
// (--stats basic), with and without finite values, some non-finite.
TEST_F(RollupTest, RandomTensorsAreKeptAsTheStatementsWriteThem) {
  const char* const names[] = {nullptr, "conv", "matmul", "relu", "conv1", "fc1", "forward", "backward"};
  for (uint32_t source : {0u, 1u})
    for (uint32_t id = 1; id < std::size(names); ++id)
      writer_->on_record(test::header(test::string_record(id + 10, names[id])), source);
  std::mt19937_64 random(11);
  const auto pick = [&](uint64_t n) { return random() % n; };
  // Non-finite records sent after the next launch of their ring: their tensor's row is written.
  std::vector<std::pair<uint32_t, wire::NonfiniteRecord>> late;
  for (uint64_t seq = 1; seq <= 600; ++seq) {
    for (uint32_t source : {0u, 1u}) {
      auto l = blank<wire::LaunchRecord>(RecordType::Launch);
      l.seq = seq;
      l.start_ns = l.end_ns = static_cast<int64_t>(seq);
      l.kernel = 11 + static_cast<uint32_t>(pick(3));
      l.layer = pick(3) ? 14 + static_cast<uint32_t>(pick(2)) : 0;
      l.phase = pick(3) ? 16 + static_cast<uint32_t>(pick(2)) : 0;
      l.step = pick(4) ? static_cast<int64_t>(seq / 50) : -1;
      l.sampled = 1;
      writer_->on_record(test::header(pack(l)), source);
      for (const auto& [ring, r] : late)
        if (ring == source) writer_->on_record(test::header(pack(r)), ring);
      std::erase_if(late, [&](const auto& x) { return x.first == source; });
      const uint64_t n = 1 + pick(3);
      for (uint8_t slot = 0; slot < n; ++slot) {
        auto t = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
        t.seq = seq;
        t.role = pick(2) ? wire::Role::Output : wire::Role::Input;
        t.slot = slot;
        t.name = 11;
        t.dtype = static_cast<uint8_t>(pick(3));
        t.count = 1 + pick(1000);
        t.nan = pick(8) ? 0 : pick(t.count);
        t.pos_inf = pick(8) ? 0 : 1;
        t.neg_inf = pick(8) ? 0 : 2;
        t.zero = pick(t.count);
        t.subnormal = pick(3);
        const bool finite = pick(10) != 0;
        t.absmax = finite ? std::ldexp(static_cast<double>(pick(1000)), static_cast<int>(pick(40)) - 20) : NAN;
        t.min_nonzero = finite && pick(5) ? std::ldexp(1.0 + static_cast<double>(pick(100)), -static_cast<int>(pick(30)))
                                          : NAN;
        t.min = t.max = t.mean = t.rms = t.absmax;
        writer_->on_record(test::header(pack(t)), source);
        if (pick(4) != 0) {
          auto f = blank<wire::TensorFormatsRecord>(RecordType::TensorFormats);
          f.seq = seq;
          f.role_slot = contract::pack_role_slot(t.role, slot);
          for (auto& c : f.formats) c = {pick(t.count), pick(t.count), pick(t.count), pick(t.count)};
          writer_->on_record(test::header(pack(f)), source);
        }
        // An output holding NaN/Inf has a Nonfinite record, intended or not, with the tensor or later.
        if (t.role == wire::Role::Output && t.nan + t.pos_inf + t.neg_inf > 0) {
          const auto r = nonfinite(seq, contract::pack_role_slot(t.role, slot),
                                   t.nan ? wire::NonfiniteKind::NaN : wire::NonfiniteKind::PosInf,
                                   static_cast<uint8_t>(pick(2)), static_cast<uint8_t>(pick(2)));
          if (pick(3) == 0) late.emplace_back(source, r);
          else writer_->on_record(test::header(pack(r)), source);
        }
      }
    }
  }
  expect_the_statements_tables(kAllKept);
}

// Format counts that reach a tensor's row after it was written (the collector wrote the tensor
// before its producer sent them) update the row: fed `times` times.
void feed_late_format_counts(TraceWriter& writer, int times) {
  writer.on_record(test::header(test::string_record(11, "conv")));
  auto l = blank<wire::LaunchRecord>(RecordType::Launch);
  l.seq = 1;
  l.kernel = 11;
  l.step = -1;
  writer.on_record(test::header(pack(l)));
  auto t = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
  t.seq = 1;
  t.role = wire::Role::Output;
  t.count = 4;
  t.absmax = t.min_nonzero = 2.0;
  writer.on_record(test::header(pack(t)));
  l.seq = 2;
  writer.on_record(test::header(pack(l)));  // the tensor is complete: its row is written
  auto f = blank<wire::TensorFormatsRecord>(RecordType::TensorFormats);
  f.seq = 1;
  f.role_slot = contract::pack_role_slot(wire::Role::Output, 0);
  f.formats[0] = {1, 2, 0, 0};
  for (int i = 0; i < times; ++i) writer.on_record(test::header(pack(f)));
}

// An output whose NaN/Inf an allow rule covers counts them as intended, apart from the others,
// whether its Nonfinite record comes with the tensor or after its row was written.
TEST_F(RollupTest, IntendedValuesAreCountedApartWhenEverTheirRecordArrives) {
  writer_->on_record(test::header(test::string_record(11, "masked_fill")));
  for (const bool late : {false, true}) {
    for (uint64_t seq : {1, 2}) {  // the first output intended, the second not
      const uint64_t at = seq + (late ? 2 : 0);
      auto l = blank<wire::LaunchRecord>(RecordType::Launch);
      l.seq = at;
      l.kernel = 11;
      l.step = late ? 1 : 0;
      writer_->on_record(test::header(pack(l)));
      auto t = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
      t.seq = at;
      t.role = wire::Role::Output;
      t.count = 100;
      t.nan = seq == 1 ? 0 : 3;
      t.neg_inf = seq == 1 ? 40 : 5;
      t.absmax = t.min_nonzero = 1.0;
      writer_->on_record(test::header(pack(t)));
      const auto r = nonfinite(at, contract::pack_role_slot(wire::Role::Output, 0), wire::NonfiniteKind::NegInf, 1,
                               seq == 1);
      if (late) {  // another launch completes the tensor: its row is written before the record comes
        auto next = blank<wire::LaunchRecord>(RecordType::Launch);
        next.seq = 100 + at;
        next.kernel = 11;
        next.step = -1;
        writer_->on_record(test::header(pack(next)));
      }
      writer_->on_record(test::header(pack(r)));
    }
  }
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT sum(nan) FROM summary_ranges WHERE role = 'out'"), 6);
  EXPECT_EQ(db.integer("SELECT sum(neg_inf) FROM summary_ranges WHERE role = 'out'"), 10);
  EXPECT_EQ(db.integer("SELECT sum(intended_neg_inf) FROM summary_ranges"), 80);
  EXPECT_EQ(db.integer("SELECT sum(intended_nan) + sum(intended_pos_inf) FROM summary_ranges"), 0);
  for (int step : {0, 1}) {
    const std::string where = " FROM summary_layer_steps WHERE step = " + std::to_string(step);
    EXPECT_EQ(db.integer("SELECT nan" + where), 3);
    EXPECT_EQ(db.integer("SELECT inf" + where), 5);
    EXPECT_EQ(db.integer("SELECT intended" + where), 40);
    EXPECT_EQ(db.integer("SELECT intended FROM summary_steps WHERE step = " + std::to_string(step)), 40);
    EXPECT_EQ(db.integer("SELECT inf FROM summary_steps WHERE step = " + std::to_string(step)), 5);
  }
}

TEST_F(RollupTest, LateFormatCountsAreAddedToTheirRowsGroups) {
  feed_late_format_counts(*writer_, 1);
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT f16_overflow FROM summary_ranges"), 1);
  EXPECT_EQ(db.integer("SELECT f16_underflow FROM summary_layer_steps"), 2);
  EXPECT_EQ(db.integer("SELECT formats_measured_elements FROM summary_ranges"), 4);
}

TEST_F(RollupTest, FormatCountsArrivingTwiceLeaveItToTheStatements) {
  feed_late_format_counts(*writer_, 2);
  const std::string why = "format counts that arrived twice for one tensor";
  expect_the_statements_tables(kMemoryKept, std::string(kTensorTables) + ": " + why + "; " + steps_not_kept(why));
}

// A tensor whose launch never arrived: the statements' join leaves it out.
TEST_F(RollupTest, ATensorWithoutItsLaunchLeavesItToTheStatements) {
  auto t = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
  t.seq = 7;
  t.count = 4;
  writer_->on_record(test::header(pack(t)));
  const std::string why = "a tensor whose launch is not among the recent ones the rollup holds";
  expect_the_statements_tables(kMemoryKept, std::string(kTensorTables) + ": " + why + "; " + steps_not_kept(why));
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM summary_ranges"), 0);
}

// A record that contradicts an earlier one (a second launch with the same number) cannot be
// written: what such a record wrote in part, a rollup cannot know.
TEST_F(RollupTest, ARecordThatCannotBeWrittenLeavesItToTheStatements) {
  auto l = blank<wire::LaunchRecord>(RecordType::Launch);
  l.seq = 1;
  l.step = -1;
  writer_->on_record(test::header(pack(l)));
  writer_->on_record(test::header(pack(l)));
  writer_->commit();  // the launches are written a batch at a time: the second is refused here
  EXPECT_EQ(writer_->counts().malformed_records, 1u);
  const std::string why = ": a record that could not be written";
  expect_the_statements_tables(
      "", kMemoryTables + why + "; " + kTensorTables + why + "; summary_steps" + why + "; summary_ranks,summary_counts" + why);
}


// A run of two ranks as mptrain's NVTX marks it: step ranges, the training phases in them and an
// evaluation after the last (a tail step, in one rank a step the other trained in, in both a step
// nobody trained in), kernels sampled and not, outputs with NaN/Inf allowed and not (made from
// finite values or not), loss-scale events, memory events, ranges the program never closed; one
// rank announced by its process, the other known by its kernels only.
TEST_F(RollupTest, RandomRunsAreKeptAsTheStatementsWriteThem) {
  const char* const names[] = {"forward", "backward", "optimizer", "eval", "conv"};  // strings 20..24
  for (uint32_t source : {0u, 1u})
    for (uint32_t i = 0; i < std::size(names); ++i)
      writer_->on_record(test::header(test::string_record(20 + i, names[i])), source);
  std::mt19937_64 random(13);
  const auto pick = [&](uint64_t n) { return static_cast<int64_t>(random() % n); };
  constexpr auto phase = contract::NvtxCategory::Phase;
  std::vector<int64_t> t = {1000, 400};  // the ranks' clocks
  std::vector<uint64_t> seq = {1, 1};
  uint64_t next_alloc = 1;
  // Rank 0 trains steps 0..9 and evaluates in 10 and 11; rank 1 trains 0..10 and evaluates in 11.
  for (int64_t step = 0; step <= 11; ++step) {
    for (uint32_t source : {0u, 1u}) {
      const bool trains = step < (source == 0 ? 10 : 11);
      step_range(source, t[source] += 1 + pick(5), step);
      for (uint32_t p = 0; p < (trains ? 3u : 1u); ++p) {
        nvtx(source, t[source] += pick(3), true, phase, trains ? 20 + p : 23);
        for (int k = 0; k < 1 + pick(4); ++k) {
          auto l = blank<wire::LaunchRecord>(RecordType::Launch);
          l.seq = seq[source]++;
          l.start_ns = t[source] += pick(4);
          l.end_ns = t[source] += pick(50);
          l.kernel = 24;
          l.step = step;
          l.sampled = static_cast<uint8_t>(pick(3) != 0);
          writer_->on_record(test::header(pack(l)), source);
          if (!l.sampled) continue;
          auto o = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
          o.seq = l.seq;
          o.role = wire::Role::Output;
          o.name = 24;
          o.count = 10;
          o.nan = pick(6) ? 0 : 1 + pick(3);
          o.absmax = o.min_nonzero = 1.0;
          writer_->on_record(test::header(pack(o)), source);
          if (o.nan) {
            const auto r = nonfinite(l.seq, contract::pack_role_slot(wire::Role::Output, 0), wire::NonfiniteKind::NaN,
                                     static_cast<uint8_t>(pick(2)), static_cast<uint8_t>(pick(2)));
            writer_->on_record(test::header(pack(r)), source);
          }
          if (pick(2)) feed({source, t[source], true, next_alloc++, 1000 * static_cast<uint64_t>(1 + pick(4)), 1});
        }
        if (trains && p == 2) {  // the optimizer's loss scale: some steps skipped
          auto ls = blank<wire::LossScaleRecord>(RecordType::LossScale);
          ls.seq = seq[source] - 1;
          ls.t_ns = t[source];
          ls.step = step;
          ls.scale_before = ls.scale_after = 1024.0;
          ls.found_inf = static_cast<uint8_t>(pick(3) == 0);
          writer_->on_record(test::header(pack(ls)), source);
        }
        // The last phase of the last step stays open: the program ends inside it.
        if (!(step == 11 && source == 1)) nvtx(source, t[source] += pick(3), false);
      }
      if (!(step == 11 && source == 1)) step_range(source, t[source] += pick(3), -1);
    }
  }
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  const auto count = [&](const char* key) {
    return db.integer("SELECT value FROM summary_counts WHERE key = '" + std::string(key) + "'");
  };
  EXPECT_EQ(count("steps"), 11);  // 0..10: rank 1 trained in 10
  EXPECT_EQ(count("tail_step"), 11);
  EXPECT_EQ(count("ranks"), 2);
  EXPECT_EQ(db.integer("SELECT count(*) FROM summary_ranks WHERE first_origin_kernel_id IS NOT NULL"), 2);
  EXPECT_GT(db.integer("SELECT sum(skipped_steps) FROM summary_ranks"), 0);
  EXPECT_EQ(db.integer("SELECT sum(processes) FROM summary_ranks"), 1);
  EXPECT_EQ(db.integer("SELECT count(*) FROM summary_steps"), 12);
  EXPECT_EQ(db.integer("SELECT count(*) FROM nvtx_ranges WHERE end_ns IS NULL"), 2);
}

// Records that arrive after the trace was completed once (the program's exit began): completed
// again, the summaries count them.
TEST_F(RollupTest, RecordsAfterAFirstCompletionAreCounted) {
  writer_->on_record(test::header(test::string_record(24, "conv")));
  const auto launch = [&](uint64_t seq, int64_t t) {
    auto l = blank<wire::LaunchRecord>(RecordType::Launch);
    l.seq = seq;
    l.start_ns = t;
    l.end_ns = t + 10;
    l.kernel = 24;
    l.step = 0;
    l.sampled = 1;
    writer_->on_record(test::header(pack(l)));
  };
  step_range(0, 5, 0);
  launch(1, 10);
  feed({0, 20, true, 1, 4096, 1});
  step_range(0, 25, -1);
  ASSERT_TRUE(writer_->prepare_finish()) << writer_->error();
  step_range(0, 28, 1);
  launch(2, 30);
  feed({0, 40, true, 2, 8192, 1});
  step_range(0, 50, -1);
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT value FROM summary_counts WHERE key = 'steps'"), 2);
  EXPECT_EQ(db.integer("SELECT value FROM summary_counts WHERE key = 'kernels'"), 2);
  EXPECT_EQ(db.integer("SELECT value FROM summary_counts WHERE key = 'memory_peak_bytes'"), 12288);
  EXPECT_EQ(db.integer("SELECT end_ns FROM summary_steps WHERE step = 1"), 50);
}

// A free that reaches the trace dated before its allocation, of more bytes: in the timeline's
// order the category's live bytes stay below zero, and its largest is negative.
TEST_F(RollupTest, ACategoryWhoseLiveBytesStayNegativeIsKeptAsTheStatementsWriteIt) {
  feed({0, 100, true, 1, 5, 2});
  feed({0, 90, false, 1, 8, 0});
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT max_live FROM summary_memory WHERE category = 2"), -3);
}

// A non-finite record whose allowed flag is neither 0 nor 1: the statements count it neither as
// allowed nor as not, and its values are not intended.
TEST_F(RollupTest, AnAllowedFlagNeitherZeroNorOneIsCountedAsTheStatementsCountIt) {
  writer_->on_record(test::header(test::string_record(24, "conv")));
  for (const uint8_t allowed : {0, 1, 2}) {
    auto l = blank<wire::LaunchRecord>(RecordType::Launch);
    l.seq = 1 + allowed;
    l.kernel = 24;
    l.step = 0;
    l.sampled = 1;
    writer_->on_record(test::header(pack(l)));
    auto t = blank<wire::TensorStatsRecord>(RecordType::TensorStats);
    t.seq = l.seq;
    t.role = wire::Role::Output;
    t.count = 4;
    t.nan = 1;
    t.absmax = t.min_nonzero = 1.0;
    writer_->on_record(test::header(pack(t)));
    const auto r = nonfinite(l.seq, contract::pack_role_slot(wire::Role::Output, 0), wire::NonfiniteKind::NaN, 1, allowed);
    writer_->on_record(test::header(pack(r)));
  }
  expect_the_statements_tables(kAllKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT value FROM summary_counts WHERE key = 'nonfinite_tensors'"), 1);
  EXPECT_EQ(db.integer("SELECT value FROM summary_counts WHERE key = 'allowed_nonfinite_tensors'"), 1);
  EXPECT_EQ(db.integer("SELECT intended FROM summary_steps WHERE step = 0"), 1);
}

}  // namespace
}  // namespace fpscope
