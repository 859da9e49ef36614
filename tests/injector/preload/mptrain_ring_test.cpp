// End-to-end tests of the injector inside mptrain: the trainer runs with libfpscope_inject.so
// preloaded and the test reads the ring itself (traced_child.h), so these hold without the
// collector's SQLite side. Label `injection`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "traced_child.h"
#include "temp_path.h"

namespace fpscope::inject {
namespace {

using testing::DecodedTrace;
using testing::run_traced;
using testing::TracedRun;
using wire::RecordType;

namespace fs = std::filesystem;

std::vector<std::string> mptrain(std::vector<std::string> extra) {
  std::vector<std::string> argv = {FPSCOPE_MPTRAIN, "--model", "cnn", "--data-dir", FPSCOPE_TEST_DATA_DIR,
                                   "--train-subset", "256", "--test-subset", "64", "--threads", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TracedRun traced(std::vector<std::string> extra, std::map<std::string, std::string> env = {}) {
  TracedRun run = run_traced(FPSCOPE_INJECT_LIBRARY, mptrain(std::move(extra)), env);
  EXPECT_EQ(run.error, "");
  EXPECT_EQ(run.dropped, 0u);
  return run;
}

std::map<uint64_t, wire::LaunchRecord> launches_by_seq(const DecodedTrace& t) {
  std::map<uint64_t, wire::LaunchRecord> m;
  for (const auto& l : t.all<wire::LaunchRecord>(RecordType::Launch)) m[l.seq] = l;
  return m;
}

std::vector<double> losses_of(const fs::path& metrics) {
  std::ifstream in(metrics);
  const auto j = nlohmann::json::parse(in);
  return j.at("losses").get<std::vector<double>>();
}

class MptrainTraced : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(FPSCOPE_TEST_DATA_DIR) / "train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "FashionMNIST is not in " << FPSCOPE_TEST_DATA_DIR << " (scripts/install-deps.sh)";
    dir_ = temp_.path();
  }
  fpscope::test::TempDir temp_{"fpscope-inject-e2e"};  // gtest makes a fixture per test: one folder each
  fs::path dir_;
};

TEST_F(MptrainTraced, LossesAreBitIdenticalWithAndWithoutTracing) {
  const fs::path plain = dir_ / "plain.json", with = dir_ / "traced.json";
  TracedRun untraced = run_traced(FPSCOPE_INJECT_LIBRARY, mptrain({"--metrics-json", plain.string()}),
                                  {{"LD_PRELOAD", ""}, {"NVTX_INJECTION64_PATH", ""}}, /*with_ring=*/false);
  ASSERT_EQ(untraced.wait_status, 0) << untraced.stderr_text;
  TracedRun run = traced({"--metrics-json", with.string()});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  const auto a = losses_of(plain), b = losses_of(with);
  ASSERT_EQ(a.size(), 8u);  // 256 images, batches of 32
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0);
  // The trace saw every step's loss through mpt_log_scalar, with the same value.
  std::vector<double> logged;
  for (const auto& s : run.trace.all<wire::ScalarRecord>(RecordType::Scalar))
    if (run.trace.text(s.name) == "loss") logged.push_back(s.value);
  EXPECT_EQ(logged, b);
  EXPECT_EQ(run.trace.count(RecordType::Process), 1u);
  EXPECT_GT(run.trace.count(RecordType::Alloc), 0u);
  // Every launch of a training step is attributed to its step, phase and layer.
  size_t attributed = 0;
  for (const auto& l : run.trace.all<wire::LaunchRecord>(RecordType::Launch))
    attributed += l.step >= 0 && l.phase != 0 && l.sampled == 1;
  EXPECT_GT(attributed, 100u);
}

TEST_F(MptrainTraced, PlantedNanIsFoundAtItsOriginAndTellsPropagationApart) {
  TracedRun run = traced({"--fault", "nan@fc1:3:17"});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  const auto launches = launches_by_seq(run.trace);
  const auto nonfinite = run.trace.all<wire::NonfiniteRecord>(RecordType::Nonfinite);
  std::vector<wire::NonfiniteRecord> origins;
  for (const auto& n : nonfinite)
    if (n.origin) origins.push_back(n);
  ASSERT_EQ(origins.size(), 1u);
  const auto& first = origins[0];
  const auto& l = launches.at(first.seq);
  EXPECT_EQ(run.trace.text(l.kernel), "inject_fault");
  EXPECT_EQ(run.trace.text(l.layer), "fc1");
  EXPECT_EQ(run.trace.text(l.phase), "forward");
  EXPECT_EQ(l.step, 3);
  EXPECT_EQ(first.first_index, 17u);
  EXPECT_EQ(first.kind, wire::NonfiniteKind::NaN);
  // Downstream kernels hold NaN too, passed on to them.
  size_t downstream = 0;
  for (const auto& n : nonfinite) {
    if (n.seq == first.seq) continue;
    EXPECT_GT(n.seq, first.seq);
    EXPECT_EQ(n.origin, 0);
    ++downstream;
  }
  EXPECT_GT(downstream, 10u);
}

TEST_F(MptrainTraced, EveryTenMeasuresOnlyStepsDivisibleByTen) {
  TracedRun run = traced({"--train-subset", "704"}, {{"FPSCOPE_EVERY", "10"}});  // 22 steps
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  std::set<int64_t> sampled_steps, steps;
  std::set<uint64_t> sampled_seqs;
  for (const auto& l : run.trace.all<wire::LaunchRecord>(RecordType::Launch)) {
    steps.insert(l.step);
    EXPECT_EQ(l.sampled, l.step >= 0 && l.step % 10 == 0 ? 1 : 0) << "step " << l.step;
    if (l.sampled) {
      sampled_steps.insert(l.step);
      sampled_seqs.insert(l.seq);
    }
  }
  EXPECT_EQ(sampled_steps, (std::set<int64_t>{0, 10, 20}));
  EXPECT_TRUE(steps.count(21));
  for (const auto& s : run.trace.all<wire::TensorStatsRecord>(RecordType::TensorStats))
    EXPECT_TRUE(sampled_seqs.count(s.seq)) << "tensor of unsampled launch " << s.seq;
  EXPECT_GT(run.trace.count(RecordType::TensorStats), 0u);
}

TEST_F(MptrainTraced, TrapStopsTheTrainerAtTheOrigin) {
  TracedRun run = traced({"--fault", "nan@fc1:3:17"}, {{"FPSCOPE_TRAP", "nan"}});
  ASSERT_TRUE(WIFSIGNALED(run.wait_status)) << "status " << run.wait_status << ": " << run.stderr_text;
  EXPECT_EQ(WTERMSIG(run.wait_status), SIGTRAP);
  const std::string expected_start = "fpscope: trap: first NaN made by inject_fault (layer fc1, step 3, phase forward) in ";
  EXPECT_NE(run.stderr_text.find(expected_start), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find(" at index 17\n"), std::string::npos) << run.stderr_text;
  const auto traps = run.trace.all<wire::TrapRecord>(RecordType::Trap);
  ASSERT_EQ(traps.size(), 1u);
  const std::string reason = run.trace.text(traps[0].reason);
  EXPECT_NE(run.stderr_text.find(reason + "\n"), std::string::npos);
  EXPECT_EQ(run.trace.text(launches_by_seq(run.trace).at(traps[0].seq).kernel), "inject_fault");
}

// Runs the numpy reference over the dumped files: one JSON object per file.
std::vector<nlohmann::json> numpy_stats(const std::vector<fs::path>& files) {
  std::string cmd = std::string(FPSCOPE_REFERENCE_PYTHON) + " " + FPSCOPE_NPY_STATS_SCRIPT;
  for (const auto& f : files) cmd += " " + f.string();
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::vector<nlohmann::json> out;
  char line[1 << 16];
  while (pipe && fgets(line, sizeof line, pipe.get())) out.push_back(nlohmann::json::parse(line));
  return out;
}

void expect_same(double recorded, const nlohmann::json& reference, const char* what) {
  if (reference.is_null()) {
    EXPECT_TRUE(std::isnan(recorded)) << what;
  } else {
    EXPECT_EQ(recorded, reference.get<double>()) << what;
  }
}

TEST_F(MptrainTraced, DumpedTensorsMatchTheirStatisticsInNumpy) {
  TracedRun run = traced({"--precision", "amp-fp16", "--loss-scale", "dynamic"},
                         {{"FPSCOPE_DUMP", "step=2,layer=fc1"}, {"FPSCOPE_DUMP_DIR", dir_.string()}});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  const auto dumps = run.trace.all<wire::DumpRecord>(RecordType::Dump);
  ASSERT_GE(dumps.size(), 6u);
  std::map<std::pair<uint64_t, uint8_t>, wire::TensorStatsRecord> stats;
  for (const auto& s : run.trace.all<wire::TensorStatsRecord>(RecordType::TensorStats))
    stats[{s.seq, static_cast<uint8_t>((static_cast<unsigned>(s.role) << 7) | s.slot)}] = s;
  std::map<std::pair<uint64_t, uint8_t>, wire::TensorFormatsRecord> formats;
  for (const auto& f : run.trace.all<wire::TensorFormatsRecord>(RecordType::TensorFormats))
    formats[{f.seq, f.role_slot}] = f;
  std::vector<fs::path> files;
  std::set<uint8_t> dtypes;
  for (const auto& d : dumps) files.push_back(dir_ / run.trace.text(d.path));
  const auto reference = numpy_stats(files);
  ASSERT_EQ(reference.size(), dumps.size());
  for (size_t i = 0; i < dumps.size(); ++i) {
    SCOPED_TRACE(files[i].filename().string());
    const auto& s = stats.at({dumps[i].seq, dumps[i].role_slot});
    const auto& r = reference[i];
    dtypes.insert(s.dtype);
    EXPECT_EQ(s.count, r["count"].get<uint64_t>());
    EXPECT_EQ(s.nan, r["nan"].get<uint64_t>());
    EXPECT_EQ(s.pos_inf, r["pos_inf"].get<uint64_t>());
    EXPECT_EQ(s.neg_inf, r["neg_inf"].get<uint64_t>());
    EXPECT_EQ(s.zero, r["zero"].get<uint64_t>());
    EXPECT_EQ(s.subnormal, r["subnormal"].get<uint64_t>());
    expect_same(s.min, r["min"], "min");
    expect_same(s.max, r["max"], "max");
    expect_same(s.absmax, r["absmax"], "absmax");
    expect_same(s.min_nonzero, r["min_nonzero"], "min_nonzero");
    // Sums in a different order: equal to within a few units in the last place.
    if (!r["mean"].is_null()) {
      EXPECT_NEAR(s.mean, r["mean"].get<double>(), 1e-12 * std::max(1.0, std::fabs(s.mean))) << "mean";
      EXPECT_NEAR(s.rms, r["rms"].get<double>(), 1e-12 * std::max(1.0, s.rms)) << "rms";
    }
    const auto& f16 = formats.at({dumps[i].seq, dumps[i].role_slot}).formats[0];
    EXPECT_EQ(f16.overflow, r["f16"]["overflow"].get<uint64_t>());
    EXPECT_EQ(f16.underflow, r["f16"]["underflow"].get<uint64_t>());
    EXPECT_EQ(f16.subnormal, r["f16"]["subnormal"].get<uint64_t>());
    EXPECT_EQ(f16.near_max, r["f16"]["near_max"].get<uint64_t>());
  }
  EXPECT_GE(dtypes.size(), 2u);  // fp16 activations and fp32 master weights or gradients
}

TEST_F(MptrainTraced, HistogramsMatchNumpy) {
  TracedRun run = traced({}, {{"FPSCOPE_DUMP", "step=1,op=linear_forward"}, {"FPSCOPE_DUMP_DIR", dir_.string()}});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  std::map<std::pair<uint64_t, uint8_t>, std::map<std::string, uint64_t>> hist;
  for (const auto& r : run.trace.records) {
    const auto* h = reinterpret_cast<const wire::TensorHistogramRecord*>(r.data());
    if (h->h.type != RecordType::TensorHistogram) continue;
    auto& bins = hist[{h->seq, h->role_slot}];
    for (uint32_t i = 0; i < h->bins; ++i) {
      wire::HistogramBin b;
      std::memcpy(&b, r.data() + sizeof *h + i * sizeof b, sizeof b);
      bins[std::to_string(b.exponent)] = b.count;
    }
  }
  const auto dumps = run.trace.all<wire::DumpRecord>(RecordType::Dump);
  ASSERT_GE(dumps.size(), 4u);  // fc1 and fc2: x, w, b, y
  std::vector<fs::path> files;
  for (const auto& d : dumps) files.push_back(dir_ / run.trace.text(d.path));
  const auto reference = numpy_stats(files);
  ASSERT_EQ(reference.size(), dumps.size());
  for (size_t i = 0; i < dumps.size(); ++i) {
    std::map<std::string, uint64_t> expected;
    for (const auto& [e, c] : reference[i]["hist"].items()) expected[e] = c.get<uint64_t>();
    EXPECT_EQ(hist.at({dumps[i].seq, dumps[i].role_slot}), expected) << files[i];
  }
}

TEST_F(MptrainTraced, OnlyTheFirstProcessOfARunTraces) {
  const std::string once = "'" + std::string(FPSCOPE_MPTRAIN) + "' --model mlp --hidden 16 --data-dir " +
                           FPSCOPE_TEST_DATA_DIR + " --train-subset 64 --test-subset 32";
  TracedRun run = run_traced(FPSCOPE_INJECT_LIBRARY, {"/bin/sh", "-c", once + " && " + once});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  // The shell made no kernel call; the first trainer claimed the ring, the second ran untraced.
  const auto processes = run.trace.all<wire::ProcessRecord>(RecordType::Process);
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_NE(run.trace.text(processes[0].exe).find("mptrain"), std::string::npos);
  std::vector<int64_t> steps;
  for (const auto& s : run.trace.all<wire::ScalarRecord>(RecordType::Scalar))
    if (run.trace.text(s.name) == "loss") steps.push_back(s.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1}));
}

