// Round trips through the trace writer: synthetic wire records in, the SQLite trace read back and
// every table, view and meta key checked against the values fed. Also the schema's identity
// (application_id, user_version), assembly of interleaved tensors, late records, missing strings,
// reading while writing, and a storage failure that keeps what was committed. The summaries kept
// while rows arrive: summary_rollup_test.cpp; the processes of a multi-process run:
// writer_processes_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "fpscope/contract/contract.h"
#include "fpscope/contract/embedded_sql.h"
#include "fpscope/common/sqlite.h"
#include "fpscope/collector/trace_writer.h"
#include "sqlite_reader.h"
#include "writer_fixture.h"

namespace fpscope {
namespace {

using test::blank;
using test::formats;
using test::kStrings;
using test::launch;
using test::pack;
using test::pop;
using test::push;
using test::Reader;
using test::Record;
using test::stats;
using test::WriterTest;
using wire::RecordType;
namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kViews[] = {"v_kernels", "v_tensors", "v_first_nonfinite", "v_step_ranges", "v_step_loss",
                                  "v_step_summary",
                                  "v_op_ranges", "v_loss_scale", "v_memory_deltas", "v_memory_live",
                                  "v_memory_timeline", "v_memory_peak_moment", "v_memory_peak", "v_tensor_recipes",
                                  "v_param_updates", "v_tensor_stores"};



// A whole step: ranges, an allocation, one launch with an input and an output tensor (the output
// with a NaN, dumped), a loss, a loss-scale backoff and a trap.
void feed_step(WriterTest& t, const std::function<void(const Record&)>& feed) {
  (void)t;
  for (uint32_t id = 1; id < std::size(kStrings); ++id) feed(test::string_record(id, kStrings[id]));
  auto process = blank<wire::ProcessRecord>(RecordType::Process);
  process.protocol = wire::kProtocolVersion;
  process.pid = 4242;
  process.start_ns = 1700000000123456789;
  process.mono_ns = 5000;
  process.exe = 11;
  process.options = 12;
  feed(pack(process));
  auto text = blank<wire::TextRecord>(RecordType::Text);
  text.key = 9;
  text.value = 10;
  feed(pack(text));
  feed(pack(push(100, 1, 1, 2, 7)));
  auto alloc = blank<wire::AllocRecord>(RecordType::Alloc);
  alloc.t_ns = 110;
  alloc.id = 3;
  alloc.bytes = 4096;
  alloc.name = 6;
  alloc.category = 0;
  feed(pack(alloc));
  feed(pack(push(120, 1, 2, 3)));
  feed(pack(push(130, 1, 3, 4)));

  auto in = stats(1, wire::Role::Input, 0, 6);
  in.tensor_id = 3;
  in.dtype = 1;
  in.ndim = 4;
  in.shape[0] = 8, in.shape[1] = 1, in.shape[2] = 3, in.shape[3] = 3;
  in.count = 72;
  in.min = -0.5, in.max = 0.75, in.absmax = 0.75, in.min_nonzero = 0.001, in.mean = 0.1, in.rms = 0.3;
  feed(pack(in));
  feed(pack(formats(1, 0, 0)));
  feed(test::histogram_record(1, 0, {{-10, 0, 2}, {-1, 0, 30}, {0, 0, 40}}));

  auto out = stats(1, wire::Role::Output, 0, 7);
  out.ndim = 2;
  out.shape[0] = 4, out.shape[1] = 5;
  out.count = 20, out.nan = 2, out.pos_inf = 1, out.zero = 3, out.subnormal = 1;
  out.min = -2, out.max = 3e5, out.absmax = 3e5, out.min_nonzero = 1e-40, out.mean = kNaN, out.rms = 7;
  feed(pack(out));
  auto nf = blank<wire::NonfiniteRecord>(RecordType::Nonfinite);
  nf.seq = 1;
  nf.role_slot = 0x80;
  nf.first_index = 5;
  nf.first_bits = 0x7fc00000;
  nf.kind = wire::NonfiniteKind::NaN;
  nf.origin = 1;
  feed(pack(nf));
  auto dump = blank<wire::DumpRecord>(RecordType::Dump);
  dump.seq = 1;
  dump.role_slot = 0x80;
  dump.path = 14;
  feed(pack(dump));
  auto l = launch(1, 5, 7);
  l.start_ns = 140, l.end_ns = 150, l.layer = 4, l.phase = 3, l.n_inputs = 1, l.n_outputs = 1;
  feed(pack(l));
  feed(pack(pop(160, 1)));
  feed(pack(pop(170, 1)));
  auto free_rec = blank<wire::FreeRecord>(RecordType::Free);
  free_rec.t_ns = 180;
  free_rec.id = 3;
  free_rec.bytes = 4096;
  feed(pack(free_rec));
  auto loss = blank<wire::ScalarRecord>(RecordType::Scalar);
  loss.t_ns = 190, loss.step = 7, loss.value = 0.25, loss.name = 8;
  feed(pack(loss));
  loss.t_ns = 191, loss.step = -1, loss.value = kNaN;
  feed(pack(loss));
  auto scale = blank<wire::LossScaleRecord>(RecordType::LossScale);
  scale.seq = 2, scale.t_ns = 195, scale.step = 7, scale.scale_before = 65536, scale.scale_after = 32768;
  scale.growth_tracker = 0, scale.found_inf = 1, scale.event = wire::ScaleEvent::Backoff;
  feed(pack(scale));
  feed(pack(pop(200, 1)));
  feed(pack(push(210, 0, 0, 2)));  // default domain, never closed
  auto trap = blank<wire::TrapRecord>(RecordType::Trap);
  trap.seq = 1, trap.t_ns = 220, trap.reason = 13;
  feed(pack(trap));
}

TEST_F(WriterTest, FullStepRoundTrip) {
  feed_step(*this, [this](const Record& r) { feed(r); });
  finish();
  EXPECT_EQ(writer_->counts().records, fed_);
  EXPECT_TRUE(writer_->trap().seen);
  EXPECT_EQ(writer_->trap().message, "first NaN in conv1.out");
  Reader db(path_);

  for (uint32_t id = 1; id < std::size(kStrings); ++id)
    EXPECT_EQ(db.text("SELECT value FROM strings WHERE id = " + std::to_string(id)), kStrings[id]);
  const auto roles = db.rows("SELECT DISTINCT role FROM tensors ORDER BY role");
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0][0].s, contract::role_name(contract::Role::Input));
  EXPECT_EQ(roles[1][0].s, contract::role_name(contract::Role::Output));

