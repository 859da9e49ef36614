// OutputMemo: remembered statistics answer only for the same bytes, unchanged, inside a live
// allocation; every kind of write, a free and a new allocation forget them.
#include <gtest/gtest.h>

#include <vector>

#include "output_memo.h"

namespace fpscope::inject {
namespace {

TensorStats stats_with_count(uint64_t count) {
  TensorStats s{};
  s.count = count;
  s.absmax = 1.5;
  s.hist[3] = count;
  return s;
}

class Memo : public ::testing::Test {
 protected:
  void SetUp() override { memo_.allocated(block_.data(), block_.size() * sizeof(float)); }
  OutputMemo::Key key(size_t first, size_t count, ElementType type = ElementType::F32) {
    return {block_.data() + first, type, count};
  }
  // Measures `k` as an output would be: generation first, then remember.
  void measure(const OutputMemo::Key& k, const TensorStats& s, StatsLevel level = StatsLevel::Full) {
    memo_.remember(k, level, memo_.generation(k), s);
  }
  bool recalled(const OutputMemo::Key& k, StatsLevel level = StatsLevel::Full) {
    TensorStats out{};
    return memo_.recall(k, level, &out);
  }

  std::vector<float> block_ = std::vector<float>(1024);
  OutputMemo memo_;
};

TEST_F(Memo, RecallsExactlyWhatWasRemembered) {
  measure(key(0, 256), stats_with_count(256));
  TensorStats out{};
  ASSERT_TRUE(memo_.recall(key(0, 256), StatsLevel::Full, &out));
  EXPECT_EQ(out.count, 256u);
  EXPECT_EQ(out.absmax, 1.5);
  EXPECT_EQ(out.hist[3], 256u);
  EXPECT_EQ(memo_.hits(), 1u);
}

// An entry keeps only the populated span of the histogram (inline when short, apart when wide):
// whatever the span, a recall gives back every field and every bin as they were, and a tensor
// measured again replaces its entry whole.
TEST_F(Memo, RecallsEveryFieldAndBinWhateverTheHistogramsSpan) {
  // Every field's value depends on `seed`, so that the statistics stored first, the ones stored
  // over them and the destination all differ; the span's first and last bins count, bins inside
  // it may not.
  const auto filled = [](int first, int end, uint64_t seed) {
    TensorStats s{};
    s.count = 1000 + seed;
    s.nan = 1 + seed, s.pos_inf = 2 + seed, s.neg_inf = 3 + seed, s.zero = 4 + seed, s.subnormal = 5 + seed;
    const double d = double(seed);
    s.min = -2.5 - d, s.max = 7.0 + d, s.absmax = 7.5 + d, s.min_nonzero = 0x1p-30 * (1 + d);
    s.mean = 0.125 + d, s.rms = 1.75 + d;
    s.first_nonfinite = 17 + int64_t(seed);
    s.first_nonfinite_bits = 0x7FC00000u + uint32_t(seed);
    for (int f = 0; f < kCastFormatCount; ++f)
      s.cast[f] = {seed + f + 10, seed + f + 20, seed + f + 30, seed + f + 40};
    for (int b = first; b < end; ++b)
      s.hist[b] = (b == first || b == end - 1 || b % 3 != 1) ? seed + uint64_t(b) + 1 : 0;
    return s;
  };
  const auto expect_same = [](const TensorStats& a, const TensorStats& b) {
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.nan, b.nan);
    EXPECT_EQ(a.pos_inf, b.pos_inf);
    EXPECT_EQ(a.neg_inf, b.neg_inf);
    EXPECT_EQ(a.zero, b.zero);
    EXPECT_EQ(a.subnormal, b.subnormal);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.absmax, b.absmax);
    EXPECT_EQ(a.min_nonzero, b.min_nonzero);
    EXPECT_EQ(a.mean, b.mean);
    EXPECT_EQ(a.rms, b.rms);
    EXPECT_EQ(a.first_nonfinite, b.first_nonfinite);
    EXPECT_EQ(a.first_nonfinite_bits, b.first_nonfinite_bits);
    EXPECT_EQ(a.cast, b.cast);
    EXPECT_EQ(a.hist, b.hist);
  };
  const int n = kHistBins;
  const int inline_bins = int(OutputMemo::kInlineBins);
  for (auto [first, end] : {std::pair{0, 0}, std::pair{0, 1}, std::pair{n - 1, n}, std::pair{100, 100 + inline_bins},
                            std::pair{100, 101 + inline_bins}, std::pair{0, n}, std::pair{140, 160}}) {
    SCOPED_TRACE("bins " + std::to_string(first) + " to " + std::to_string(end));
    const TensorStats wide = filled(0, n, 7), s = filled(first, end, 1);
    measure(key(0, 256), wide);  // an entry with a wide span, then the same tensor measured again
    measure(key(0, 256), s);
    TensorStats out = filled(0, n, 3);  // a destination holding other numbers
    ASSERT_TRUE(memo_.recall(key(0, 256), StatsLevel::Full, &out));
    expect_same(out, s);
    memo_.written(block_.data(), 4);  // the next round starts from a forgotten entry
  }
}

