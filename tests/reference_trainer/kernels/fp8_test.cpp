// The fp8 (and fp4: MXFP4, NVFP4) quantize and dequantize kernels against the independent quantizer of
// tests/injector/stats/reference_recipes.py (numpy's fp32 arithmetic, ml_dtypes' casts): every
// 8-bit pattern, every scale, the delayed history and every dequantized value must be equal, on
// random tensors over a wide range and on tensors built for the edges (grid ties, saturation, zero,
// NaN and Inf blocks, fp32 subnormals, partial blocks and tiles), and so must the counts of the
// launch report (values flushed, made subnormal, saturated). Skipped where no Python with
// ml_dtypes was found at configure time. Also: the kernels' argument errors.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::launch_reported;
using mpt_test::Scalars;
using Json = nlohmann::json;

// One launch of a quantize kernel: the recipe's name in the reference and the kernel's arguments.
struct QuantizeCase {
  std::string recipe;
  const char* kernel;
  int dtype;            // MPT_DTYPE_E4M3 or MPT_DTYPE_E5M2
  Scalars scalars;
  int64_t block = 0;    // the dequantize kernel's `block` (0: per tensor)
  int64_t tile_rows = 1;
  std::vector<float> history;  // delayed scaling: the amaxes of the steps before, newest first
};

struct Input {
  std::string name;
  int64_t rows, cols;
  std::vector<float> values;
};

std::vector<float> wide_random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-24, 24), sign(0, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = (sign(rng) ? -1.0f : 1.0f) * std::ldexp(unit(rng), exponent(rng));
  return v;
}

// Values that land on the e4m3 and e5m2 grids' midpoints (ties) and on their edges once a
// power-of-two scale maps the block's largest value to the format's top binade.
std::vector<float> edges(int64_t rows, int64_t cols) {
  std::vector<float> v(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const int64_t mantissa = i % 16, binade = (i / 16) % 12;
    // 1 + (2m+1)/16: the midpoints of e4m3's grid within a binade (and grid values of e5m2's).
    v[static_cast<size_t>(i)] = std::ldexp(1.0f + float(2 * mantissa + 1) / 32.0f, int(binade) - 6) * ((i / 7) % 2 ? -1.0f : 1.0f);
  }
  const int64_t c = cols;
  // Row 1: the top binade's saturation ties of e4m3 (464 rounds to 448; above it saturates).
  for (int64_t j = 0; j < c; ++j) v[static_cast<size_t>(c + j)] = j % 3 == 0 ? 464.0f : j % 3 == 1 ? 465.0f : 448.0f;
  // Row 2: a zero block, then a NaN block, then an Inf block.
  for (int64_t j = 0; j < c; ++j) v[static_cast<size_t>(2 * c + j)] = 0.0f;
  v[static_cast<size_t>(2 * c + 40)] = std::numeric_limits<float>::quiet_NaN();
  v[static_cast<size_t>(2 * c + 70)] = -std::numeric_limits<float>::infinity();
  v[static_cast<size_t>(2 * c + 71)] = 3.0f;
  // Row 3: fp32 subnormals, then one block spanning 2^-100 to 2^100.
  for (int64_t j = 0; j < 32; ++j) v[static_cast<size_t>(3 * c + j)] = std::ldexp(float(j + 1), -149);
  for (int64_t j = 32; j < 64; ++j) v[static_cast<size_t>(3 * c + j)] = std::ldexp(1.5f, -100 + int(j - 32) * 6);
  return v;
}

QuantizeCase make_case(std::string recipe, const char* kernel, int dtype, Scalars scalars, int64_t block = 0,
                       int64_t tile_rows = 1, std::vector<float> history = {}) {
  return {std::move(recipe), kernel, dtype, std::move(scalars), block, tile_rows, std::move(history)};
}

