// The processes of a multi-process run as the writer keeps them: an idle launcher beside the ranks
// that worked is left out, a lone idle process stays.
#include <gtest/gtest.h>

#include <iterator>

#include "sqlite_reader.h"
#include "writer_fixture.h"

namespace fpscope::test {
namespace {

using wire::RecordType;

// A process of a multi-process run that exits having done no work of its own (a launcher such as
// torchrun's agent: it started, gave its configuration, opened the front end's step range) is left
// out once another did work: its row, its ranges and its meta go, and the counts say so. A lone
// idle process stays.
class IdleProcessTest : public WriterTest {
 protected:
  void announce(uint32_t source, int32_t rank, uint32_t pid) {
    for (uint32_t id = 1; id < std::size(kStrings); ++id) writer_->on_record(test::header(test::string_record(id, kStrings[id])), source);
    auto process = blank<wire::ProcessRecord>(RecordType::Process);
    process.protocol = wire::kProtocolVersion;
    process.pid = pid;
    process.rank = rank;
    process.local_rank = process.world_size = -1;
    process.exe = 11;
    process.options = 12;
    process.start_ns = 1000 + pid;
    process.mono_ns = pid;
    writer_->on_record(test::header(pack(process)), source);
    auto text = blank<wire::TextRecord>(RecordType::Text);
    text.key = 9;
    text.value = 10;
    writer_->on_record(test::header(pack(text)), source);
  }
  void idle_then_exit(uint32_t source) {
    writer_->on_record(test::header(pack(push(100, 1, 1, 2, 0))), source);
    writer_->on_record(test::header(pack(pop(200, 1))), source);
    auto status = blank<wire::TextRecord>(RecordType::Text);
    writer_->on_record(test::header(test::string_record(30, "injector.own_time_ms")), source);
    writer_->on_record(test::header(test::string_record(31, "0.5")), source);
    status.key = 30;
    status.value = 31;
    writer_->on_record(test::header(pack(status)), source);
    exit(source);
  }
  void exit(uint32_t source) {
    auto bye = blank<wire::ProcessExitRecord>(RecordType::ProcessExit);
    bye.t_ns = 300;
    writer_->on_record(test::header(pack(bye)), source);
  }
};

TEST_F(IdleProcessTest, AnIdleProcessBesideAWorkingOneIsLeftOut) {
  announce(0, 0, 100);  // the launcher: the first ring
  announce(1, 0, 101);  // rank 0
  announce(2, 1, 102);  // rank 1
  idle_then_exit(0);
  for (uint32_t source : {1u, 2u}) {
    writer_->on_record(test::header(pack(push(110, 1, 1, 2, 1))), source);
    writer_->on_record(test::header(pack(launch(1, 5, 1))), source);
    writer_->on_record(test::header(pack(pop(190, 1))), source);
    exit(source);
  }
  writer_->set_traced_processes(3);
  finish();
  EXPECT_EQ(writer_->counts().idle_processes, 1u);
  EXPECT_EQ(writer_->counts().nvtx_ranges, 2u);
  Reader db(path_);
  const auto processes = db.rows("SELECT id, rank, pid, ended FROM processes ORDER BY id");
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0][0].i, 1);
  EXPECT_EQ(processes[0][2].i, 101);
  EXPECT_EQ(processes[1][1].i, 1);
  EXPECT_EQ(db.one("SELECT count(*) FROM nvtx_ranges").i, 2);
  EXPECT_EQ(db.one("SELECT count(*) FROM nvtx_ranges WHERE start_ns = 100").i, 0);
  EXPECT_EQ(db.meta("idle_processes"), "1");
  EXPECT_EQ(db.meta("traced_processes"), "2");
  EXPECT_EQ(db.meta("ranks_ended"), "0:exited 1:exited");
  // The meta of the first traced process now describe the first one left.
  EXPECT_EQ(db.meta("traced_pid"), "101");
  EXPECT_EQ(db.meta("process.realtime_ns"), "1101");
  EXPECT_FALSE(db.meta("injector.own_time_ms"));
}

TEST_F(IdleProcessTest, ALoneIdleProcessStays) {
  announce(0, 0, 100);
  idle_then_exit(0);
  writer_->set_traced_processes(1);
  finish();
  EXPECT_EQ(writer_->counts().idle_processes, 0u);
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM processes").i, 1);
  EXPECT_EQ(db.one("SELECT count(*) FROM nvtx_ranges").i, 1);
  EXPECT_EQ(db.meta("traced_processes"), "1");
  EXPECT_EQ(db.meta("injector.own_time_ms"), "0.5");
}

}  // namespace
}  // namespace fpscope::test
