// Checks every scaling recipe's outcome (fpscope/fp8_recipes.h) against the independent quantizer
// reference_recipes.py (numpy and ml_dtypes): counts and scales equal, squared errors and signal
// within the rounding of a sum in double. The tensors are random (gaussian over many scales, with
// specials mixed in) and adversarial: ties at every rounding boundary of each element format, the
// subnormal and saturation edges, all-zero blocks, NaN and Inf inside a block, partial blocks,
// one block spanning sixty binades, a block whose NVFP4 scale underflows, and delayed scaling
// with histories below, at and above the tensor's amax.
#include <gtest/gtest.h>

#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "fpscope/fp8_recipes.h"
#include "kernels.h"
#include "reference_runner.h"
#include "test_tensors.h"

namespace fpscope::stats_test {
namespace {

using Json = nlohmann::json;
using contract::kRecipes;

struct RecipeCase {
  TestTensor tensor;
  RecipeRequest request;
};

// Appends `value` (exact in the tensor's format) to the tensor.
void push(TestTensor& t, double value) { t.push_bits(nearest_bits(t.type, value)); }
void push_raw(TestTensor& t, uint64_t bits) { t.push_bits(bits); }

RecipeRequest shape(std::size_t rows, std::size_t cols, bool weight = false) {
  RecipeRequest r;
  r.rows = rows;
  r.cols = cols;
  r.weight = weight;
  return r;
}

// Every value of a binary format with `mant` mantissa bits over binades [lo, hi], and the
// midpoints between neighbours (the ties), each also one fp32 ulp either side.
void push_grid_and_ties(TestTensor& t, int mant, int lo, int hi) {
  for (int e = lo; e <= hi; ++e)
    for (int m = 0; m < (1 << mant); ++m) {
      const double step = std::ldexp(1.0, e - mant);
      const double v = std::ldexp(1.0, e) + m * step;
      const double tie = v + step / 2;
      push(t, v);
      push(t, tie);
      push(t, -tie);
      push(t, std::nextafter(float(tie), 0.0f));
      push(t, std::nextafter(float(tie), 1e30f));
    }
}

std::vector<RecipeCase> all_cases() {
  std::vector<RecipeCase> cases;
  // Random tensors of several shapes: partial 16-, 32- and 128-blocks and tiles.
  uint64_t seed = 11;
  for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {3, 32}, {37, 50}, {64, 96}, {130, 129}}) {
      for (bool weight : {false, true}) {
        TestTensor t = gaussian_tensor(type, rows * cols, seed++, weight ? -6 : 0);
        t.name = std::string(type_name(type)) + "-gauss-" + std::to_string(rows) + "x" + std::to_string(cols) +
                 (weight ? "-weight" : "");
        cases.push_back({t, shape(rows, cols, weight)});
      }
    }
    TestTensor mixed = random_tensor(type, 40 * 64, seed++, 0.01);  // specials and every scale
    mixed.name = std::string(type_name(type)) + "-random-specials";
    cases.push_back({mixed, shape(40, 64)});
    TestTensor clean = random_tensor(type, 33 * 48, seed++, 0);  // no specials, huge ranges
    clean.name = std::string(type_name(type)) + "-random";
    cases.push_back({clean, shape(33, 48, true)});
  }

  // Ties: rows of 32 values (one MX block each) whose amax fixes the scale at 1 for the MX and
  // block rules, holding every e4m3 grid value and tie of the binades the row spans.
  {
    TestTensor t{"f32-e4m3-ties", ElementType::F32, {}};
    push_grid_and_ties(t, 3, -9, 8);  // e4m3's subnormals (2^-9 spacing) up to 448's binade
    push(t, 464);                     // max + half the top ulp: the tie goes to 448 (even)
    push(t, 480);                     // saturates
    push(t, std::ldexp(1.0, -10));    // half the smallest subnormal: the tie goes to zero
    push(t, std::nextafter(float(std::ldexp(1.0, -10)), 1.0f));
    while (t.size() % 32) push(t, 0);
    cases.push_back({t, shape(t.size() / 32, 32)});
  }
  {
    TestTensor t{"f32-e5m2-ties", ElementType::F32, {}};
    push_grid_and_ties(t, 2, -16, 15);
    push(t, 61440);  // max + half the top ulp: the tie goes up (57344's mantissa is odd)
    push(t, std::ldexp(1.0, -17));
    while (t.size() % 32) push(t, 0);
    cases.push_back({t, shape(t.size() / 32, 32)});
  }
  {
    TestTensor t{"f32-e2m1-ties", ElementType::F32, {}};
    for (double v : {0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0})
      for (double sign : {1.0, -1.0}) push(t, sign * v);
    // The same ties a fp32 ulp off, in blocks whose amax is 7.5 (the MX scale stays 1).
    for (double v : {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0}) {
      push(t, std::nextafter(float(v), 0.0f));
      push(t, std::nextafter(float(v), 100.0f));
    }
    push(t, 7.5);
    while (t.size() % 32) push(t, 0);
    cases.push_back({t, shape(t.size() / 32, 32)});
  }
  // Rows and blocks whose NaN or Inf makes the power-of-two rules fall back to s = 1, with finite
  // values far beyond 448 in them: their saturated errors (x - 448) are not fp32 values.
  {
    TestTensor t{"f32-fallback-large", ElementType::F32, {}};
    for (int row = 0; row < 2; ++row)
      for (int i = 0; i < 64; ++i) {
        if (i == 7)
          push_raw(t, row == 0 ? uint64_t{0x7F800000} : uint64_t{0x7FC00001});
        else
          push(t, (i % 2 ? -1.0 : 1.0) * (i % 3 == 0 ? 1e10 + 1024.0 * i : std::ldexp(3.0 + i, 28 + i % 5)));
      }
    cases.push_back({t, shape(2, 64)});
  }
  // Blocks of zeros, a NaN and an Inf inside blocks, a block spanning 2^-100 to 2^100, and a
  // block far below the tensor's amax (its NVFP4 scale underflows; MX keeps it).
  {
    TestTensor t{"f32-blocks", ElementType::F32, {}};
    const uint64_t nan_bits = 0x7FC00001, inf_bits = 0x7F800000;
    for (int i = 0; i < 32; ++i) push(t, 0);                               // all zeros
    for (int i = 0; i < 32; ++i) i == 5 ? push_raw(t, nan_bits) : push(t, 1 + i);  // NaN
    for (int i = 0; i < 32; ++i) i == 31 ? push_raw(t, inf_bits | 0x80000000u) : push(t, -i);
    for (int i = 0; i < 32; ++i) push(t, std::ldexp(i % 2 ? 1.0 : -1.0, -100 + 200 * i / 31));
    for (int i = 0; i < 32; ++i) push(t, 1e-4 * (i + 1));
    for (int i = 0; i < 32; ++i) push(t, 1e4 - i);
    for (int i = 0; i < 32; ++i) push(t, std::ldexp(1.0, -149 + i % 4));  // fp32 subnormals: lost
    for (int i = 0; i < 13; ++i) push(t, 3.0 * i);                        // a partial last row
    cases.push_back({t, shape(1, t.size())});
    TestTensor rows = t;
    rows.name = "f32-blocks-rows";
    rows.bytes.resize(4 * 32 * 7);
    cases.push_back({rows, shape(7, 32)});
    TestTensor weight = rows;
    weight.name = "f32-blocks-weight";
    cases.push_back({weight, shape(14, 16, true)});
  }
  // Delayed scaling: histories below the amax (values saturate), equal, above, none, not finite.
  {
    int i = 0;
    for (double history : {0.5, 3.0, 40.0, 0.0, 1e-30}) {
      TestTensor t = gaussian_tensor(ElementType::F32, 256, 500 + uint64_t(i), 0);
      t.name = "f32-delayed-" + std::to_string(i++);
      RecipeRequest r = shape(16, 16);
      r.history_amax.fill(history);
      cases.push_back({t, r});
    }
  }
  // A NaN and tiny values: the per-tensor rules fall back to s = 1 and lose every value.
  {
    TestTensor t{"f32-nan-and-tiny", ElementType::F32, {}};
    push_raw(t, 0xFFC00000u);
    for (int i = 1; i < 48; ++i) push(t, (i % 2 ? 1e-10 : -3e-12) * i);
    cases.push_back({t, shape(1, t.size())});
  }
  // Nothing at all.
  cases.push_back({TestTensor{"f32-empty", ElementType::F32, {}}, shape(0, 0)});
  return cases;
}

