// The helpers that share a tensor's scan: every chunk runs exactly once per job, whichever thread
// takes it, with callers from several program threads at once and after a fork; and a scan shared
// with them gives the statistics of a scan on one thread, bit for bit.
#include "stats_workers.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace fpscope::inject {
namespace {

struct Tally {
  std::vector<std::atomic<int>> runs;
  explicit Tally(std::size_t n) : runs(n) {}
  static void count(void* self, std::size_t i) { static_cast<Tally*>(self)->runs[i].fetch_add(1); }
  bool each_once() const {
    for (const auto& r : runs)
      if (r.load() != 1) return false;
    return true;
  }
};

TEST(StatsWorkers, EveryChunkRunsExactlyOncePerJob) {
  StatsWorkers workers(4);
  EXPECT_EQ(workers.threads(), 4);
  for (std::size_t count : {0, 1, 2, 3, 7, 64, 1000}) {
    for (int job = 0; job < 50; ++job) {
      Tally tally(count);
      workers.run(count, &Tally::count, &tally);
      ASSERT_TRUE(tally.each_once()) << count << " chunks, job " << job;
    }
  }
}

TEST(StatsWorkers, CallersFromSeveralThreadsEachGetTheirWholeJob) {
  StatsWorkers workers(3);
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < 200; ++job) {
        Tally tally(static_cast<std::size_t>(5 + (job + c) % 40));
        workers.run(tally.runs.size(), &Tally::count, &tally);
        if (!tally.each_once()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(StatsWorkers, OneThreadRunsEverythingOnTheCaller) {
  StatsWorkers workers(1);
  EXPECT_EQ(workers.threads(), 1);
  struct Seen {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    static void body(void* self, std::size_t) {
      auto* s = static_cast<Seen*>(self);
      if (std::this_thread::get_id() != s->caller) s->elsewhere.fetch_add(1);
    }
  } seen;
  workers.run(100, &Seen::body, &seen);
  EXPECT_EQ(seen.elsewhere.load(), 0);
}

// A forked child has none of the parent's helper threads, and may have inherited their locks held:
// its scans run on the launching thread alone and finish; the parent's helpers still work after
// the fork. The fork comes while helpers may still be leaving the previous job.
TEST(StatsWorkers, ScansFinishInAForkedChildAndInTheParent) {
  StatsWorkers workers(3);
  for (int round = 0; round < 20; ++round) {
    Tally before(32);
    workers.run(32, &Tally::count, &before);
    ASSERT_TRUE(before.each_once());
    const pid_t child = fork();
    ASSERT_NE(child, -1);
    if (child == 0) {
      alarm(10);  // a child stuck on an inherited lock dies of SIGALRM instead of hanging the test
      Tally tally(32);
      workers.run(32, &Tally::count, &tally);
      _exit(tally.each_once() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round << ", status " << status;
  }
  Tally after(32);
  workers.run(32, &Tally::count, &after);
  EXPECT_TRUE(after.each_once());
}

TEST(StatsWorkers, SharedScanEqualsOneThreadsScanBitForBit) {
  StatsWorkers workers(4);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(5 * kStatsChunkElements + 123);
  for (float& v : x) v = std::ldexp(normal(rng), static_cast<int>(rng() % 40) - 20);
  x[3 * kStatsChunkElements + 5] = NAN;
  for (StatsLevel level : {StatsLevel::Basic, StatsLevel::Full}) {
    TensorStats alone, shared;
    compute_stats(x.data(), ElementType::F32, x.size(), level, &alone);
    compute_stats(x.data(), ElementType::F32, x.size(), level, &shared, workers);
    EXPECT_EQ(std::memcmp(&alone.mean, &shared.mean, sizeof alone.mean), 0);
    EXPECT_EQ(std::memcmp(&alone.rms, &shared.rms, sizeof alone.rms), 0);
    EXPECT_EQ(alone.hist, shared.hist);
    EXPECT_EQ(alone.zero, shared.zero);
    EXPECT_EQ(alone.nan, 1u);
    EXPECT_EQ(shared.first_nonfinite, static_cast<int64_t>(3 * kStatsChunkElements + 5));
    EXPECT_EQ(alone.min, shared.min);
    EXPECT_EQ(alone.max, shared.max);
    EXPECT_EQ(alone.min_nonzero, shared.min_nonzero);
    EXPECT_EQ(alone.cast, shared.cast);
  }
}

}  // namespace
}  // namespace fpscope::inject
