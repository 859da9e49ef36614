// The memory summaries the writer keeps while events arrive (collector/src/memory_rollup.h) against
// their statements in trace_finalize.sql: for each set of events, the trace the writer finished and
// a copy on which the statements ran hold the same summary tables, declared alike, row for row.
// The writer says in meta summaries_rolled_up whether it kept them or ran the statements, and why.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fpscope/contract/contract.h"
#include "fpscope/embedded_sql.h"
#include "fpscope/trace_writer.h"
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

constexpr const char* kBothKept = "summary_memory_peak,summary_memory_by_rank";
// Every summary that reads the memory timeline, directly or through another summary.
constexpr const char* kMemorySummaries[] = {"summary_memory_peak", "summary_memory_by_rank", "summary_memory",
                                            "summary_counts", "summary_ranks"};

struct Event {
  uint32_t source;  // the ring; ring 1 is rank 1
  int64_t t_ns;
  bool alloc;
  uint64_t id;
  uint64_t bytes;
  uint8_t category;  // of an alloc (a free's is its allocation's)
};

class MemoryRollupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (temp_.path() / "t.sqlite").string();
    std::string error;
    writer_ = TraceWriter::create(path_, "t.sqlite.dumps", &error);
    ASSERT_TRUE(writer_) << error;
    // Ring 1 is a second process, of rank 1; ring 0 announces none and is rank 0.
    writer_->on_record(test::header(test::string_record(1, "rank1")), 1);
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

  void feed(const Event& e) {
    if (e.alloc) {
      auto a = blank<wire::AllocRecord>(RecordType::Alloc);
      a.t_ns = e.t_ns;
      a.id = e.id;
      a.bytes = e.bytes;
      a.category = e.category;
      writer_->on_record(test::header(pack(a)), e.source);
    } else {
      auto f = blank<wire::FreeRecord>(RecordType::Free);
      f.t_ns = e.t_ns;
      f.id = e.id;
      f.bytes = e.bytes;
      writer_->on_record(test::header(pack(f)), e.source);
    }
  }

  // Finishes the trace and holds its memory summaries against the statements run on a copy.
  void expect_the_statements_tables(const std::string& rolled_up) {
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

    Reader kept(path_), ran(copy);
    EXPECT_EQ(kept.meta("finalize_status"), "ok");
    EXPECT_EQ(kept.meta("summaries_rolled_up"), rolled_up);
    for (const char* table : kMemorySummaries) {
      const std::string declared = std::string("SELECT sql FROM sqlite_master WHERE name = '") + table + "'";
      EXPECT_EQ(kept.text(declared), ran.text(declared)) << table;
      const auto a = kept.rows(std::string("SELECT * FROM ") + table);
      const auto b = ran.rows(std::string("SELECT * FROM ") + table);
      ASSERT_EQ(a.size(), b.size()) << table;
      for (size_t r = 0; r < a.size(); ++r) {
        ASSERT_EQ(a[r].size(), b[r].size());
        for (size_t c = 0; c < a[r].size(); ++c) {
          EXPECT_EQ(a[r][c].type, b[r][c].type) << table << " row " << r << " column " << c;
          EXPECT_EQ(a[r][c].i, b[r][c].i) << table << " row " << r << " column " << c;
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
TEST_F(MemoryRollupTest, EventsInTimeOrderAreKeptAsTheStatementsWriteThem) {
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
  expect_the_statements_tables(kBothKept);
}

TEST_F(MemoryRollupTest, RandomEventsInTimeOrderAreKeptAsTheStatementsWriteThem) {
  std::mt19937_64 random(7);
  std::vector<std::vector<uint64_t>> live(2);  // allocation ids per ring
  std::vector<int64_t> t(2, 0);
  uint64_t next_id = 1;
  for (int i = 0; i < 3000; ++i) {
    const uint32_t source = static_cast<uint32_t>(random() % 2);
    t[source] += static_cast<int64_t>(random() % 3);  // often the same instant
    auto& ids = live[source];
    if (!ids.empty() && random() % 5 < 2) {
      const size_t k = random() % ids.size();
      feed({source, t[source], false, ids[k], 0, 0});  // bytes 0: the allocation's
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const auto category = static_cast<uint8_t>(random() % contract::kMemoryCategoryCount);
      feed({source, t[source], true, next_id, 1 + random() % 100000, category});
      ids.push_back(next_id++);
    }
  }
  expect_the_statements_tables(kBothKept);
}

TEST_F(MemoryRollupTest, WithoutMemoryEventsThePeakIsUnknown) {
  expect_the_statements_tables(kBothKept);
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM summary_memory_peak WHERE peak_t_ns IS NULL AND bytes = 0"),
            contract::kMemoryCategoryCount);
}

// An event older than the one before it in its rank: arrival is no longer the timeline's order.
TEST_F(MemoryRollupTest, AnEventOutOfTimeOrderLeavesItToTheStatements) {
  feed({0, 100, true, 1, 500, 3});
  feed({0, 200, true, 2, 700, 4});
  feed({0, 150, true, 3, 900, 3});
  feed({0, 300, false, 2, 700, 0});
  expect_the_statements_tables("none: a memory event older than the one before it in its rank");
}

// A relabel changes the category of an event already counted.
TEST_F(MemoryRollupTest, ARelabelLeavesItToTheStatements) {
  feed({0, 100, true, 1, 500, 3});
  feed({0, 110, true, 2, 700, 3});
  auto r = blank<wire::RelabelRecord>(RecordType::Relabel);
  r.id = 1;
  r.category = 2;
  writer_->on_record(test::header(pack(r)), 0);
  feed({0, 120, false, 1, 500, 0});
  expect_the_statements_tables("none: an allocation was relabelled after its event");
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT max_live FROM summary_memory_by_rank WHERE category = 2"), 500);
}

// A category the views do not know: their running totals leave it NULL.
TEST_F(MemoryRollupTest, AnUnknownCategoryLeavesItToTheStatements) {
  feed({0, 100, true, 1, 500, 3});
  feed({0, 110, true, 2, 700, contract::kMemoryCategoryCount});
  expect_the_statements_tables("none: a memory category the views do not know");
}

}  // namespace
}  // namespace fpscope