std::vector<std::string> texts_of(const DecodedTrace& t) {
  std::vector<std::string> out;
  for (const auto& x : t.all<wire::TextRecord>(RecordType::Text)) out.push_back(t.text(x.value));
  return out;
}

TEST(ForkedChildren, NeverWriteIntoTheRing) {
  TracedRun run = run_traced(FPSCOPE_INJECT_LIBRARY, {FPSCOPE_FORK_TARGET, "later"});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  EXPECT_EQ(texts_of(run.trace), (std::vector<std::string>{"parent-before-fork", "parent-after-fork"}));
  EXPECT_EQ(run.trace.count(RecordType::Alloc), 0u);
  EXPECT_EQ(run.trace.count(RecordType::Process), 1u);
}

TEST(ForkedChildren, ForkedBeforeTheFirstCallStillNeverClaim) {
  TracedRun run = run_traced(FPSCOPE_INJECT_LIBRARY, {FPSCOPE_FORK_TARGET, "first"});
  ASSERT_EQ(run.wait_status, 0) << run.stderr_text;
  EXPECT_EQ(texts_of(run.trace), (std::vector<std::string>{"parent-after-fork"}));
  EXPECT_EQ(run.trace.count(RecordType::Process), 1u);
}

TEST_F(MptrainTraced, InvalidOptionsDisableTracingButNotTheProgram) {
  TracedRun run = traced({}, {{"FPSCOPE_EVERY", "0"}});
  EXPECT_EQ(run.wait_status, 0);
  EXPECT_NE(run.stderr_text.find("fpscope: FPSCOPE_EVERY='0' is not valid"), std::string::npos) << run.stderr_text;
  EXPECT_EQ(run.trace.records.size(), 0u);
}

TEST_F(MptrainTraced, WithoutARingTheHooksOnlyForward) {
  TracedRun run = run_traced(FPSCOPE_INJECT_LIBRARY, mptrain({}), {}, /*with_ring=*/false);
  EXPECT_EQ(run.wait_status, 0) << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("fpscope:"), std::string::npos) << run.stderr_text;
}

}  // namespace
}  // namespace fpscope::inject
