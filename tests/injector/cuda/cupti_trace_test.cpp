// CUPTI activity on its way into a trace, without a GPU: activity structs as libfpscope_gpu.so
// hands them out become wire records (fpscope/cupti_wire.h), the collector's TraceWriter stores
// them, and the cuda_* tables hold exactly what was reported, on the monotonic clock.
#include <gtest/gtest.h>

#include "temp_path.h"
#include <sqlite3.h>

#include <cstdio>
#include <string>
#include <unistd.h>

#include "fpscope/cupti_wire.h"
#include "fpscope/collector/trace_writer.h"

namespace fpscope_gpu_test {
namespace {

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) { sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr); }
  ~Db() { sqlite3_close(db); }
  // The first row of `sql` as text columns joined by '|'.
  std::string row(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return sqlite3_errmsg(db);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* t = sqlite3_column_text(st, i);
        out += (i ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
    }
    sqlite3_finalize(st);
    return out;
  }
};

void send_string(fpscope::TraceWriter& w, uint32_t id, const std::string& text) {
  fpscope::wire::StringRecord r{};
  r.h.type = fpscope::wire::RecordType::String;
  r.h.slots = 1;
  r.h.thread = 1;
  r.id = id;
  r.length = static_cast<uint32_t>(text.size());
  text.copy(r.bytes, sizeof r.bytes);
  w.on_record(&r.h);
}

TEST(CuptiTrace, ActivityLandsInTheCudaTables) {
  const fpscope::test::TempDir dir("fpscope-cupti-trace");
  const std::string path = (dir / "cupti_trace.sqlite").string();
  std::string error;
  auto writer = fpscope::TraceWriter::create(path, path + ".dumps", &error);
  ASSERT_TRUE(writer) << error;
  const int64_t offset = -1000;  // monotonic = CUPTI + offset
  send_string(*writer, 7, "_Z11scan_kernelPKvm");

  fpscope_gpu_kernel_activity k{5000, 9000, "ignored: the id is passed", 42, 0, 1, 13,
                                {512, 1, 1}, {256, 1, 1}, 2048, 40};
  auto kr = fpscope::gpu::kernel_record(k, 7, offset, 3);
  writer->on_record(&kr.h);
  fpscope_gpu_memcpy_activity c{10000, 12000, 4096, 43, 0, 13, 2, 2, 1};
  auto cr = fpscope::gpu::memcpy_record(c, offset, 3);
  writer->on_record(&cr.h);
  fpscope_gpu_memset_activity m{13000, 13500, 4096, 44, 0, 13, 0x3f};
  auto mr = fpscope::gpu::memset_record(m, offset, 3);
  writer->on_record(&mr.h);
  fpscope_gpu_memory_activity a{4000, 4096, 0x7f0000001000ull, 0, 13, 1, 2};
  auto ar = fpscope::gpu::memory_record(a, offset, 3);
  writer->on_record(&ar.h);
  a.operation = 2;
  a.t_ns = 20000;
  ar = fpscope::gpu::memory_record(a, offset, 3);
  writer->on_record(&ar.h);
  a.operation = 9;  // not an allocation or a release: refused
  ar = fpscope::gpu::memory_record(a, offset, 3);
  writer->on_record(&ar.h);
  ASSERT_TRUE(writer->finish()) << writer->error();
  EXPECT_EQ(writer->counts().cuda_activity, 5u);
  EXPECT_EQ(writer->counts().malformed_records, 1u);
  writer.reset();

  Db db(path);
  EXPECT_EQ(db.row("SELECT k.start_ns, k.end_ns, s.value, k.correlation_id, k.device, k.stream, grid_x,"
                   " grid_y, block_x FROM cuda_kernels k JOIN strings s ON s.id = k.name_id"),
            "4000|8000|_Z11scan_kernelPKvm|42|0|13|512|1|256");
  EXPECT_EQ(db.row("SELECT start_ns, end_ns, bytes, kind, src_kind, dst_kind, correlation_id FROM cuda_memcpy"),
            "9000|11000|4096|dtoh|2|1|43");
  EXPECT_EQ(db.row("SELECT start_ns, end_ns, bytes, value, correlation_id FROM cuda_memset"),
            "12000|12500|4096|63|44");
  EXPECT_EQ(db.row("SELECT group_concat(t_ns || ':' || kind || ':' || bytes || ':' || address, ',') FROM"
                   " (SELECT * FROM cuda_memory ORDER BY id)"),
            "3000:alloc:4096:139637976731648,19000:free:4096:139637976731648");
  EXPECT_EQ(db.row("SELECT value FROM meta WHERE key = 'cuda_activity'"), "5");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fpscope_gpu_test
