// Builds the comparison cases of cuda_cases.h. Inputs come from a fixed-seed generator plus the
// values where rounding is delicate: signed zeros, NaN payloads, infinities, fp16's overflow
// threshold 65520, fp16 and fp32 subnormals.
#include "cuda_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace mpt_cuda_test {
namespace {

constexpr int F32 = MPT_DTYPE_F32, F16 = MPT_DTYPE_F16, BF16 = MPT_DTYPE_BF16;
const int kFloatTypes[] = {F32, F16, BF16};

const char* tag(int dtype) { return dtype == F32 ? "f32" : dtype == F16 ? "f16" : "bf16"; }

float bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/* Values where conversions and comparisons are delicate, then random ones. */
std::vector<float> special_values(std::mt19937& rng, size_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f, 1e30f, -1e-40f, bits(0x7fc00000u),
                          bits(0xffa00001u), bits(0x7f800001u), inf, -inf, 3.0e38f, 0.1f, -2.5f};
  std::normal_distribution<float> normal(0.0f, 3.0f);
  while (v.size() < n) v.push_back(normal(rng));
  v.resize(n);
  return v;
}

ComparisonCase exact(std::string label, LaunchSpec spec) {
  return ComparisonCase{std::move(label), std::move(spec), true, 0.0, 0.0};
}

ComparisonCase close(std::string label, LaunchSpec spec, double rtol, double atol) {
  return ComparisonCase{std::move(label), std::move(spec), false, rtol, atol};
}

/* Tolerance of a summation done in another order: tight for f32 outputs, one 16-bit ulp else. */
double sum_rtol(int out_dtype) { return out_dtype == F32 ? 1e-4 : 1e-2; }
double sum_atol(int out_dtype) { return out_dtype == F32 ? 1e-4 : 1e-3; }

// [SECTION] data movement and pointwise

void add_data_movement(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  for (int from : kFloatTypes) {
    for (int to : kFloatTypes) {
      LaunchSpec s{"cast", {floats("x", from, {64}, special_values(rng, 64))}, {output("y", to, {64})}, {}};
      cases.push_back(exact(std::string("cast_") + tag(from) + "_to_" + tag(to), s));
    }
    LaunchSpec fill{"fill", {}, {output("y", from, {33})}, {{"value", 65520.0}}};
    cases.push_back(exact(std::string("fill_overflow_") + tag(from), fill));
    LaunchSpec fill_small{"fill", {}, {output("y", from, {33})}, {{"value", 0.1}}};
    cases.push_back(exact(std::string("fill_tenth_") + tag(from), fill_small));
    for (int kind = 0; kind < 3; ++kind) {
      TensorSpec x = random_floats("x", from, {5, 7}, rng);
      LaunchSpec f{"inject_fault", {x}, {in_place(x, 0)}, {{"index", 17}, {"kind", kind}}};
      cases.push_back(exact(std::string("inject_fault_") + tag(from) + "_kind" + std::to_string(kind), f));
    }
  }
  cases.push_back(exact("fill_i32", LaunchSpec{"fill", {}, {output("y", MPT_DTYPE_I32, {9})}, {{"value", -7}}}));
  TensorSpec x = random_floats("x", F16, {3, 50}, rng);
  cases.push_back(exact("copy_f16", LaunchSpec{"copy", {x}, {output("y", F16, {3, 50})}, {}}));
}

void add_pointwise(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  for (int in : kFloatTypes) {
    for (int out : kFloatTypes) {
      TensorSpec x = floats("x", in, {4, 16}, special_values(rng, 64));
      cases.push_back(exact(std::string("relu_forward_") + tag(in) + "_" + tag(out),
                            LaunchSpec{"relu_forward", {x}, {output("y", out, {4, 16})}, {}}));
    }
    TensorSpec dy = floats("dy", in, {4, 16}, special_values(rng, 64));
    TensorSpec y = random_floats("y", F32, {4, 16}, rng);
    cases.push_back(exact(std::string("relu_backward_") + tag(in),
                          LaunchSpec{"relu_backward", {dy, y}, {output("dx", in, {4, 16})}, {}}));
  }
}

