// Checks every statistic of every kernel against the independent numpy reference
// (reference_stats.py): the test writes its tensors as raw files, runs the reference once over all
// of them, and compares field by field. Counts, extremes, histogram and cast counts must be equal;
// mean and rms must lie within the error bound of docs/statistics.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kernels.h"
#include "reference_runner.h"
#include "test_tensors.h"

namespace fpscope::stats_test {
namespace {

using stats::Kernel;
using Json = nlohmann::json;

constexpr double kUnit = 0x1p-53;  // unit roundoff of double

std::vector<TestTensor> all_cases() {
  std::vector<TestTensor> cases;
  for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::BF16, ElementType::F64}) {
    cases.push_back(specials_tensor(t));
    cases.push_back(boundaries_tensor(t));
    uint64_t seed = 1;
    for (std::size_t n :
         {0, 1, 2, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099, 70001}) {
      cases.push_back(random_tensor(t, n, seed++, 0.02));
    }
    cases.push_back(random_tensor(t, 300007, 99, 0.001));  // crosses many blocks
    cases.push_back(random_tensor(t, 5000, 7, 0.5));       // specials everywhere
    // Few binades per block, around each cast boundary region and at ordinary scales.
    for (int scale : {-20, -14, -9, 0, 8, 15})
      cases.push_back(gaussian_tensor(t, 20000, uint64_t(50 + scale), scale));
  }
  cases.push_back(all_patterns_tensor(ElementType::F16));
  cases.push_back(all_patterns_tensor(ElementType::BF16));
  cases.push_back(wide_range_tensor());
  return cases;
}

// The 8-bit formats' cases: their reference decodes them with ml_dtypes.
std::vector<TestTensor> byte_cases() {
  std::vector<TestTensor> cases;
  for (ElementType t : {ElementType::E4M3, ElementType::E5M2, ElementType::E4M3FNUZ, ElementType::E5M2FNUZ,
                        ElementType::E8M0, ElementType::E2M1})
    for (TestTensor& tensor : byte_tensors(t)) cases.push_back(std::move(tensor));
  return cases;
}

// Runs the reference over the tensors (reference_runner.h), its results by tensor name.
Json run_reference(const std::vector<TestTensor>& cases, const std::string& python = FPSCOPE_REFERENCE_PYTHON) {
  std::vector<ReferenceInput> inputs;
  for (const TestTensor& t : cases) inputs.push_back({&t});
  return run_reference_script(inputs, python, FPSCOPE_STATS_REFERENCE, FPSCOPE_STATS_TEST_WORK_DIR);
}

// A number of the reference: null is NaN, the strings "inf" and "-inf" the infinities.
double number_or_nan(const Json& v) {
  if (v.is_null()) return NAN;
  if (v.is_string()) return std::stod(v.get<std::string>());
  return v.get<double>();
}

// Same double, NaN matching NaN and -0 distinguished from +0.
void expect_same(double got, const Json& want, const char* field) {
  const double w = number_or_nan(want);
  if (std::isnan(w)) {
    EXPECT_TRUE(std::isnan(got)) << field << " = " << got << ", want NaN";
    return;
  }
  EXPECT_EQ(got, w) << field;
  EXPECT_EQ(std::signbit(got), std::signbit(w)) << field << " sign of zero";
}

void expect_sums_close(const TensorStats& s, const Json& ref) {
  const uint64_t finite = s.count - s.nonfinite();
  if (finite == 0) {
    EXPECT_TRUE(std::isnan(s.mean) && std::isnan(s.rms));
    return;
  }
  // The bound of docs/statistics.md: |sum error| <= 4u * sum|x|, squares likewise, plus the
  // rounding of the division (and of the reference's own division and sqrt).
  const double mean = number_or_nan(ref["mean"]);
  const double rms = number_or_nan(ref["rms"]);
  const double sum_abs = number_or_nan(ref["sum_abs"]);
  EXPECT_LE(std::fabs(s.mean - mean),
            4 * kUnit * sum_abs / double(finite) + 2 * kUnit * std::fabs(mean))
      << "mean " << s.mean << " vs " << mean;
  if (std::isinf(rms))  // fp64: the squares' sum left double's range
    EXPECT_EQ(s.rms, rms);
  else
    EXPECT_LE(std::fabs(s.rms - rms), 5 * kUnit * rms) << "rms " << s.rms << " vs " << rms;
}

void expect_matches(const TensorStats& s, const Json& ref) {
  EXPECT_EQ(s.count, ref["count"].get<uint64_t>());
  EXPECT_EQ(s.nan, ref["nan"].get<uint64_t>());
  EXPECT_EQ(s.pos_inf, ref["pos_inf"].get<uint64_t>());
  EXPECT_EQ(s.neg_inf, ref["neg_inf"].get<uint64_t>());
  EXPECT_EQ(s.zero, ref["zero"].get<uint64_t>());
  EXPECT_EQ(s.subnormal, ref["subnormal"].get<uint64_t>());
  expect_same(s.min, ref["min"], "min");
  expect_same(s.max, ref["max"], "max");
  expect_same(s.absmax, ref["absmax"], "absmax");
  expect_same(s.min_nonzero, ref["min_nonzero"], "min_nonzero");
  EXPECT_EQ(s.first_nonfinite, ref["first_nonfinite"].get<int64_t>());
  EXPECT_EQ(s.first_nonfinite_bits, ref["first_nonfinite_bits"].get<uint64_t>());
  expect_sums_close(s, ref);
  for (int b = 0; b < kHistBins; ++b)
    EXPECT_EQ(s.hist[b], ref["hist"][b].get<uint64_t>())
        << "hist exponent " << b + kHistMinExponent;
  EXPECT_EQ(s.hist_below, ref["hist_below"].get<uint64_t>());
  EXPECT_EQ(s.hist_above, ref["hist_above"].get<uint64_t>());
  const char* names[] = {"fp16", "bf16", "e4m3", "e5m2"};
  for (int f = 0; f < kCastFormatCount; ++f) {
    const Json& c = ref["cast"][f];
    EXPECT_EQ(s.cast[f].overflow, c["overflow"].get<uint64_t>()) << names[f] << " overflow";
    EXPECT_EQ(s.cast[f].underflow, c["underflow"].get<uint64_t>()) << names[f] << " underflow";
    EXPECT_EQ(s.cast[f].subnormal, c["subnormal"].get<uint64_t>()) << names[f] << " subnormal";
    EXPECT_EQ(s.cast[f].near_max, c["near_max"].get<uint64_t>()) << names[f] << " near_max";
  }
}