TEST_F(Memo, OtherBytesOrAnotherReadingOfThemAreNotAnswered) {
  measure(key(0, 256), stats_with_count(256));
  EXPECT_FALSE(recalled(key(0, 128)));                    // a view of the first half
  EXPECT_FALSE(recalled(key(1, 256)));                    // shifted by one element
  EXPECT_FALSE(recalled(key(0, 512, ElementType::F16)));  // the same bytes as fp16
  EXPECT_FALSE(recalled(key(0, 256), StatsLevel::Basic)); // measured at another level
  EXPECT_EQ(memo_.hits(), 0u);
}

TEST_F(Memo, AnyWriteIntoTheAllocationForgetsEveryTensorInIt) {
  measure(key(0, 256), stats_with_count(256));
  measure(key(512, 256), stats_with_count(256));
  memo_.written(block_.data() + 1000, 4);  // one element, far from both tensors
  EXPECT_FALSE(recalled(key(0, 256)));
  EXPECT_FALSE(recalled(key(512, 256)));
  EXPECT_EQ(memo_.entries(), 0u);
}

TEST_F(Memo, AWriteThatStartsBeforeTheAllocationStillReachesIt) {
  measure(key(0, 256), stats_with_count(256));
  memo_.written(reinterpret_cast<const char*>(block_.data()) - 16, 32);
  EXPECT_FALSE(recalled(key(0, 256)));
}

TEST_F(Memo, WritesElsewhereKeepIt) {
  measure(key(0, 256), stats_with_count(256));
  std::vector<float> other(64);
  memo_.written(other.data(), other.size() * sizeof(float));
  EXPECT_TRUE(recalled(key(0, 256)));
}

TEST_F(Memo, AWriteDuringTheScanKeepsTheResultOut) {
  const OutputMemo::Key k = key(0, 256);
  const uint64_t before = memo_.generation(k);
  memo_.written(block_.data(), 4);  // another thread's launch, while this one scanned
  memo_.remember(k, StatsLevel::Full, before, stats_with_count(256));
  EXPECT_FALSE(recalled(k));
}

TEST_F(Memo, FreeingAndAllocatingAgainAtTheSameAddressForgets) {
  const OutputMemo::Key k = key(0, 256);
  const uint64_t before = memo_.generation(k);
  measure(k, stats_with_count(256));
  memo_.freed(block_.data());
  EXPECT_FALSE(recalled(k));
  memo_.allocated(block_.data(), block_.size() * sizeof(float));
  EXPECT_FALSE(recalled(k));
  // A generation read in the old allocation's life never matches the new one's.
  memo_.remember(k, StatsLevel::Full, before, stats_with_count(256));
  EXPECT_FALSE(recalled(k));
}

TEST_F(Memo, MemoryOutsideEveryAllocationIsNeverRemembered) {
  std::vector<float> stack(256);
  const OutputMemo::Key k{stack.data(), ElementType::F32, stack.size()};
  EXPECT_EQ(memo_.generation(k), 0u);
  memo_.remember(k, StatsLevel::Full, 0, stats_with_count(256));
  EXPECT_FALSE(recalled(k));
  // Nor a tensor that runs past the end of its allocation.
  const OutputMemo::Key past = key(1000, 100);
  EXPECT_EQ(memo_.generation(past), 0u);
}

TEST_F(Memo, AnAllocationOverlappingOneNeverFreedReplacesIt) {
  measure(key(0, 256), stats_with_count(256));
  memo_.allocated(block_.data() + 128, 64);  // the old block was freed behind the memo's back
  EXPECT_FALSE(recalled(key(0, 256)));
  EXPECT_EQ(memo_.generation(key(0, 256)), 0u);
}

}  // namespace
}  // namespace fpscope::inject