// [SECTION] pooling, log-softmax, loss, accuracy

void add_pooling(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  for (int dtype : kFloatTypes) {
    std::vector<float> values = special_values(rng, 2 * 3 * 6 * 6);
    std::shuffle(values.begin(), values.end(), rng);
    TensorSpec x = floats("x", dtype, {2, 3, 6, 6}, values);
    cases.push_back(exact(std::string("maxpool_k2_") + tag(dtype),
                          LaunchSpec{"maxpool2d_forward", {x},
                                     {output("y", dtype, {2, 3, 3, 3}), output("argmax", MPT_DTYPE_I32, {2, 3, 3, 3})},
                                     {{"kernel", 2}}}));
    cases.push_back(exact(std::string("maxpool_k3_s2_") + tag(dtype),
                          LaunchSpec{"maxpool2d_forward", {x},
                                     {output("y", dtype, {2, 3, 2, 2}), output("argmax", MPT_DTYPE_I32, {2, 3, 2, 2})},
                                     {{"kernel", 3}, {"stride", 2}}}));
    // Backward with repeated argmax entries: overlapping windows add up in order.
    std::uniform_int_distribution<int32_t> where(0, 35);
    std::vector<int32_t> argmax(2 * 3 * 3 * 3);
    for (auto& a : argmax) a = where(rng) % 12;
    TensorSpec dy = random_floats("dy", dtype, {2, 3, 3, 3}, rng);
    cases.push_back(exact(std::string("maxpool_backward_") + tag(dtype),
                          LaunchSpec{"maxpool2d_backward", {dy, ints("argmax", {2, 3, 3, 3}, argmax)},
                                     {output("dx", dtype, {2, 3, 6, 6})}, {}}));
  }
}

void add_softmax_and_loss(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  std::vector<int32_t> labels = {3, 0, 9, 9, 1, 5, 7, 2};
  for (int dtype : kFloatTypes) {
    TensorSpec x = random_floats("x", dtype, {8, 10}, rng, 4.0f);
    // expf/logf on the device may differ from the host's libm by an ulp or two.
    cases.push_back(close(std::string("log_softmax_forward_") + tag(dtype),
                          LaunchSpec{"log_softmax_forward", {x}, {output("y", dtype, {8, 10})}, {}},
                          dtype == F32 ? 2e-6 : 1e-2, dtype == F32 ? 2e-6 : 1e-3));
    TensorSpec dy = random_floats("dy", dtype, {8, 10}, rng);
    TensorSpec y = random_floats("y", F32, {8, 10}, rng);
    cases.push_back(close(std::string("log_softmax_backward_") + tag(dtype),
                          LaunchSpec{"log_softmax_backward", {dy, y}, {output("dx", dtype, {8, 10})}, {}},
                          dtype == F32 ? 2e-6 : 1e-2, dtype == F32 ? 2e-6 : 1e-3));
    TensorSpec logp = random_floats("logp", dtype, {8, 10}, rng, 2.0f);
    cases.push_back(exact(std::string("nll_loss_forward_") + tag(dtype),
                          LaunchSpec{"nll_loss_forward", {logp, ints("labels", {8}, labels)},
                                     {output("loss", F32, {1})}, {}}));
    cases.push_back(exact(std::string("nll_loss_backward_") + tag(dtype),
                          LaunchSpec{"nll_loss_backward",
                                     {ints("labels", {8}, labels), floats("scale", F32, {1}, {65536.0f})},
                                     {output("dlogp", dtype, {8, 10})}, {}}));
    std::vector<float> scores(80);
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 7) % 10);
    scores[12] = std::numeric_limits<float>::quiet_NaN();  // row 1 never counts
    scores[30] = scores[31] = 20.0f;                       // row 3: a tie, the first wins
    cases.push_back(exact(std::string("accuracy_count_") + tag(dtype),
                          LaunchSpec{"accuracy_count", {floats("logp", dtype, {8, 10}, scores),
                                                        ints("labels", {8}, labels)},
                                     {output("correct", MPT_DTYPE_I32, {1})}, {}}));
  }
}

