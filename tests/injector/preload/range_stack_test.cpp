// Tests of NVTX range stacks: a launch belongs to the innermost step, phase and layer range of
// the trainer's domain on its thread.
#include "range_stack.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace fpscope::inject {
namespace {

int trainer_domain_tag;  // any address stands for a domain handle
int other_domain_tag;

OpenRange trainer_range(uint32_t category, std::string message, int64_t step = -1, uint32_t id = 0) {
  OpenRange r;
  r.domain = &trainer_domain_tag;
  r.trainer_domain = true;
  r.category = category;
  r.message = std::move(message);
  r.step = step;
  r.message_id = id;
  return r;
}

TEST(RangeStack, InnermostRangeOfEachCategoryWins) {
  RangeStack s;
  EXPECT_EQ(s.attribution().step, -1);
  EXPECT_EQ(s.attribution().layer, nullptr);
  EXPECT_EQ(s.push(trainer_range(kStepCategory, "step", 12, 1)), 0);
  EXPECT_EQ(s.push(trainer_range(kPhaseCategory, "forward", -1, 2)), 1);
  EXPECT_EQ(s.push(trainer_range(kLayerCategory, "fc1", -1, 3)), 2);
  EXPECT_EQ(s.attribution().step, 12);
  EXPECT_STREQ(s.attribution().phase, "forward");
  EXPECT_EQ(s.attribution().phase_id, 2u);
  EXPECT_STREQ(s.attribution().layer, "fc1");
  EXPECT_EQ(s.attribution().layer_id, 3u);
  // A nested layer (a block inside a layer) takes over until it closes.
  s.push(trainer_range(kLayerCategory, "fc1.inner", -1, 4));
  EXPECT_STREQ(s.attribution().layer, "fc1.inner");
  EXPECT_EQ(s.pop(&trainer_domain_tag), 3);
  EXPECT_STREQ(s.attribution().layer, "fc1");
  EXPECT_EQ(s.pop(&trainer_domain_tag), 2);
  EXPECT_EQ(s.attribution().layer, nullptr);
  EXPECT_EQ(s.attribution().step, 12);
  s.pop(&trainer_domain_tag);
  s.pop(&trainer_domain_tag);
  EXPECT_EQ(s.attribution().step, -1);
  EXPECT_EQ(s.attribution().phase, nullptr);
  EXPECT_EQ(s.pop(&trainer_domain_tag), -1);  // nothing left to close
}

TEST(RangeStack, OtherDomainsNeitherAttributeNorCloseTrainerRanges) {
  RangeStack s;
  s.push(trainer_range(kStepCategory, "step", 4));
  OpenRange foreign;
  foreign.domain = &other_domain_tag;
  foreign.category = kLayerCategory;
  foreign.message = "not-a-layer";
  s.push(foreign);
  OpenRange plain;  // default domain, nvtxRangePushA
  plain.message = "user range";
  s.push(plain);
  EXPECT_EQ(s.attribution().layer, nullptr);
  EXPECT_EQ(s.attribution().step, 4);
  // Closing the trainer's range skips the inner ranges of other domains.
  EXPECT_EQ(s.pop(&trainer_domain_tag), 0);
  EXPECT_EQ(s.attribution().step, -1);
  EXPECT_EQ(s.depth(), 2u);
  EXPECT_EQ(s.pop(nullptr), 1);
  EXPECT_EQ(s.pop(&other_domain_tag), 0);
}

TEST(RangeStack, AttributionNamesSurviveGrowth) {
  RangeStack s;
  s.push(trainer_range(kLayerCategory, "a-layer-name-longer-than-small-string-storage"));
  for (int i = 0; i < 100; ++i) s.push(trainer_range(99, "filler " + std::to_string(i)));
  EXPECT_STREQ(s.attribution().layer, "a-layer-name-longer-than-small-string-storage");
}

TEST(RangeStack, EachThreadHasItsOwn) {
  this_thread_ranges().push(trainer_range(kStepCategory, "step", 7));
  int64_t seen_elsewhere = 0;
  std::thread([&] { seen_elsewhere = this_thread_ranges().attribution().step; }).join();
  EXPECT_EQ(seen_elsewhere, -1);
  EXPECT_EQ(this_thread_ranges().attribution().step, 7);
  this_thread_ranges().pop(&trainer_domain_tag);
}

}  // namespace
}  // namespace fpscope::inject