std::vector<QuantizeCase> cases() {
  std::vector<QuantizeCase> all;
  all.push_back(make_case("current-e4m3", "fp8_quantize_tensor", MPT_DTYPE_E4M3, {}));
  all.push_back(make_case("current-e5m2", "fp8_quantize_tensor", MPT_DTYPE_E5M2, {}));
  all.push_back(make_case("current-pow2-e4m3", "fp8_quantize_tensor", MPT_DTYPE_E4M3, {{"pow2", 1}}));
  all.push_back(make_case("current-pow2-e5m2", "fp8_quantize_tensor", MPT_DTYPE_E5M2, {{"pow2", 1}}));
  all.push_back(make_case("delayed-e4m3", "fp8_quantize_tensor", MPT_DTYPE_E4M3, {{"update_history", 1}}, 0, 1, {3.0f, 0.0f, 700.0f, 1e-3f}));
  all.push_back(make_case("delayed-e5m2", "fp8_quantize_tensor", MPT_DTYPE_E5M2, {{"update_history", 1}}, 0, 1, {0.25f, 0.0f}));
  all.push_back(make_case("mxfp8-e4m3", "fp8_quantize_mx", MPT_DTYPE_E4M3, {{"block", 32}}, 32));
  all.push_back(make_case("mxfp8-e4m3-ceil", "fp8_quantize_mx", MPT_DTYPE_E4M3, {{"block", 32}, {"round_up", 1}}, 32));
  all.push_back(make_case("mxfp8-e5m2", "fp8_quantize_mx", MPT_DTYPE_E5M2, {{"block", 32}}, 32));
  all.push_back(make_case("block-e4m3", "fp8_quantize_block", MPT_DTYPE_E4M3, {{"block", 128}, {"tile_rows", 1}}, 128, 1));
  all.push_back(make_case("block-e5m2", "fp8_quantize_block", MPT_DTYPE_E5M2, {{"block", 128}, {"tile_rows", 1}}, 128, 1));
  all.push_back(make_case("block-e4m3", "fp8_quantize_block", MPT_DTYPE_E4M3, {{"block", 128}, {"tile_rows", 128}}, 128, 128));
  all.push_back(make_case("mxfp4", "fp8_quantize_mx", MPT_DTYPE_E2M1, {{"block", 32}}, 32));
  all.push_back(make_case("nvfp4", "fp8_quantize_nvfp4", MPT_DTYPE_E2M1, {{"block", 16}, {"tile_rows", 1}}, 16, 1));
  all.push_back(make_case("nvfp4", "fp8_quantize_nvfp4", MPT_DTYPE_E2M1, {{"block", 16}, {"tile_rows", 16}}, 16, 16));
  return all;
}

std::vector<Input> inputs() {
  std::vector<Input> all;
  all.push_back({"random", 7, 100, wide_random(700, 11)});
  all.push_back({"edges", 5, 200, edges(5, 200)});
  all.push_back({"tiles", 130, 260, wide_random(130 * 260, 12)});
  std::vector<float> narrow = wide_random(64, 13);
  for (float& x : narrow) x = std::ldexp(x, -30);  // every value below e4m3's range unscaled
  all.push_back({"narrow", 2, 32, narrow});
  return all;
}

std::string case_name(const Input& in, const QuantizeCase& c) {
  return in.name + "." + c.recipe + (c.tile_rows > 1 ? ".tiles" : "");
}