// [SECTION] loss scaler and optimizers

void add_loss_scaler(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  for (float scale : {65536.0f, 1.0f, 3.0f}) {
    for (bool with_inf : {false, true}) {
      TensorSpec g1 = random_floats("g1", F16, {100}, rng, 1000.0f);
      TensorSpec g2 = random_floats("g2", F32, {7, 9}, rng, 1000.0f);
      TensorSpec g3 = random_floats("g3", BF16, {40}, rng, 1000.0f);
      if (with_inf) g2 = floats("g2", F32, {7, 9}, special_values(rng, 63));
      LaunchSpec s{"amp_unscale_check", {floats("scale", F32, {1}, {scale}), g1, g2, g3},
                   {output("found_inf", F32, {1}), in_place(g1, 1), in_place(g2, 2), in_place(g3, 3)}, {}};
      cases.push_back(exact("amp_unscale_check_" + std::to_string(static_cast<int>(scale)) +
                                (with_inf ? "_inf" : "_finite"), s));
    }
  }
  struct Update { const char* label; float scale; int32_t tracker; float found; int interval; };
  const Update updates[] = {{"backoff", 65536.0f, 5, 1.0f, 2000}, {"count", 65536.0f, 5, 0.0f, 2000},
                            {"grow", 65536.0f, 1999, 0.0f, 2000}, {"grow_to_inf", 3.0e38f, 0, 0.0f, 1},
                            {"odd_factor", 3.3f, 2, 1.0f, 3}};
  for (const auto& u : updates) {
    TensorSpec scale = floats("scale", F32, {1}, {u.scale});
    TensorSpec tracker = ints("growth_tracker", {1}, {u.tracker});
    LaunchSpec s{"amp_update_scale", {scale, tracker, floats("found_inf", F32, {1}, {u.found})},
                 {in_place(scale, 0), in_place(tracker, 1)},
                 {{"growth_factor", 2.0}, {"backoff_factor", 0.3}, {"growth_interval", u.interval}}};
    cases.push_back(exact(std::string("amp_update_scale_") + u.label, s));
  }
}

void add_optimizers(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  const std::vector<int64_t> shape = {37, 29};
  for (int param_type : kFloatTypes) {
    for (int state_type : {F32, BF16}) {
      for (int step : {1, 4}) {
        for (int sr : {0, 1}) {
          std::string suffix = std::string(tag(param_type)) + "_state_" + tag(state_type) + "_step" +
                               std::to_string(step) + (sr ? "_sr" : "_rne");
          TensorSpec p = random_floats("param", param_type, shape, rng);
          TensorSpec g = random_floats("grad", F16, shape, rng, 0.01f);
          TensorSpec buf = random_floats("momentum_buf", state_type, shape, rng, 0.01f);
          cases.push_back(exact("sgd_" + suffix,
              LaunchSpec{"sgd_step", {p, g, buf}, {in_place(p, 0), in_place(buf, 2)},
                         {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 1e-4},
                          {"stochastic_rounding", sr}, {"seed", 12345}, {"step", step}}}));
          TensorSpec m = random_floats("exp_avg", state_type, shape, rng, 0.01f);
          std::vector<float> squares(37 * 29);
          std::uniform_real_distribution<float> positive(0.0f, 1e-4f);
          for (auto& v : squares) v = positive(rng);
          TensorSpec v = floats("exp_avg_sq", state_type, shape, squares);
          double beta1 = step == 1 ? 0.9 : 0.3;  // lerp weight on either side of 0.5
          cases.push_back(exact("adamw_" + suffix,
              LaunchSpec{"adamw_step", {p, g, m, v}, {in_place(p, 0), in_place(m, 2), in_place(v, 3)},
                         {{"lr", 1e-3}, {"beta1", beta1}, {"beta2", 0.999}, {"eps", 1e-8},
                          {"weight_decay", 0.01}, {"step", step}, {"stochastic_rounding", sr},
                          {"seed", 99}}}));
        }
      }
    }
  }
  TensorSpec p = random_floats("param", F16, shape, rng);
  TensorSpec g = random_floats("grad", F32, shape, rng);
  TensorSpec buf = random_floats("momentum_buf", F32, shape, rng);
  cases.push_back(exact("sgd_plain_f16", LaunchSpec{"sgd_step", {p, g, buf}, {in_place(p, 0), in_place(buf, 2)},
                                                    {{"lr", 0.01}, {"step", 3}}}));
}

