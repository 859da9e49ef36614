// The launches, ranges and memory events the writer gathers into batches (collector/src/row_batch.h):
// every row lands as it would one statement at a time, in its order, whatever the batch boundaries;
// a commit writes what is gathered, so a reader sees every record of the committed batch; a relabel
// reaches an allocation's row whether it was written already or still gathered; a row SQLite
// refuses loses itself only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sqlite_reader.h"
#include "writer_fixture.h"

namespace fpscope {
namespace {

using test::blank;
using test::pack;
using wire::RecordType;

class BatchesTest : public test::WriterTest {
 protected:
  void alloc(int64_t t, uint64_t id, uint64_t bytes, uint8_t category, uint32_t name) {
    auto r = blank<wire::AllocRecord>(RecordType::Alloc);
    r.t_ns = t;
    r.id = id;
    r.bytes = bytes;
    r.category = category;
    r.name = name;
    feed(r);
  }
  void free_(int64_t t, uint64_t id) {
    auto r = blank<wire::FreeRecord>(RecordType::Free);
    r.t_ns = t;
    r.id = id;
    feed(r);
  }
  void relabel(uint64_t id, uint8_t category, uint32_t name) {
    auto r = blank<wire::RelabelRecord>(RecordType::Relabel);
    r.id = id;
    r.category = category;
    r.name = name;
    feed(r);
  }
  void strings() {
    for (uint32_t id = 1; id < std::size(test::kStrings); ++id) feed(test::string_record(id, test::kStrings[id]));
  }
};

// More than two batches of each table, interleaved, with a commit in the middle of a batch: a
// reader sees every row fed before the commit, and the finished trace holds every row in order.
TEST_F(BatchesTest, EveryRowLandsInOrderAcrossBatchesAndCommits) {
  constexpr int kLaunches = 150, kAllocations = 100, kRanges = 140;
  strings();
  int launches = 0, ranges = 0;
  int64_t t = 100;
  for (int a = 1; a <= kAllocations; ++a) {
    alloc(t++, static_cast<uint64_t>(a), 64u * static_cast<uint64_t>(a), 0, 6);
    if (launches < kLaunches) feed(test::launch(static_cast<uint64_t>(++launches), 5, a / 10));
    if (ranges < kRanges) {
      feed(test::push(t++, 0, 0, 4));
      feed(test::pop(t++, 0));
      ++ranges;
    }
  }
  writer_->commit();
  {
    test::Reader db(path_);
    EXPECT_EQ(db.one("SELECT count(*) FROM kernels").i, launches);
    EXPECT_EQ(db.one("SELECT count(*) FROM memory_events").i, kAllocations);
    EXPECT_EQ(db.one("SELECT count(*) FROM nvtx_ranges").i, ranges);
  }
  for (int a = 1; a <= kAllocations; ++a) {
    free_(t++, static_cast<uint64_t>(a));
    if (launches < kLaunches) feed(test::launch(static_cast<uint64_t>(++launches), 5, 10 + a / 10));
    if (ranges < kRanges) {
      feed(test::push(t++, 0, 0, 4));
      feed(test::pop(t++, 0));
      ++ranges;
    }
  }
  finish();
  test::Reader db(path_);
  const auto k = db.rows("SELECT id, start_ns, end_ns, name_id, step, sampled FROM kernels ORDER BY id");
  ASSERT_EQ(k.size(), static_cast<size_t>(kLaunches));
  for (int i = 0; i < kLaunches; ++i) {
    EXPECT_EQ(k[i][0].i, i + 1);
    EXPECT_EQ(k[i][1].i, 1000 + 10 * (i + 1));
    EXPECT_EQ(k[i][2].i, 1005 + 10 * (i + 1));
    EXPECT_EQ(k[i][3].i, 5);
    EXPECT_EQ(k[i][4].i, i < kAllocations ? (i + 1) / 10 : 10 + (i + 1 - kAllocations) / 10);
    EXPECT_EQ(k[i][5].i, 1);
  }
  // The memory events' ids count them in the order they came: each allocation, then each free.
  const auto m = db.rows("SELECT id, t_ns, kind, alloc_id, bytes, category, name_id FROM memory_events ORDER BY id");
  ASSERT_EQ(m.size(), static_cast<size_t>(2 * kAllocations));
  int64_t previous_t = 0;
  for (int i = 0; i < 2 * kAllocations; ++i) {
    EXPECT_EQ(m[i][0].i, i + 1);
    EXPECT_GT(m[i][1].i, previous_t);
    previous_t = m[i][1].i;
    EXPECT_EQ(m[i][2].s, i < kAllocations ? "alloc" : "free");
    const int64_t a = i % kAllocations + 1;
    EXPECT_EQ(m[i][3].i, a);
    EXPECT_EQ(m[i][4].i, 64 * a);
    EXPECT_EQ(m[i][6].i, 6);
  }
  const auto r = db.rows("SELECT id, start_ns, end_ns, kind, name_id FROM nvtx_ranges ORDER BY id");
  ASSERT_EQ(r.size(), static_cast<size_t>(kRanges));
  for (int i = 0; i < kRanges; ++i) {
    EXPECT_EQ(r[i][0].i, i + 1);
    EXPECT_EQ(r[i][2].i, r[i][1].i + 1);
    EXPECT_EQ(r[i][4].i, 4);
  }
  EXPECT_EQ(db.meta("kernels"), std::to_string(kLaunches));
  EXPECT_EQ(db.meta("events"), std::to_string(2 * kAllocations + kRanges));
  EXPECT_EQ(db.meta("malformed_records"), "0");
}

// A relabel changes the allocation's row whether it was written (the first of more than a batch)
// or is still gathered (the last one), and its free reads the new label either way.
TEST_F(BatchesTest, ARelabelReachesItsAllocationWrittenOrGathered) {
  strings();
  constexpr int kAllocations = 100;
  for (int a = 1; a <= kAllocations; ++a) alloc(100 + a, static_cast<uint64_t>(a), 256, 0, 7);
  relabel(1, 1, 6);             // its row was written with the first full batch
  relabel(kAllocations, 2, 8);  // still gathered
  free_(500, 1);
  free_(501, kAllocations);
  finish();
  test::Reader db(path_);
  const auto m = db.rows("SELECT alloc_id, kind, category, name_id FROM memory_events WHERE alloc_id IN (1, " +
                         std::to_string(kAllocations) + ") ORDER BY id");
  ASSERT_EQ(m.size(), 4u);
  const int64_t expected[][3] = {{1, 1, 6}, {kAllocations, 2, 8}, {1, 1, 6}, {kAllocations, 2, 8}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(m[i][0].i, expected[i][0]) << i;
    EXPECT_EQ(m[i][1].s, i < 2 ? "alloc" : "free") << i;
    EXPECT_EQ(m[i][2].i, expected[i][1]) << i;
    EXPECT_EQ(m[i][3].i, expected[i][2]) << i;
  }
  EXPECT_EQ(db.one("SELECT count(*) FROM memory_events WHERE category = 0 AND name_id = 7").i, kAllocations - 2);
}

// A second launch with a number already used, once in the batch being gathered (the first) and
// once in the table (a later batch): those rows alone are refused (two malformed records); their
// batches' other rows are written.
TEST_F(BatchesTest, ARefusedRowInAFullBatchLosesOnlyItself) {
  constexpr int kLaunches = 150;
  for (int seq = 1; seq <= kLaunches; ++seq) {
    feed(test::launch(static_cast<uint64_t>(seq), 0, 1));
    if (seq == 30) feed(test::launch(20, 0, 1));   // 20 is in the same batch
    if (seq == 100) feed(test::launch(7, 0, 1));   // 7 was written with the first batch
  }
  finish();
  EXPECT_EQ(writer_->counts().malformed_records, 2u);
  EXPECT_EQ(writer_->counts().kernels, static_cast<uint64_t>(kLaunches));
  test::Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM kernels").i, kLaunches);
  EXPECT_EQ(db.one("SELECT count(DISTINCT id) FROM kernels WHERE id BETWEEN 1 AND " + std::to_string(kLaunches)).i,
            kLaunches);
  EXPECT_EQ(db.meta("kernels"), std::to_string(kLaunches));
  EXPECT_EQ(db.meta("malformed_records"), "2");
}

// A trace that fills (a size limit; a full disk takes the same path) while launches are gathered
// and their tensors' rows are being written: the gathered launches are written first, in the
// room the reserve makes, so the trace keeps a prefix of the run, every stored tensor with its
// launch.
TEST_F(BatchesTest, ATraceThatFillsKeepsTheLaunchesGatheredBeforeIt) {
  writer_->limit_size(int64_t{1} << 20);
  uint64_t seq = 0;
  while (writer_->counts().lost_to_storage == 0 && seq < 100000) {
    ++seq;
    feed(test::launch(seq, 0, static_cast<int64_t>(seq / 10)));
    for (uint8_t slot = 0; slot < 3; ++slot) feed(test::stats(seq, wire::Role::Input, slot, 0));
  }
  ASSERT_GT(writer_->counts().lost_to_storage, 0u) << "the trace never filled";
  EXPECT_FALSE(writer_->finish());
  EXPECT_NE(writer_->incomplete().find("size limit"), std::string::npos) << writer_->incomplete();
  test::Reader db(path_);
  const int64_t kernels = db.one("SELECT count(*) FROM kernels").i;
  EXPECT_GT(kernels, 0);
  EXPECT_EQ(db.one("SELECT max(id) FROM kernels").i, kernels);  // launches 1 .. n: a prefix
  EXPECT_GT(db.one("SELECT count(*) FROM tensors").i, 0);
  EXPECT_EQ(db.one("SELECT count(*) FROM tensors WHERE kernel_id NOT IN (SELECT id FROM kernels)").i, 0);
  EXPECT_EQ(db.meta("trace_incomplete"), "size_limit");
}

// A tensor record whose role is neither input nor output names no row: it is malformed and left
// out, and the batches around it are written whole (more than one batch of tensors on each side).
TEST_F(BatchesTest, ATensorOfNoRoleIsMalformedAndTheOthersAreWritten) {
  constexpr uint64_t kLaunches = 40;
  for (uint64_t seq = 1; seq <= kLaunches; ++seq) {
    feed(test::launch(seq, 0, 1));
    auto bad = test::stats(seq, wire::Role::Output, 0, 0);
    bad.role = static_cast<wire::Role>(2 + seq % 200);
    if (seq == 20) feed(bad);
    feed(test::stats(seq, wire::Role::Input, 0, 0));
    feed(test::formats(seq, contract::pack_role_slot(wire::Role::Input, 0), 1));
  }
  finish();
  EXPECT_EQ(writer_->counts().malformed_records, 1u);
  EXPECT_EQ(writer_->counts().tensors, kLaunches);
  test::Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM tensors WHERE role = 'in' AND f16_overflow = 1").i,
            static_cast<int64_t>(kLaunches));
  EXPECT_EQ(db.one("SELECT count(*) FROM tensors").i, static_cast<int64_t>(kLaunches));
}

}  // namespace
}  // namespace fpscope