double num(const Json& v) {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (v.is_string()) return std::stod(v.get<std::string>());
  return v.get<double>();
}

// A sum of n positive terms in double against the exact sum rounded once.
void expect_sum_close(double got, double want, uint64_t n, const char* what) {
  EXPECT_LE(std::fabs(got - want), double(n + 2) * 0x1p-53 * want) << what << " " << got << " vs " << want;
}

struct Cases {
  std::vector<RecipeCase> cases = all_cases();
  Json reference = run();

  Json run() const {
    std::vector<ReferenceInput> inputs;
    for (const RecipeCase& c : cases) {
      Json history = Json::array();
      for (double h : c.request.history_amax) history.push_back(h);
      inputs.push_back({&c.tensor, {{"rows", c.request.rows}, {"cols", c.request.cols},
                                    {"weight", c.request.weight}, {"history_amax", history}}});
    }
    return run_reference_script(inputs, FPSCOPE_ML_DTYPES_PYTHON, FPSCOPE_RECIPES_REFERENCE,
                                FPSCOPE_STATS_TEST_WORK_DIR);
  }
};

// Every kernel this CPU runs.
class RecipesTest : public ::testing::TestWithParam<stats::RecipeKernel> {};

TEST_P(RecipesTest, EveryRecipeMatchesAnIndependentQuantizer) {
  if (std::string_view(FPSCOPE_ML_DTYPES_PYTHON).empty())
    GTEST_SKIP() << "no Python with ml_dtypes: scripts/python-env.sh installs one";
  const stats::RecipeKernel kernel = GetParam();
  if (!stats::recipe_kernel_supported(kernel)) GTEST_SKIP() << stats::recipe_kernel_name(kernel) << " not supported here";
  const Cases c;
  ASSERT_EQ(c.reference.size(), c.cases.size());
  for (const RecipeCase& rc : c.cases) {
    SCOPED_TRACE(rc.tensor.name);
    ASSERT_EQ(rc.request.rows * rc.request.cols, rc.tensor.size());
    RecipeResult got;
    stats::compute_recipes_with(kernel, rc.tensor.bytes.data(), rc.tensor.type, rc.request, &got);
    const Json& want = c.reference[rc.tensor.name];
    EXPECT_EQ(got.amax, num(want["amax"]));
    for (int i = 0; i < kRecipeCount; ++i) {
      const char* name = kRecipes[std::size_t(i)].name;
      SCOPED_TRACE(name);
      const RecipeOutcome& o = got.outcomes[std::size_t(i)];
      const Json& w = want["recipes"][name];
      EXPECT_EQ(o.values, w["values"].get<uint64_t>());
      EXPECT_EQ(o.underflow, w["underflow"].get<uint64_t>());
      EXPECT_EQ(o.subnormal, w["subnormal"].get<uint64_t>());
      EXPECT_EQ(o.saturated, w["saturated"].get<uint64_t>());
      EXPECT_EQ(o.blocks, w["blocks"].get<uint64_t>());
      EXPECT_EQ(o.blocks_lost, w["blocks_lost"].get<uint64_t>());
      EXPECT_EQ(o.blocks_nonfinite, w["blocks_nonfinite"].get<uint64_t>());
      const double scale = num(w["scale"]);
      if (std::isnan(scale))
        EXPECT_TRUE(std::isnan(o.scale)) << o.scale;
      else
        EXPECT_EQ(o.scale, scale);
      expect_sum_close(o.signal, num(w["signal"]), o.values, "signal");
      expect_sum_close(o.sse, num(w["sse"]), o.values, "sse");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, RecipesTest,
                         ::testing::Values(stats::RecipeKernel::Portable, stats::RecipeKernel::Avx2,
                                           stats::RecipeKernel::Avx512),
                         [](const auto& p) { return std::string(stats::recipe_kernel_name(p.param)); });

// The adversarial cases reach every outcome the counts distinguish: without this the comparison
// above could pass on tensors that never tie, saturate or lose a block.
TEST(Recipes, TheCasesReachEveryOutcome) {
  const std::vector<RecipeCase> cases = all_cases();
  RecipeOutcomes total{};
  for (const RecipeCase& rc : cases) {
    RecipeResult r;
    compute_recipes(rc.tensor.bytes.data(), rc.tensor.type, rc.request, &r);
    for (int i = 0; i < kRecipeCount; ++i) {
      RecipeOutcome& t = total[std::size_t(i)];
      const RecipeOutcome& o = r.outcomes[std::size_t(i)];
      t.underflow += o.underflow;
      t.subnormal += o.subnormal;
      t.saturated += o.saturated;
      t.blocks_lost += o.blocks_lost;
      t.blocks_nonfinite += o.blocks_nonfinite;
    }
  }
  for (int i = 0; i < kRecipeCount; ++i) {
    const contract::RecipeInfo& info = kRecipes[std::size_t(i)];
    SCOPED_TRACE(info.name);
    const RecipeOutcome& t = total[std::size_t(i)];
    EXPECT_GT(t.underflow, 0u);
    EXPECT_GT(t.subnormal, 0u);
    EXPECT_GT(t.blocks_lost, 0u);
    if (info.rule != contract::ScaleRule::MxCeil && info.rule != contract::ScaleRule::TensorCurrent &&
        info.rule != contract::ScaleRule::TensorCurrentPow2 && info.rule != contract::ScaleRule::Nvfp4) {
      EXPECT_GT(t.saturated, 0u);
    }
    if (info.rule == contract::ScaleRule::MxFloor || info.rule == contract::ScaleRule::MxCeil ||
        info.rule == contract::ScaleRule::Nvfp4) {
      EXPECT_GT(t.blocks_nonfinite, 0u);
    }
  }
}

// The rules' fixed points, by hand: a tensor whose amax is the element's largest value is scaled
// by 1 under current scaling, and loses nothing it can represent.
TEST(Recipes, CurrentScalingOfATensorAtTheFormatsLargestValue) {
  TestTensor t{"at-max", ElementType::F32, {}};
  for (double v : {448.0, -448.0, 1.0, 0.5, std::ldexp(1.0, -9), 0.0}) push(t, v);
  RecipeResult r;
  compute_recipes(t.bytes.data(), t.type, shape(1, t.size()), &r);
  const RecipeOutcome& o = r.outcomes[std::size_t(Recipe::CurrentE4M3)];
  EXPECT_EQ(o.scale, 1.0);
  EXPECT_EQ(o.values, 6u);
  EXPECT_EQ(o.subnormal, 1u);  // 2^-9, e4m3's smallest subnormal
  EXPECT_EQ(o.underflow + o.saturated, 0u);
  EXPECT_EQ(o.sse, 0.0);
  EXPECT_EQ(r.amax, 448.0);
}

// A program may run with flush-to-zero and round-toward-zero set: the outcome must not change.
TEST(Recipes, TheCallersFloatingPointModeChangesNothing) {
  const std::vector<RecipeCase> cases = all_cases();
  const auto it = std::find_if(cases.begin(), cases.end(), [](const RecipeCase& c) { return c.tensor.name == "f32-blocks"; });
  ASSERT_NE(it, cases.end());
  const RecipeCase& rc = *it;  // with fp32 subnormals and a tie-heavy block
  RecipeResult plain, odd;
  compute_recipes(rc.tensor.bytes.data(), rc.tensor.type, rc.request, &plain);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved | 0x8040u | 0x6000u));  // FTZ, DAZ, round toward zero
  compute_recipes(rc.tensor.bytes.data(), rc.tensor.type, rc.request, &odd);
  const unsigned during = _mm_getcsr();
  _mm_setcsr(saved);
  EXPECT_EQ(during & ~0x3Fu, (saved | 0x8040u | 0x6000u) & ~0x3Fu);  // the mode is given back
  for (int i = 0; i < kRecipeCount; ++i) {
    const RecipeOutcome& a = plain.outcomes[std::size_t(i)];
    const RecipeOutcome& b = odd.outcomes[std::size_t(i)];
    EXPECT_EQ(a.underflow, b.underflow);
    EXPECT_EQ(a.subnormal, b.subnormal);
    EXPECT_EQ(a.saturated, b.saturated);
    EXPECT_EQ(a.sse, b.sse);
  }
}

}  // namespace
}  // namespace fpscope::stats_test