// [SECTION] products: linear and convolution

struct Types { int a, b, out; };
const Types kProductTypes[] = {{F32, F32, F32}, {F16, F16, F16}, {BF16, BF16, F32}, {F32, F16, BF16}};

std::string product_label(const char* kernel, const Types& t, bool fp16) {
  return std::string(kernel) + "_" + tag(t.a) + "_" + tag(t.b) + "_to_" + tag(t.out) +
         (fp16 ? "_partials_f16" : "_partials_f32");
}

void add_product_case(std::vector<ComparisonCase>& cases, std::string label, LaunchSpec spec,
                      bool fp16, int out_dtype) {
  // fp16 partials run the CPU's loop order exactly; fp32 partials sum in cuBLAS's order.
  if (fp16) cases.push_back(exact(std::move(label), std::move(spec)));
  else cases.push_back(close(std::move(label), std::move(spec), sum_rtol(out_dtype), sum_atol(out_dtype)));
}

void add_linear(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  const int64_t N = 5, I = 37, O = 11;
  for (const Types& t : kProductTypes) {
    for (bool fp16 : {false, true}) {
      std::vector<std::pair<std::string, double>> sc = {{"partials_fp16", fp16 ? 1 : 0}};
      TensorSpec x = random_floats("x", t.a, {N, I}, rng), w = random_floats("w", t.b, {O, I}, rng, 0.3f);
      TensorSpec b = random_floats("b", t.b, {O}, rng), dy = random_floats("dy", t.a, {N, O}, rng);
      add_product_case(cases, product_label("linear_forward", t, fp16),
                       LaunchSpec{"linear_forward", {x, w, b}, {output("y", t.out, {N, O})}, sc}, fp16, t.out);
      add_product_case(cases, product_label("linear_backward_data", t, fp16),
                       LaunchSpec{"linear_backward_data", {dy, w}, {output("dx", t.out, {N, I})}, sc}, fp16, t.out);
      add_product_case(cases, product_label("linear_backward_weight", t, fp16),
                       LaunchSpec{"linear_backward_weight", {dy, x},
                                  {output("dw", t.out, {O, I}), output("db", t.out, {O})}, sc},
                       fp16, t.out);
    }
  }
}

void add_conv(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  struct Geometry { const char* label; int64_t R, stride, padding; };
  const Geometry geometries[] = {{"3x3_s1_p1", 3, 1, 1}, {"3x3_s2_p0", 3, 2, 0}, {"2x2_s2_p1", 2, 2, 1}};
  const int64_t N = 2, C = 3, H = 7, W = 7, K = 4;
  for (const Geometry& g : geometries) {
    int64_t P = (H + 2 * g.padding - g.R) / g.stride + 1, Q = (W + 2 * g.padding - g.R) / g.stride + 1;
    for (const Types& t : kProductTypes) {
      for (bool fp16 : {false, true}) {
        std::vector<std::pair<std::string, double>> sc = {
            {"stride", g.stride}, {"padding", g.padding}, {"partials_fp16", fp16 ? 1 : 0}};
        TensorSpec x = random_floats("x", t.a, {N, C, H, W}, rng);
        TensorSpec w = random_floats("w", t.b, {K, C, g.R, g.R}, rng, 0.3f);
        TensorSpec b = random_floats("b", t.b, {K}, rng);
        TensorSpec dy = random_floats("dy", t.a, {N, K, P, Q}, rng);
        std::string geo = std::string("_") + g.label;
        add_product_case(cases, product_label("conv2d_forward", t, fp16) + geo,
                         LaunchSpec{"conv2d_forward", {x, w, b}, {output("y", t.out, {N, K, P, Q})}, sc},
                         fp16, t.out);
        add_product_case(cases, product_label("conv2d_backward_data", t, fp16) + geo,
                         LaunchSpec{"conv2d_backward_data", {dy, w}, {output("dx", t.out, {N, C, H, W})}, sc},
                         fp16, t.out);
        add_product_case(cases, product_label("conv2d_backward_weight", t, fp16) + geo,
                         LaunchSpec{"conv2d_backward_weight", {dy, x},
                                    {output("dw", t.out, {K, C, g.R, g.R}), output("db", t.out, {K})}, sc},
                         fp16, t.out);
      }
    }
  }
}