  auto ranges = db.rows("SELECT id, start_ns, end_ns, thread, depth, kind, name_id, domain_id, step FROM nvtx_ranges ORDER BY id");
  ASSERT_EQ(ranges.size(), 4u);
  const int64_t expect_ranges[4][5] = {{1, 100, 200, 0, 2}, {2, 120, 170, 1, 3}, {3, 130, 160, 2, 4}, {4, 210, -1, 0, 2}};
  const char* kinds[] = {"step", "phase", "layer", "range"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ranges[i][0].i, expect_ranges[i][0]);
    EXPECT_EQ(ranges[i][1].i, expect_ranges[i][1]);
    if (expect_ranges[i][2] < 0) EXPECT_TRUE(ranges[i][2].is_null());
    else EXPECT_EQ(ranges[i][2].i, expect_ranges[i][2]);
    EXPECT_EQ(ranges[i][3].i, 1);
    EXPECT_EQ(ranges[i][4].i, expect_ranges[i][3]);
    EXPECT_EQ(ranges[i][5].s, kinds[i]);
    EXPECT_EQ(ranges[i][6].i, expect_ranges[i][4]);
  }
  EXPECT_EQ(ranges[0][7].i, 1);
  EXPECT_TRUE(ranges[3][7].is_null());
  EXPECT_EQ(ranges[0][8].i, 7);
  EXPECT_TRUE(ranges[1][8].is_null());

  auto k = db.rows("SELECT id, start_ns, end_ns, name_id, layer_id, phase_id, step, thread, device, status, sampled FROM kernels");
  ASSERT_EQ(k.size(), 1u);
  const int64_t expect_kernel[] = {1, 140, 150, 5, 4, 3, 7, 1, 0, 0, 1};
  for (int c = 0; c < 11; ++c) EXPECT_EQ(k[0][c].i, expect_kernel[c]) << "column " << c;

  auto t = db.rows("SELECT * FROM tensors ORDER BY id");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0][0].i, 1);
  EXPECT_EQ(t[0][1].i, 1);
  EXPECT_EQ(t[0][2].s, "in");
  EXPECT_EQ(t[0][3].i, 0);
  EXPECT_EQ(t[0][4].i, 3);
  EXPECT_EQ(t[0][5].i, 6);
  EXPECT_EQ(t[0][6].i, 1);
  EXPECT_EQ(t[0][7].s, "[8,1,3,3]");
  EXPECT_EQ(t[0][8].i, 72);
  for (int c = 9; c <= 13; ++c) EXPECT_EQ(t[0][c].i, 0);
  const double in_values[] = {-0.5, 0.75, 0.75, 0.001, 0.1, 0.3};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(t[0][14 + c].d, in_values[c]);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(t[0][20 + c].i, c) << "format column " << c;
  EXPECT_EQ(t[0][36].s, R"({"-10":2,"-1":30,"0":40})");

  EXPECT_EQ(t[1][2].s, "out");
  EXPECT_TRUE(t[1][4].is_null());  // no allocation id
  EXPECT_EQ(t[1][7].s, "[4,5]");
  const int64_t out_counts[] = {20, 2, 1, 0, 3, 1};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(t[1][8 + c].i, out_counts[c]);
  EXPECT_EQ(t[1][14].d, -2);
  EXPECT_EQ(t[1][17].d, 1e-40);
  EXPECT_TRUE(t[1][18].is_null());  // mean was NaN
  for (int c = 20; c <= 36; ++c) EXPECT_TRUE(t[1][c].is_null()) << "column " << c;

  auto n = db.rows("SELECT tensor_id, kernel_id, kind, first_index, first_bits, origin FROM nonfinite");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0][0].i, 2);
  EXPECT_EQ(n[0][1].i, 1);
  EXPECT_EQ(n[0][2].s, "nan");
  EXPECT_EQ(n[0][3].i, 5);
  EXPECT_EQ(n[0][4].i, 0x7fc00000);
  EXPECT_EQ(n[0][5].i, 1);

  auto d = db.rows("SELECT tensor_id, path FROM dumps");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0][0].i, 2);
  EXPECT_EQ(d[0][1].s, "t.sqlite.dumps/conv1.out.npy");

  auto m = db.rows("SELECT t_ns, kind, alloc_id, bytes, category, name_id, device, step FROM memory_events ORDER BY id");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0][1].s, "alloc");
  EXPECT_EQ(m[1][1].s, "free");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(m[r][0].i, r == 0 ? 110 : 180);
    EXPECT_EQ(m[r][2].i, 3);
    EXPECT_EQ(m[r][3].i, 4096);
    EXPECT_EQ(m[r][4].i, 0);
    EXPECT_EQ(m[r][5].i, 6);
    EXPECT_EQ(m[r][7].i, 7);  // inside step 7
  }

  auto s = db.rows("SELECT t_ns, step, name_id, value FROM scalars ORDER BY id");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0][3].d, 0.25);
  EXPECT_EQ(s[0][1].i, 7);
  EXPECT_TRUE(s[1][1].is_null());
  EXPECT_TRUE(s[1][3].is_null());  // NaN

  auto ls = db.rows("SELECT kernel_id, t_ns, step, scale_before, scale_after, found_inf, skipped, event, growth_tracker FROM loss_scale");
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0][0].i, 2);
  EXPECT_EQ(ls[0][3].d, 65536);
  EXPECT_EQ(ls[0][4].d, 32768);
  EXPECT_EQ(ls[0][5].i, 1);
  EXPECT_EQ(ls[0][6].i, 1);
  EXPECT_EQ(ls[0][7].s, "backoff");

  EXPECT_EQ(db.meta("config.precision"), "amp-fp16");
  EXPECT_EQ(db.meta("traced_pid"), "4242");
  EXPECT_EQ(db.meta("traced_exe"), "/usr/bin/mptrain");
  EXPECT_EQ(db.meta("injector_options"), "every=1");
  EXPECT_EQ(db.meta("process.realtime_ns"), "1700000000123456789");
  EXPECT_EQ(db.meta("trap.message"), "first NaN in conv1.out");
  EXPECT_EQ(db.meta("trap.kernel_id"), "1");
  EXPECT_EQ(db.meta("kernels"), "1");
  EXPECT_EQ(db.meta("tensors"), "2");
  EXPECT_EQ(db.meta("events"), "9");  // 4 ranges, 2 memory events, 1 loss scale, 2 scalars
  EXPECT_EQ(db.meta("records"), std::to_string(fed_));
  EXPECT_EQ(db.meta("unmatched_events"), "0");
  EXPECT_EQ(db.meta("malformed_records"), "0");
}