// Runs the reference once over every input and case.
Json reference(const std::vector<Input>& ins, const std::vector<QuantizeCase>& cs) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::path(::testing::TempDir()) / "fp8_reference_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return {};
  }
  const fs::path dir = pattern;
  Json manifest = Json::array();
  for (const Input& in : ins) {
    const fs::path file = dir / (in.name + ".bin");
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(in.values.data()), std::streamsize(in.values.size() * sizeof(float)));
    for (const QuantizeCase& c : cs) {
      Json history = Json::array();
      for (float h : c.history) history.push_back(double(h));
      manifest.push_back({{"name", case_name(in, c)}, {"file", file.string()}, {"rows", in.rows}, {"cols", in.cols},
                          {"recipe", c.recipe}, {"tile_rows", c.tile_rows}, {"history", history}});
    }
  }
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const std::string cmd = std::string(FPSCOPE_ML_DTYPES_PYTHON) + " " + FPSCOPE_RECIPES_REFERENCE + " --quantize " +
                          (dir / "manifest.json").string() + " " + (dir / "out.json").string();
  Json out;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "reference failed: " << cmd;
  } else {
    out = Json::parse(std::ifstream(dir / "out.json"));
  }
  fs::remove_all(dir);
  return out;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(Fp8Kernels, EveryPatternScaleAndDequantizedValueMatchesAnIndependentQuantizer) {
  if (std::string(FPSCOPE_ML_DTYPES_PYTHON).empty()) GTEST_SKIP() << "no Python with numpy and ml_dtypes";
  const std::vector<Input> ins = inputs();
  const std::vector<QuantizeCase> cs = cases();
  const Json want = reference(ins, cs);
  ASSERT_FALSE(want.empty());
  uint64_t flushed = 0, subnormal = 0, saturated = 0;  // over every case: each count is exercised
  for (const Input& in : ins) {
    for (const QuantizeCase& c : cs) {
      const std::string name = case_name(in, c);
      SCOPED_TRACE(name);
      const Json& w = want.at(name);
      HostTensor x({in.rows, in.cols}, MPT_DTYPE_F32, "x");
      std::memcpy(x.data(), in.values.data(), in.values.size() * sizeof(float));
      HostTensor q({in.rows, in.cols}, c.dtype, "q");
      const bool mx = std::string(c.kernel) == "fp8_quantize_mx", nvfp4 = std::string(c.kernel) == "fp8_quantize_nvfp4";
      const int64_t tr = c.block == 0 ? 1 : (in.rows + c.tile_rows - 1) / c.tile_rows;
      const int64_t tc = c.block == 0 ? 1 : (in.cols + c.block - 1) / c.block;
      HostTensor scale(c.block == 0 ? std::vector<int64_t>{1} : std::vector<int64_t>{tr, tc},
                       mx ? MPT_DTYPE_E8M0 : nvfp4 ? MPT_DTYPE_E4M3 : MPT_DTYPE_F32, "scale");
      HostTensor global({1}, MPT_DTYPE_F32, "global_scale_inv");
      HostTensor history({int64_t(c.history.size())}, MPT_DTYPE_F32, "amax_history");
      if (!c.history.empty()) std::memcpy(history.data(), c.history.data(), c.history.size() * sizeof(float));
      mpt_launch_report report{};
      const int status =
          nvfp4               ? launch_reported(c.kernel, {&x}, {&q, &scale, &global}, c.scalars, &report)
          : c.history.empty() ? launch_reported(c.kernel, {&x}, {&q, &scale}, c.scalars, &report)
                              : launch_reported(c.kernel, {&x, &history}, {&q, &scale, &history}, c.scalars, &report);
      ASSERT_EQ(status, MPT_OK) << mpt_last_error();
      // The launch report's counts of q: what quantizing did, as the reference counts it.
      const Json& counts = w.at("counts");
      const mpt_store_counts& stored = report.stores[0];
      EXPECT_EQ(stored.narrowed, 1u);
      EXPECT_EQ(stored.results, counts.at("results").get<uint64_t>());
      EXPECT_EQ(stored.flushed, counts.at("flushed").get<uint64_t>());
      EXPECT_EQ(stored.subnormal, counts.at("subnormal").get<uint64_t>());
      EXPECT_EQ(stored.overflowed, counts.at("saturated").get<uint64_t>());
      for (int o = 1; o < MPT_MAX_REPORTED_OUTPUTS; ++o) EXPECT_EQ(report.stores[o].narrowed, 0u) << "output " << o;
      flushed += stored.flushed, subnormal += stored.subnormal, saturated += stored.overflowed;

      const std::string hex = w.at("q").get<std::string>();
      ASSERT_EQ(hex.size(), size_t(2 * q.numel()));
      int64_t wrong = 0;
      for (int64_t i = 0; i < q.numel(); ++i) {
        const unsigned expected = unsigned(std::stoul(hex.substr(size_t(2 * i), 2), nullptr, 16));
        const unsigned got = static_cast<const uint8_t*>(q.data())[i];
        if (got != expected && ++wrong <= 5)
          ADD_FAILURE() << "value " << i << " (" << in.values[size_t(i)] << "): pattern 0x" << std::hex << got
                        << ", the reference 0x" << expected;
      }
      EXPECT_EQ(wrong, 0);
      const Json& scales = w.at("scales");
      ASSERT_EQ(int64_t(scales.size()), scale.numel());
      for (int64_t k = 0; k < scale.numel(); ++k) {
        const uint32_t got = mx || nvfp4 ? static_cast<const uint8_t*>(scale.data())[k]
                                         : bits_of(static_cast<const float*>(scale.data())[k]);
        EXPECT_EQ(got, scales[size_t(k)].get<uint32_t>()) << "scale " << k;
      }
      if (nvfp4) {
        EXPECT_EQ(bits_of(*static_cast<const float*>(global.data())), w.at("global").get<uint32_t>());
      }
      for (size_t k = 0; k < c.history.size(); ++k)
        EXPECT_EQ(static_cast<const float*>(history.data())[k], w.at("history")[k].get<float>()) << "history " << k;

      HostTensor y({in.rows, in.cols}, MPT_DTYPE_F32, "y");
      const Scalars layout = {{"block", double(c.block)}, {"tile_rows", double(c.tile_rows)}};
      ASSERT_EQ(nvfp4 ? launch("fp8_dequantize", {&q, &scale, &global}, {&y}, layout)
                      : launch("fp8_dequantize", {&q, &scale}, {&y}, layout),
                MPT_OK) << mpt_last_error();
      const Json& ys = w.at("y");
      int64_t wrong_y = 0;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const float got = static_cast<const float*>(y.data())[i];
        const uint32_t expected = ys[size_t(i)].get<uint32_t>();
        float e;
        std::memcpy(&e, &expected, 4);
        const bool same = std::isnan(e) ? std::isnan(got) : bits_of(got) == expected;
        if (!same && ++wrong_y <= 5) ADD_FAILURE() << "dequantized " << i << ": " << got << ", the reference " << e;
      }
      EXPECT_EQ(wrong_y, 0);
    }
  }
  EXPECT_GT(flushed, 0u);
  EXPECT_GT(subnormal, 0u);
  EXPECT_GT(saturated, 0u);
}