// [SECTION] group norm

void add_group_norm(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  const int64_t N = 2, C = 4, H = 3, W = 5;
  for (int dtype : kFloatTypes) {
    TensorSpec x = random_floats("x", dtype, {N, C, H, W}, rng, 2.0f);
    TensorSpec gamma = random_floats("gamma", F32, {C}, rng), beta = random_floats("beta", F32, {C}, rng);
    // Sums in double in another order: the stored f32 mean/rstd may differ in the last bit.
    double rtol = dtype == F32 ? 1e-5 : 1e-2, atol = dtype == F32 ? 1e-5 : 1e-3;
    cases.push_back(close(std::string("group_norm_forward_") + tag(dtype),
                          LaunchSpec{"group_norm_forward", {x, gamma, beta},
                                     {output("y", dtype, {N, C, H, W}), output("mean", F32, {N, 2}),
                                      output("rstd", F32, {N, 2})},
                                     {{"groups", 2}, {"eps", 1e-5}}},
                          rtol, atol));
    TensorSpec dy = random_floats("dy", dtype, {N, C, H, W}, rng);
    TensorSpec mean = random_floats("mean", F32, {N, 2}, rng, 0.1f);
    std::vector<float> rstd_values = {0.9f, 1.1f, 0.7f, 1.3f};
    TensorSpec rstd = floats("rstd", F32, {N, 2}, rstd_values);
    cases.push_back(close(std::string("group_norm_backward_") + tag(dtype),
                          LaunchSpec{"group_norm_backward", {dy, x, gamma, mean, rstd},
                                     {output("dx", dtype, {N, C, H, W}), output("dgamma", F32, {C}),
                                      output("dbeta", F32, {C})},
                                     {{"groups", 2}}},
                          rtol, atol));
  }
}

// [SECTION] fp8 and fp4 quantization

/* Values over a wide range (2^-24 to 2^25, both signs) with the edges of quantization: zeros, grid
 * ties of e4m3 and e5m2 in several binades, the saturation ties (464, 61440, 7), NaN, infinities
 * and fp32 subnormals, placed so that some blocks hold them and others not. */
std::vector<float> quantize_values(std::mt19937& rng, int64_t n, bool specials) {
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-24, 24), coin(0, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = (coin(rng) ? -1.0f : 1.0f) * std::ldexp(unit(rng), exponent(rng));
  const float ties[] = {0.0f, -0.0f, 464.0f, -465.0f, 448.0f, 61440.0f, 57344.0f, 7.0f, 6.0f, 1.0625f, 1.1875f,
                        std::ldexp(1.125f, -7), std::ldexp(1.0f, -10), std::ldexp(1.0f, -17), 1e-40f, -3e-39f};
  for (size_t i = 0; i < std::size(ties) && i * 37 < v.size(); ++i) v[i * 37] = ties[i];
  if (specials && v.size() > 200) {
    v[70] = std::numeric_limits<float>::quiet_NaN();
    v[140] = -std::numeric_limits<float>::infinity();
    v[199] = std::numeric_limits<float>::infinity();
    for (size_t i = 96; i < 128; ++i) v[i] = 0.0f;  // an all-zero block of 32
  }
  return v;
}