TEST_F(WriterTest, ViewsAnswerFromTheRows) {
  feed_step(*this, [this](const Record& r) { feed(r); });
  finish();
  Reader db(path_);
  auto vk = db.rows("SELECT kernel, layer, phase, duration_ns, step FROM v_kernels");
  ASSERT_EQ(vk.size(), 1u);
  EXPECT_EQ(vk[0][0].s, "conv2d_forward");
  EXPECT_EQ(vk[0][1].s, "conv1");
  EXPECT_EQ(vk[0][2].s, "forward");
  EXPECT_EQ(vk[0][3].i, 10);
  auto first = db.rows("SELECT kernel, layer, step, tensor, \"index\", kind FROM v_first_nonfinite");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0][0].s, "conv2d_forward");
  EXPECT_EQ(first[0][2].i, 7);
  EXPECT_EQ(first[0][3].s, "conv1.out");
  EXPECT_EQ(first[0][4].i, 5);
  EXPECT_EQ(first[0][5].s, "nan");
  auto steps = db.rows("SELECT step, start_ns, end_ns, loss, loss_scale, skipped, nan_values, inf_values FROM v_step_summary");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0][0].i, 7);
  EXPECT_EQ(steps[0][1].i, 100);
  EXPECT_EQ(steps[0][2].i, 200);
  EXPECT_EQ(steps[0][3].d, 0.25);
  EXPECT_EQ(steps[0][4].d, 65536);
  EXPECT_EQ(steps[0][5].i, 1);
  EXPECT_EQ(steps[0][6].i, 2);
  EXPECT_EQ(steps[0][7].i, 1);
  auto peak = db.rows("SELECT category, bytes, peak_t_ns, peak_total_bytes FROM v_memory_peak WHERE category = 'weight'");
  ASSERT_EQ(peak.size(), 1u);
  EXPECT_EQ(peak[0][1].i, 4096);
  EXPECT_EQ(peak[0][2].i, 110);
  EXPECT_EQ(peak[0][3].i, 4096);
  EXPECT_DOUBLE_EQ(db.one("SELECT dynamic_range_log2 FROM v_tensors WHERE id = 1").d, std::log2(0.75) - std::log2(0.001));
  EXPECT_EQ(db.one("SELECT tensor FROM v_tensors WHERE id = 2").s, "conv1.out");
  EXPECT_DOUBLE_EQ(db.one("SELECT f16_underflow_share FROM v_op_ranges WHERE role = 'in'").d, 1.0 / 72);
  EXPECT_TRUE(db.one("SELECT f16_underflow_share FROM v_op_ranges WHERE role = 'out'").is_null());
  auto scale = db.rows("SELECT step, scale, event, scale_after FROM v_loss_scale");
  ASSERT_EQ(scale.size(), 1u);
  EXPECT_EQ(scale[0][2].s, "backoff");
  EXPECT_EQ(scale[0][3].d, 32768);
}

