// The verdict on a launch's non-finite values (injector/preload/src/verdict.h), by its rules alone:
// no ring, no session, no tensor memory. Statistics come from compute_stats() over small arrays,
// so the kinds are what a real tensor of those values gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fpscope/common/allow_rules.h"
#include "verdict.h"

namespace fpscope::inject {
namespace {

using contract::kAllowNan;
using contract::kAllowNegInf;
using contract::kAllowPosInf;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TensorStats stats_of(std::vector<float> values) {
  TensorStats s;
  compute_stats(values.data(), ElementType::F32, values.size(), StatsLevel::Basic, &s);
  return s;
}

std::vector<contract::AllowRule> rules(const char* text) {
  std::vector<contract::AllowRule> r;
  std::string error;
  EXPECT_TRUE(common::parse_allow_rules(text, &r, &error)) << error;
  return r;
}

TEST(Verdict, KindsAreTheNonFiniteValuesATensorHolds) {
  EXPECT_EQ(verdict::kinds_of(stats_of({1, 2, 3})), 0);
  EXPECT_EQ(verdict::kinds_of(stats_of({1, kNaN})), kAllowNan);
  EXPECT_EQ(verdict::kinds_of(stats_of({-kInf, 0})), kAllowNegInf);
  EXPECT_EQ(verdict::kinds_of(stats_of({kInf, -kInf, kNaN})), kAllowNan | kAllowPosInf | kAllowNegInf);
}

TEST(Verdict, AnInputDamagesOnlyWithKindsNoRuleIntends) {
  const uint8_t intended = common::allowed_kinds(rules(contract::kDefaultAllowRules));  // -inf only
  EXPECT_EQ(intended, kAllowNegInf);
  EXPECT_FALSE(verdict::damages(0, intended));
  EXPECT_FALSE(verdict::damages(kAllowNegInf, intended));  // a mask's -inf passes through
  EXPECT_TRUE(verdict::damages(kAllowNan, intended));
  EXPECT_TRUE(verdict::damages(kAllowNegInf | kAllowPosInf, intended));
  EXPECT_TRUE(verdict::damages(kAllowNegInf, 0));  // --allow none: every non-finite input damages
}

TEST(Verdict, AnOutputIsIntendedByARuleOrByWhatIntendedInputsCarried) {
  const auto mask = rules("masked_fill*:-inf,attn.*:nan");
  // A rule matching the kernel, or the layer, that covers every kind the output holds.
  EXPECT_TRUE(verdict::output_allowed(kAllowNegInf, 0, mask, "masked_fill_", nullptr));
  EXPECT_TRUE(verdict::output_allowed(kAllowNan, 0, mask, "softmax", "attn.0"));
  EXPECT_FALSE(verdict::output_allowed(kAllowNan | kAllowNegInf, 0, mask, "masked_fill_", nullptr));
  EXPECT_FALSE(verdict::output_allowed(kAllowNegInf, 0, mask, "exp", "mlp"));
  // Carried in: only kinds the intended inputs brought (triu of a -inf mask), whatever the kernel.
  EXPECT_TRUE(verdict::output_allowed(kAllowNegInf, kAllowNegInf, {}, "triu", nullptr));
  EXPECT_FALSE(verdict::output_allowed(kAllowNegInf | kAllowNan, kAllowNegInf, {}, "add", nullptr));
  // Nothing to allow in a finite output.
  EXPECT_FALSE(verdict::output_allowed(0, kAllowNegInf, mask, "masked_fill_", nullptr));
}

TEST(Verdict, TheTrapWantsItsKindOnly) {
  const TensorStats nan = stats_of({1, kNaN}), inf = stats_of({-kInf}), finite = stats_of({1});
  EXPECT_TRUE(verdict::trap_wants(TrapKind::Nonfinite, nan));
  EXPECT_TRUE(verdict::trap_wants(TrapKind::Nonfinite, inf));
  EXPECT_TRUE(verdict::trap_wants(TrapKind::NaN, nan));
  EXPECT_FALSE(verdict::trap_wants(TrapKind::NaN, inf));
  EXPECT_TRUE(verdict::trap_wants(TrapKind::Inf, inf));
  EXPECT_FALSE(verdict::trap_wants(TrapKind::Inf, nan));
  for (TrapKind k : {TrapKind::None, TrapKind::Nonfinite, TrapKind::NaN, TrapKind::Inf})
    EXPECT_FALSE(verdict::trap_wants(k, finite));
  EXPECT_FALSE(verdict::trap_wants(TrapKind::None, nan));
  EXPECT_TRUE(verdict::first_is_wanted(TrapKind::Inf, wire::NonfiniteKind::NegInf));
  EXPECT_FALSE(verdict::first_is_wanted(TrapKind::Inf, wire::NonfiniteKind::NaN));
  EXPECT_TRUE(verdict::first_is_wanted(TrapKind::Nonfinite, wire::NonfiniteKind::NaN));
}

TEST(Verdict, ThePlaceSaysWhatTheAttributionKnows) {
  Attribution where;
  EXPECT_EQ(verdict::place_of(where), "");
  where.step = 3;
  EXPECT_EQ(verdict::place_of(where), " (step 3)");
  where.layer = "blocks.1.attn";
  where.phase = "forward";
  EXPECT_EQ(verdict::place_of(where), " (layer blocks.1.attn, step 3, phase forward)");
  EXPECT_EQ(verdict::tensor_label("fc1.out", 0), "fc1.out");
  EXPECT_EQ(verdict::tensor_label("", 2), "output 2");
  EXPECT_EQ(verdict::tensor_label(nullptr, 1), "output 1");
}

TEST(Verdict, TheTrapTextNamesTheTrappedKindWhereverTheCallerCouldLook) {
  const std::string place = " (layer fc1, step 4, phase forward)";
  // The first non-finite value is of the trapped kind.
  EXPECT_EQ(verdict::trap_text(TrapKind::Nonfinite, "exp", place, "fc1.out", wire::NonfiniteKind::PosInf, 17, std::nullopt),
            "first +Inf made by exp (layer fc1, step 4, phase forward) in fc1.out at index 17");
  // It is not, and the host looked up the first value of the trapped kind.
  EXPECT_EQ(verdict::trap_text(TrapKind::NaN, "div", place, "fc1.out", wire::NonfiniteKind::PosInf, 2,
                               verdict::WantedValue{wire::NonfiniteKind::NaN, 9}),
            "first NaN made by div (layer fc1, step 4, phase forward) in fc1.out at index 9");
  // It is not, and the data is gone (a device result): the text says both.
  EXPECT_EQ(verdict::trap_text(TrapKind::Inf, "div", "", "output 0", wire::NonfiniteKind::NaN, 5, std::nullopt),
            "first Inf made by div in output 0 (its first non-finite value, NaN, is at index 5)");
}

}  // namespace
}  // namespace fpscope::inject