void add_quantize(std::vector<ComparisonCase>& cases, std::mt19937& rng) {
  const int E4M3 = MPT_DTYPE_E4M3, E5M2 = MPT_DTYPE_E5M2, E2M1 = MPT_DTYPE_E2M1, E8M0 = MPT_DTYPE_E8M0;
  const int64_t rows = 6, cols = 200;  // partial blocks of 32, 128 and 16 at each row's end
  for (bool specials : {false, true}) {
    const std::string tail = specials ? "_specials" : "";
    for (int dtype : kFloatTypes) {
      const TensorSpec x = floats("x", dtype, {rows, cols}, quantize_values(rng, rows * cols, specials));
      const std::string t = std::string("_") + tag(dtype) + tail;
      for (int q : {E4M3, E5M2}) {
        const std::string f = q == E4M3 ? "_e4m3" : "_e5m2";
        cases.push_back(exact("fp8_quantize_current" + f + t,
                              LaunchSpec{"fp8_quantize_tensor", {x}, {output("q", q, {rows, cols}), output("s", F32, {1})}, {}}));
        cases.push_back(exact("fp8_quantize_current_pow2" + f + t,
                              LaunchSpec{"fp8_quantize_tensor", {x}, {output("q", q, {rows, cols}), output("s", F32, {1})},
                                         {{"pow2", 1}}}));
        const TensorSpec history = floats("amax_history", F32, {4}, {3.0f, 0.0f, 700.0f, 1e-3f});
        cases.push_back(exact("fp8_quantize_delayed" + f + t,
                              LaunchSpec{"fp8_quantize_tensor", {x, history},
                                         {output("q", q, {rows, cols}), output("s", F32, {1}), in_place(history, 1)},
                                         {{"update_history", 1}}}));
        // An infinite entry (a caller's history) gives the scale 1, as an empty one does.
        const TensorSpec infinite = floats("amax_history", F32, {2}, {2.0f, std::numeric_limits<float>::infinity()});
        cases.push_back(exact("fp8_quantize_delayed_infinite_pow2" + f + t,
                              LaunchSpec{"fp8_quantize_tensor", {x, infinite},
                                         {output("q", q, {rows, cols}), output("s", F32, {1}), in_place(infinite, 1)},
                                         {{"update_history", 1}, {"pow2", 1}}}));
        for (bool up : {false, true})
          cases.push_back(exact(std::string("fp8_quantize_mx") + (up ? "_ceil" : "") + f + t,
                                LaunchSpec{"fp8_quantize_mx", {x}, {output("q", q, {rows, cols}), output("scales", E8M0, {rows, 7})},
                                           {{"round_up", up ? 1 : 0}}}));
        cases.push_back(exact("fp8_quantize_block" + f + t,
                              LaunchSpec{"fp8_quantize_block", {x}, {output("q", q, {rows, cols}), output("s", F32, {rows, 2})}, {}}));
      }
      cases.push_back(exact("fp8_quantize_block_tiles" + t,
                            LaunchSpec{"fp8_quantize_block", {x}, {output("q", E4M3, {rows, cols}), output("s", F32, {2, 4})},
                                       {{"block", 64}, {"tile_rows", 4}}}));
      cases.push_back(exact("fp8_quantize_mxfp4" + t,
                            LaunchSpec{"fp8_quantize_mx", {x}, {output("q", E2M1, {rows, cols}), output("scales", E8M0, {rows, 7})}, {}}));
      cases.push_back(exact("fp8_quantize_nvfp4" + t,
                            LaunchSpec{"fp8_quantize_nvfp4", {x},
                                       {output("q", E2M1, {rows, cols}), output("scales", E4M3, {rows, 13}), output("g", F32, {1})},
                                       {}}));
      cases.push_back(exact("fp8_quantize_nvfp4_empty" + t,
                            LaunchSpec{"fp8_quantize_nvfp4", {floats("x", dtype, {0, 32}, {})},
                                       {output("q", E2M1, {0, 32}), output("scales", E4M3, {0, 2}), output("g", F32, {1})},
                                       {}}));
      cases.push_back(exact("fp8_quantize_nvfp4_tiles" + t,
                            LaunchSpec{"fp8_quantize_nvfp4", {x},
                                       {output("q", E2M1, {rows, cols}), output("scales", E4M3, {1, 13}), output("g", F32, {1})},
                                       {{"tile_rows", 16}}}));
    }
  }
  // Dequantization of every byte pattern under each kind of scale (the values of the patterns a
  // format does not use, e2m1's high nibble, are ignored as the CPU ignores them).
  std::vector<uint8_t> patterns(512);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint8_t>(i);
  auto bytes = [&](const char* name, int dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& b) {
    TensorSpec t{name, dtype, std::move(shape), b, -1};
    return t;
  };
  const TensorSpec f32_scale = floats("scale", F32, {1}, {0.0078125f});
  const TensorSpec f32_scales = floats("scale", F32, {4, 4}, quantize_values(rng, 16, false));
  std::vector<uint8_t> e8m0(16), e4m3(32);
  for (size_t i = 0; i < e8m0.size(); ++i) e8m0[i] = static_cast<uint8_t>(i * 17);  // 0xFF (NaN) among them
  for (size_t i = 0; i < e4m3.size(); ++i) e4m3[i] = static_cast<uint8_t>(i * 4 + 1);
  for (int q : {E4M3, E5M2}) {
    const std::string f = q == E4M3 ? "_e4m3" : "_e5m2";
    const TensorSpec qt = bytes("q", q, {4, 128}, patterns);
    cases.push_back(exact("fp8_dequantize_tensor" + f, LaunchSpec{"fp8_dequantize", {qt, f32_scale}, {output("y", F32, {4, 128})}, {}}));
    cases.push_back(exact("fp8_dequantize_block" + f + "_bf16",
                          LaunchSpec{"fp8_dequantize", {qt, f32_scales}, {output("y", BF16, {4, 128})}, {{"block", 32}}}));
    cases.push_back(exact("fp8_dequantize_mx" + f,
                          LaunchSpec{"fp8_dequantize", {qt, bytes("scale", E8M0, {4, 4}, e8m0)}, {output("y", F32, {4, 128})},
                                     {{"block", 32}}}));
  }
  const TensorSpec q4 = bytes("q", E2M1, {4, 128}, patterns);
  cases.push_back(exact("fp8_dequantize_mxfp4",
                        LaunchSpec{"fp8_dequantize", {q4, bytes("scale", E8M0, {4, 4}, e8m0)}, {output("y", F16, {4, 128})},
                                   {{"block", 32}}}));
  cases.push_back(exact("fp8_dequantize_nvfp4",
                        LaunchSpec{"fp8_dequantize", {q4, bytes("scale", E4M3, {4, 8}, e4m3), floats("g", F32, {1}, {3.0e-3f})},
                                   {output("y", F32, {4, 128})}, {{"block", 16}}}));
}

std::vector<ComparisonCase> build_cases() {
  std::mt19937 rng(20241121);
  std::vector<ComparisonCase> cases;
  add_data_movement(cases, rng);
  add_pointwise(cases, rng);
  add_pooling(cases, rng);
  add_softmax_and_loss(cases, rng);
  add_loss_scaler(cases, rng);
  add_optimizers(cases, rng);
  add_linear(cases, rng);
  add_conv(cases, rng);
  add_group_norm(cases, rng);
  add_quantize(cases, rng);
  return cases;
}

}  // namespace

const std::vector<ComparisonCase>& comparison_cases() {
  static const std::vector<ComparisonCase> cases = build_cases();
  return cases;
}

}  // namespace mpt_cuda_test