TEST_F(WriterTest, SchemaIdentityAndIntegrity) {
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("PRAGMA application_id"), 1179669315);  // "FPSC"
  EXPECT_EQ(db.integer("PRAGMA user_version"), 6);
  EXPECT_EQ(db.text("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db.text("PRAGMA journal_mode"), "delete");  // a finished trace needs no -wal file
  EXPECT_EQ(db.meta("kernels"), "0");
  for (const char* view : kViews) db.rows(std::string("SELECT * FROM ") + view);  // each must run
  // The schema's lookup rows are the trace contract's lists, id for id.
  const auto dtypes = db.rows("SELECT id, name FROM dtypes ORDER BY id");
  ASSERT_EQ(dtypes.size(), static_cast<size_t>(contract::kDtypeCount));
  for (int i = 0; i < contract::kDtypeCount; ++i) {
    EXPECT_EQ(dtypes[static_cast<size_t>(i)][0].i, i);
    EXPECT_EQ(dtypes[static_cast<size_t>(i)][1].s, contract::kDtypeNames[static_cast<size_t>(i)]);
  }
  const auto categories = db.rows("SELECT id, name FROM categories ORDER BY id");
  ASSERT_EQ(categories.size(), static_cast<size_t>(contract::kMemoryCategoryCount));
  for (int i = 0; i < contract::kMemoryCategoryCount; ++i) {
    EXPECT_EQ(categories[static_cast<size_t>(i)][0].i, i);
    EXPECT_EQ(categories[static_cast<size_t>(i)][1].s, contract::kMemoryCategoryNames[static_cast<size_t>(i)]);
  }
  // tensors.role holds the contract's words and nothing else (the schema's CHECK).
  const auto roles = db.text("SELECT sql FROM sqlite_schema WHERE name = 'tensors'");
  EXPECT_NE(roles.find(std::string("CHECK (role IN ('") + contract::role_name(contract::Role::Input) + "', '" +
                       contract::role_name(contract::Role::Output) + "'))"),
            std::string::npos)
      << roles;
#if FPSCOPE_TEST_HAS_FINALIZE
  EXPECT_EQ(db.meta("finalize_status"), "ok");
#else
  EXPECT_FALSE(db.meta("finalize_status"));
#endif
}

// The empty trace the build made (fpscope/collector/trace_template.h) is what running the schema gives: the
// same tables, indexes and views declared alike, the same lookup rows, 32 KiB pages, WAL mode.
TEST_F(WriterTest, NewTraceIsTheSchemaAsItsStatementsMakeIt) {
  ASSERT_TRUE(writer_->commit());
  sql::Database made(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
  made.exec(embedded::kTraceSchemaSql);
  const std::string objects = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name";
  const std::string lookups = "SELECT 'dtypes', id, name FROM dtypes UNION ALL SELECT 'categories', id, name FROM categories";
  auto rows_of = [](const sql::Database& db, const std::string& query) {
    std::vector<std::string> rows;
    sql::Statement st(db, query);
    while (st.step()) {
      std::string row;
      for (int c = 0; c < st.columns(); ++c) row += st.text(c) + "|";
      rows.push_back(row);
    }
    return rows;
  };
  Reader trace(path_);
  sql::Database written(path_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  EXPECT_EQ(rows_of(written, objects), rows_of(made, objects));
  EXPECT_EQ(rows_of(written, lookups), rows_of(made, lookups));
  EXPECT_EQ(trace.integer("PRAGMA page_size"), 32768);
  EXPECT_EQ(trace.integer("PRAGMA user_version"), *made.query_int("PRAGMA user_version"));
  EXPECT_EQ(trace.integer("PRAGMA application_id"), *made.query_int("PRAGMA application_id"));
  EXPECT_EQ(trace.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(trace.text("PRAGMA integrity_check"), "ok");
}

// A trace is never written over, and a folder it cannot be made in is said so; neither leaves a file.
TEST(WriterCreate, RefusesAnExistingFileAndSaysWhyItCannotCreate) {
  fpscope::test::TempDir temp{"fpscope-writer-create"};
  const std::string existing = (temp.path() / "there.sqlite").string();
  { std::ofstream(existing) << "keep me"; }
  std::string error;
  EXPECT_FALSE(TraceWriter::create(existing, "d", &error));
  EXPECT_EQ(error, existing + " already exists");
  std::ifstream kept(existing);
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep me");
  const std::string nowhere = (temp.path() / "no-such-folder" / "t.sqlite").string();
  EXPECT_FALSE(TraceWriter::create(nowhere, "d", &error));
  EXPECT_EQ(error, "cannot create trace " + nowhere + ": No such file or directory");
  EXPECT_FALSE(fs::exists(nowhere));
}

// The memory timeline against a recomputation here: events of every category of the contract, some
// arriving out of time order and some at the same instant, sorted by (t_ns, id) and summed.
TEST_F(WriterTest, MemoryTimelineCoversEveryCategoryInTimeOrder) {
  struct Event {
    int64_t t_ns;
    bool alloc;
    uint64_t id, bytes;
    uint8_t category;
  };
  std::vector<Event> events;
  uint64_t next_id = 1;
  for (int round = 0; round < 4; ++round) {
    for (uint8_t c = 0; c < contract::kMemoryCategoryCount; ++c) {
      const int64_t t = 1000 + 100 * round + 7 * c;
      // Arrival out of time order: the later-numbered category's event carries an earlier time.
      events.push_back({c % 2 ? t - 50 : t, true, next_id++, 1000u * (c + 1) + static_cast<uint64_t>(round), c});
    }
    // Free the first allocation of this round at the same instant as another event.
    const Event& first = events[events.size() - contract::kMemoryCategoryCount];
    events.push_back({events.back().t_ns, false, first.id, first.bytes, first.category});
  }
  for (const Event& e : events) {
    if (e.alloc) {
      auto a = blank<wire::AllocRecord>(RecordType::Alloc);
      a.t_ns = e.t_ns;
      a.id = e.id;
      a.bytes = e.bytes;
      a.category = e.category;
      feed(pack(a));
    } else {
      auto f = blank<wire::FreeRecord>(RecordType::Free);
      f.t_ns = e.t_ns;
      f.id = e.id;
      f.bytes = e.bytes;
      feed(pack(f));
    }
  }
  finish();
  Reader db(path_);
  // Rows are numbered in arrival order; the timeline orders by (t_ns, id).
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < events.size(); ++i) order.emplace_back(events[i].t_ns, i);
  std::sort(order.begin(), order.end());
  const auto rows = db.rows("SELECT t_ns, category, delta, live, category_live FROM v_memory_timeline");
  const auto live = db.rows("SELECT live FROM v_memory_live ORDER BY t_ns, id");
  ASSERT_EQ(rows.size(), events.size());
  ASSERT_EQ(live.size(), events.size());
  int64_t total = 0;
  std::array<int64_t, contract::kMemoryCategoryCount> by_category{};
  std::set<int64_t> categories_seen;
  for (size_t r = 0; r < order.size(); ++r) {
    const Event& e = events[order[r].second];
    // A free's category is its allocation's.
    const int64_t delta = e.alloc ? static_cast<int64_t>(e.bytes) : -static_cast<int64_t>(e.bytes);
    total += delta;
    by_category[e.category] += delta;
    categories_seen.insert(e.category);
    EXPECT_EQ(rows[r][0].i, e.t_ns) << r;
    EXPECT_EQ(rows[r][1].i, e.category) << r;
    EXPECT_EQ(rows[r][2].i, delta) << r;
    EXPECT_EQ(rows[r][3].i, total) << r;
    EXPECT_EQ(live[r][0].i, total) << r;
    EXPECT_EQ(rows[r][4].i, by_category[e.category]) << r;
  }
  EXPECT_EQ(categories_seen.size(), static_cast<size_t>(contract::kMemoryCategoryCount));
}

TEST_F(WriterTest, InterleavedThreadsAssembleTheirOwnTensors) {
  feed(test::string_record(1, "a"));
  feed(stats(10, wire::Role::Output, 0, 1, /*thread=*/1));
  feed(stats(20, wire::Role::Output, 1, 1, /*thread=*/2));
  feed(formats(20, 0x81, 100, /*thread=*/2));
  feed(formats(10, 0x80, 200, /*thread=*/1));
  feed(test::histogram_record(10, 0x80, {{3, 0, 9}}, /*thread=*/1));
  feed(launch(10, 1, 0));
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT f16_overflow FROM tensors WHERE kernel_id = 10"), 200);
  EXPECT_EQ(db.integer("SELECT f16_overflow FROM tensors WHERE kernel_id = 20"), 100);
  EXPECT_EQ(db.integer("SELECT e5m2_near_max FROM tensors WHERE kernel_id = 20"), 115);
  EXPECT_EQ(db.text("SELECT exp_hist FROM tensors WHERE kernel_id = 10"), R"({"3":9})");
  EXPECT_TRUE(db.one("SELECT exp_hist FROM tensors WHERE kernel_id = 20").is_null());
}

TEST_F(WriterTest, FormatSharesCountOnlyMeasuredTensors) {
  feed(test::string_record(1, "k"));
  feed(stats(1, wire::Role::Output, 0, 1));  // 10 elements with format counts
  auto measured = formats(1, 0x80, 0);
  measured.formats[0].underflow = 1;
  feed(measured);
  feed(stats(2, wire::Role::Output, 0, 1));  // 10 elements without (an integer tensor, say)
  feed(launch(1, 1, 0));
  feed(launch(2, 1, 0));
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT elements FROM v_op_ranges"), 20);
  EXPECT_DOUBLE_EQ(db.one("SELECT f16_underflow_share FROM v_op_ranges").d, 0.1);
}

TEST_F(WriterTest, RecordsArrivingAfterTheirTensorWasWrittenUpdateIt) {
  feed(test::string_record(1, "a"));
  feed(stats(5, wire::Role::Input, 2, 1));
  ASSERT_TRUE(writer_->commit());  // writes the tensor as it is
  feed(formats(5, 2, 7));
  feed(test::histogram_record(5, 2, {{-3, 0, 4}}));
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT f16_overflow FROM tensors"), 7);
  EXPECT_EQ(db.integer("SELECT e5m2_near_max FROM tensors"), 22);
  EXPECT_EQ(db.text("SELECT exp_hist FROM tensors"), R"({"-3":4})");
}

TEST_F(WriterTest, InjectorTextGoesToMetaUnderItsOwnKey) {
  feed(test::string_record(1, "injector.cupti_status"));
  feed(test::string_record(2, "unavailable: no device"));
  feed(test::string_record(3, "precision"));
  feed(test::string_record(4, "bf16"));
  for (auto [key, value] : {std::pair<uint32_t, uint32_t>{1, 2}, {3, 4}}) {
    auto text = blank<wire::TextRecord>(RecordType::Text);
    text.key = key;
    text.value = value;
    feed(text);
  }
  finish();
  Reader db(path_);
  EXPECT_EQ(db.meta("injector.cupti_status"), "unavailable: no device");
  EXPECT_EQ(db.meta("config.precision"), "bf16");
  EXPECT_EQ(db.integer("SELECT count(*) FROM meta WHERE key = 'config.injector.cupti_status'"), 0);
}

TEST_F(WriterTest, MissingStringsAndUnmatchedEventsAreCountedNotFatal) {
  feed(launch(1, 77, -1));  // string 77 never arrives (dropped)
  feed(pop(5, 0));          // nothing open
  auto free_rec = blank<wire::FreeRecord>(RecordType::Free);
  free_rec.id = 99;
  feed(free_rec);
  auto bad = blank<wire::TensorHistogramRecord>(RecordType::TensorHistogram);
  bad.bins = 1000;  // more bins than its one slot can hold
  feed(bad);
  finish();
  Reader db(path_);
  // The kernel still joins its name: a placeholder that gives the trace's id of the lost string.
  EXPECT_EQ(db.text("SELECT kernel FROM v_kernels"),
            "<missing string " + std::to_string(db.integer("SELECT name_id FROM kernels")) + ">");
  EXPECT_TRUE(db.one("SELECT step FROM kernels").is_null());
  EXPECT_EQ(db.meta("unmatched_events"), "2");
  EXPECT_EQ(db.meta("malformed_records"), "1");
  EXPECT_EQ(db.integer("SELECT count(*) FROM memory_events"), 0);
}

TEST_F(WriterTest, TraceIsReadableWhileItIsWritten) {
  feed(test::string_record(1, "k"));
  for (uint64_t seq = 1; seq <= 100; ++seq) feed(launch(seq, 1, 0));
  ASSERT_TRUE(writer_->commit());
  {
    Reader live(path_);
    EXPECT_EQ(live.integer("SELECT count(*) FROM kernels"), 100);
    EXPECT_EQ(live.text("PRAGMA journal_mode"), "wal");
  }
  for (uint64_t seq = 101; seq <= 150; ++seq) feed(launch(seq, 1, 0));
  ASSERT_TRUE(writer_->commit_if_due());  // a fresh batch stays open
  EXPECT_EQ(Reader(path_).integer("SELECT count(*) FROM kernels"), 100);
  std::this_thread::sleep_for(TraceWriter::kBatchInterval + std::chrono::milliseconds(10));
  ASSERT_TRUE(writer_->commit_if_due());  // an old one is committed
  EXPECT_EQ(Reader(path_).integer("SELECT count(*) FROM kernels"), 150);
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM kernels"), 150);
}

TEST_F(WriterTest, LongStringsSpanSeveralSlots) {
  std::string name(1000, 'x');
  name += "end";
  feed(test::string_record(1, name));
  feed(launch(1, 1, 3));
  finish();
  Reader db(path_);
  EXPECT_EQ(db.text("SELECT kernel FROM v_kernels"), name);
}

// A full disk in the middle of a run: the writer stops, keeps what was committed, and the trace
// stays a valid database. RLIMIT_FSIZE makes the file system refuse growth, like a full disk.
TEST_F(WriterTest, StorageFailureKeepsWhatWasCommitted) {
  writer_.reset();
  fs::remove(path_);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    std::string error;
    auto w = TraceWriter::create(path_, "", &error);
    if (!w) _exit(10);
    auto s = test::string_record(1, "k");
    w->on_record(test::header(s));
    for (uint64_t seq = 1; seq <= 100; ++seq) w->on_record(test::header(pack(launch(seq, 1, 0))));
    if (!w->commit()) _exit(11);
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(fs::file_size(path_) + 64 * 1024);
    setrlimit(RLIMIT_FSIZE, &limit);
    for (uint64_t seq = 101; seq <= 200000 && !w->failed(); ++seq) w->on_record(test::header(pack(launch(seq, 1, 0))));
    w->commit();
    if (!w->failed()) _exit(12);
    w->on_record(test::header(pack(launch(999999, 1, 0))));
    _exit(w->counts().lost_to_storage >= 1 && !w->finish() ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  Reader db(path_);
  EXPECT_EQ(db.text("PRAGMA integrity_check"), "ok");
  const int64_t kept = db.integer("SELECT count(*) FROM kernels");
  EXPECT_GE(kept, 100);
  EXPECT_LT(kept, 200000);
  EXPECT_EQ(db.integer("SELECT max(id) FROM kernels"), kept);  // a prefix: nothing torn out of order
}

// The schema's SQL cannot include the contract: the phase names v_step_ranges reads (which step
// ranges are training steps) are held to the contract's here.
TEST(TraceSchema, NamesTheTrainingPhasesAsTheContractDoes) {
  const std::string sql = embedded::kTraceSchemaSql;
  EXPECT_NE(sql.find("n.value IN ('" + std::string(contract::kPhaseForward) + "', '" + contract::kPhaseBackward +
                     "', '" + contract::kPhaseOptimizer + "')"),
            std::string::npos);
}

}  // namespace
}  // namespace fpscope
