// The device results still to come (injector/preload/src/device_results.h): queued tensors, the
// results that arrive before their launch's records and after, and launches given up.
#include <gtest/gtest.h>

#include "device_results.h"

namespace fpscope::inject {
namespace {

DeviceResults::Tensor tensor(uint64_t seq, wire::Role role, uint8_t slot) {
  DeviceResults::Tensor t;
  t.seq = seq;
  t.role = role;
  t.slot = slot;
  t.name = "t" + std::to_string(slot);
  return t;
}

TEST(DeviceResults, ResultsBeforeTheLaunchsRecordsWaitAndTheLaunchEndsWithItsLastResult) {
  DeviceResults r;
  r.begin(7, "conv", " (layer c1)", "c1");
  const uint64_t in = r.queue(tensor(7, wire::Role::Input, 0));
  const uint64_t out = r.queue(tensor(7, wire::Role::Output, 0));
  EXPECT_NE(in, out);
  ASSERT_NE(r.launch(7), nullptr);
  EXPECT_EQ(r.launch(7)->outstanding, 2);
  EXPECT_EQ(r.launch(7)->layer, "c1");
  EXPECT_TRUE(r.input_queued(7));

  // The input's result arrives before the launch's records: it waits in `early`.
  auto taken = r.take(in);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->role, wire::Role::Input);
  EXPECT_FALSE(r.take(in));  // once only
  EXPECT_FALSE(r.input_queued(7));
  r.launch(7)->early.emplace_back(std::move(*taken), TensorStats{});

  // The records are written: the early result is handed back, with the host inputs' verdict.
  auto early = r.written(7, false);
  ASSERT_EQ(early.size(), 1u);
  EXPECT_FALSE(r.launch(7)->inputs_finite);
  r.handled(7);
  r.settle(7);
  ASSERT_NE(r.launch(7), nullptr);  // the output is still outstanding
  ASSERT_TRUE(r.take(out));
  r.handled(7);
  EXPECT_EQ(r.launch(7), nullptr);  // done: forgotten
}

TEST(DeviceResults, ARefusedTensorAndAGivenUpLaunchLeaveNothingBehind) {
  DeviceResults r;
  r.begin(1, "k", "", nullptr);
  const uint64_t token = r.queue(tensor(1, wire::Role::Output, 0));
  r.unqueue(token);
  EXPECT_FALSE(r.take(token));
  EXPECT_TRUE(r.written(1, true).empty());
  r.settle(1);
  EXPECT_EQ(r.launch(1), nullptr);  // nothing outstanding once written

  r.begin(2, "k", "", nullptr);
  const uint64_t late = r.queue(tensor(2, wire::Role::Output, 0));
  r.drop(2);  // the kernel threw
  EXPECT_EQ(r.launch(2), nullptr);
  EXPECT_TRUE(r.take(late));  // its result still comes, and finds no launch to belong to
}

}  // namespace
}  // namespace fpscope::inject