// Evaluation quantizes with the history without adding to it; an empty tensor adds nothing either.
TEST(Fp8Kernels, DelayedScalingLeavesTheHistoryAloneWhenAskedOrEmpty) {
  HostTensor x = HostTensor::from_values({2, 2}, {1.0, -3.5, 0.25, 2.0}, MPT_DTYPE_F32, "x");
  HostTensor q({2, 2}, MPT_DTYPE_E4M3, "q"), s({1}, MPT_DTYPE_F32, "scale_inv");
  HostTensor history = HostTensor::from_values({3}, {7.0, 0.0, 14.0}, MPT_DTYPE_F32, "amax_history");
  ASSERT_EQ(launch("fp8_quantize_tensor", {&x, &history}, {&q, &s, &history}, {{"update_history", 0}}), MPT_OK)
      << mpt_last_error();
  EXPECT_EQ(history.values(), (std::vector<double>{7.0, 0.0, 14.0}));
  EXPECT_EQ(s.value(0), double(1.0f / (448.0f / 14.0f)));  // the largest of the history: 14
  HostTensor empty({0, 4}, MPT_DTYPE_F32, "x"), q0({0, 4}, MPT_DTYPE_E4M3, "q");
  ASSERT_EQ(launch("fp8_quantize_tensor", {&empty, &history}, {&q0, &s, &history}, {{"update_history", 1}}), MPT_OK)
      << mpt_last_error();
  EXPECT_EQ(history.values(), (std::vector<double>{7.0, 0.0, 14.0}));
  ASSERT_EQ(launch("fp8_quantize_tensor", {&x, &history}, {&q, &s, &history}, {{"update_history", 1}}), MPT_OK);
  EXPECT_EQ(history.values(), (std::vector<double>{3.5, 7.0, 0.0}));  // newest first, the oldest gone
  HostTensor rows({3, 0}, MPT_DTYPE_F32, "x"), q3({3, 0}, MPT_DTYPE_E4M3, "q"), mx({3, 0}, MPT_DTYPE_E8M0, "scales");
  EXPECT_EQ(launch("fp8_quantize_mx", {&rows}, {&q3, &mx}, {{"block", 32}}), MPT_OK) << mpt_last_error();
}

TEST(Fp8Kernels, RejectWrongArguments) {
  HostTensor x({4, 32}, MPT_DTYPE_F32, "x"), q16({4, 32}, MPT_DTYPE_F16, "q"), q({4, 32}, MPT_DTYPE_E4M3, "q");
  HostTensor s({1}, MPT_DTYPE_F32, "scale_inv"), mx_scales({4, 2}, MPT_DTYPE_E8M0, "scales");
  EXPECT_EQ(launch("fp8_quantize_tensor", {&x}, {&q16, &s}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("expected dtype e4m3 or e5m2, got f16"), std::string::npos) << mpt_last_error();
  HostTensor q4({4, 32}, MPT_DTYPE_E2M1, "q");
  EXPECT_EQ(launch("fp8_quantize_tensor", {&x}, {&q4, &s}), MPT_ERR_BAD_ARGUMENTS);  // e2m1 needs block scales
  HostTensor block_scales({4, 2}, MPT_DTYPE_E4M3, "block_scales"), global({1}, MPT_DTYPE_F32, "global_scale_inv");
  EXPECT_EQ(launch("fp8_quantize_nvfp4", {&x}, {&q, &block_scales, &global}, {{"block", 16}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("expected dtype e2m1"), std::string::npos) << mpt_last_error();
  EXPECT_EQ(launch("fp8_quantize_mx", {&x}, {&q, &mx_scales}, {{"block", 32}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("expected shape [4,1]"), std::string::npos) << mpt_last_error();
  HostTensor history({3}, MPT_DTYPE_F32, "amax_history"), other({3}, MPT_DTYPE_F32, "other");
  EXPECT_EQ(launch("fp8_quantize_tensor", {&x, &history}, {&q, &s, &other}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("updated in place"), std::string::npos) << mpt_last_error();
  HostTensor y({4, 32}, MPT_DTYPE_F32, "y");
  EXPECT_EQ(launch("fp8_dequantize", {&q, &mx_scales}, {&y}, {{"block", 32}}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("expected shape [4,1]"), std::string::npos) << mpt_last_error();
  HostTensor s16({1}, MPT_DTYPE_F16, "scale_inv");
  EXPECT_EQ(launch("fp8_dequantize", {&q, &s16}, {&y}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_NE(std::string(mpt_last_error()).find("expected dtype f32, got f16"), std::string::npos) << mpt_last_error();
}

}  // namespace