// The cases and the reference's results, made on first use inside a test's body: a reference that
// fails there fails the test (a failure in SetUpTestSuite would only skip the tests).
struct Cases {
  std::vector<TestTensor> tensors = all_cases();
  Json reference = run_reference(tensors);
};
const Cases& cases() {
  static const Cases* made = new Cases;
  return *made;
}

class ReferenceTest : public ::testing::TestWithParam<Kernel> {};

TEST_P(ReferenceTest, EveryFieldMatchesTheReference) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  const Cases& c = cases();
  ASSERT_EQ(c.reference.size(), c.tensors.size());
  for (const TestTensor& t : c.tensors) {
    SCOPED_TRACE(t.name);
    TensorStats s;
    stats::compute_stats_with(k, t.bytes.data(), t.type, t.size(), StatsLevel::Full, &s);
    expect_matches(s, c.reference[t.name]);
  }
}

// The same tensors one to three bytes off their natural alignment.
TEST_P(ReferenceTest, MisalignedArraysGiveTheSameStatistics) {
  const Kernel k = GetParam();
  if (!stats::kernel_supported(k)) GTEST_SKIP() << stats::kernel_name(k) << " not supported here";
  const Cases& c = cases();
  ASSERT_EQ(c.reference.size(), c.tensors.size());
  for (const TestTensor& t : c.tensors) {
    if (t.size() > 5000) continue;
    SCOPED_TRACE(t.name);
    for (std::size_t offset = 1; offset < 4; ++offset) {
      std::vector<unsigned char> shifted(t.bytes.size() + offset);
      if (!t.bytes.empty()) std::memcpy(shifted.data() + offset, t.bytes.data(), t.bytes.size());
      TensorStats s;
      stats::compute_stats_with(k, shifted.data() + offset, t.type, t.size(), StatsLevel::Full, &s);
      expect_matches(s, c.reference[t.name]);
    }
  }
}

// The 8-bit formats against ml_dtypes: every bit pattern of each, and arrays long enough to span
// many chunks, scanned on this thread and with the chunks handed out in reverse order.
struct ByteCases {
  std::vector<TestTensor> tensors = byte_cases();
  Json reference = run_reference(tensors, FPSCOPE_ML_DTYPES_PYTHON);
};
const ByteCases& byte_cases_and_reference() {
  static const ByteCases* made = new ByteCases;
  return *made;
}

// Runs the chunks last first, each on this thread.
class BackwardsRunner final : public ChunkRunner {
 public:
  void run(std::size_t count, void (*body)(void*, std::size_t), void* context) override {
    for (std::size_t i = count; i-- > 0;) body(context, i);
  }
};

TEST(ByteFormats, EveryFieldMatchesMlDtypes) {
  if (std::string_view(FPSCOPE_ML_DTYPES_PYTHON).empty())
    GTEST_SKIP() << "no Python with ml_dtypes: scripts/python-env.sh installs one";
  const ByteCases& c = byte_cases_and_reference();
  ASSERT_EQ(c.reference.size(), c.tensors.size());
  BackwardsRunner backwards;
  for (const TestTensor& t : c.tensors) {
    SCOPED_TRACE(t.name);
    TensorStats s;
    compute_stats(t.bytes.data(), t.type, t.size(), StatsLevel::Full, &s);
    expect_matches(s, c.reference[t.name]);
    TensorStats chunked;
    compute_stats(t.bytes.data(), t.type, t.size(), StatsLevel::Full, &chunked, backwards);
    expect_matches(chunked, c.reference[t.name]);
    // The Basic level: the same counts, extremes and sums, no histogram or cast counts.
    TensorStats basic;
    compute_stats(t.bytes.data(), t.type, t.size(), StatsLevel::Basic, &basic);
    EXPECT_EQ(basic.nan, s.nan);
    EXPECT_EQ(basic.subnormal, s.subnormal);
    EXPECT_EQ(basic.first_nonfinite, s.first_nonfinite);
    EXPECT_TRUE(basic.mean == s.mean || (std::isnan(basic.mean) && std::isnan(s.mean)));
    EXPECT_EQ(basic.hist, decltype(basic.hist){});
    EXPECT_EQ(basic.cast, decltype(basic.cast){});
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReferenceTest,
                         ::testing::Values(Kernel::Scalar, Kernel::Avx2, Kernel::Avx512,
                                           Kernel::Avx512Gfni),
                         [](const auto& p) { return std::string(stats::kernel_name(p.param)); });

}  // namespace
}  // namespace fpscope::stats_test
