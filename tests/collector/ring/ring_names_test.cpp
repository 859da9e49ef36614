// Ring names carry their collector's identity, and `fpscope run` removes the rings of collectors
// that died (a SIGKILLed collector cannot remove its own): never a ring whose collector still runs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "fpscope/collector/ring.h"
#include "fpscope/collector/ring_names.h"
#include "processes.h"

namespace fpscope {
namespace {

bool shm_exists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(RingNames, NameCarriesTheCollectorsIdentity) {
  const common::ProcessIdentity me = common::self_identity();
  ASSERT_GT(me.start_ticks, 0u);
  const std::string name = ring_name_for(me, 0xabcdef12u);
  EXPECT_EQ(name, "/fpscope-" + std::to_string(me.pid) + "-" + std::to_string(me.start_ticks) + "-abcdef12");
  const auto back = ring_collector(name);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->pid, me.pid);
  EXPECT_EQ(back->start_ticks, me.start_ticks);
  EXPECT_EQ(ring_collector(name.substr(1))->pid, me.pid);  // as /dev/shm lists it
  // A sibling ring (another process of the run) names the same collector.
  EXPECT_EQ(ring_collector(name + "-3")->pid, me.pid);
  EXPECT_FALSE(ring_collector(name + "-0"));
  EXPECT_FALSE(ring_collector(name + "-x"));
}

TEST(RingNames, OtherNamesAreNotRings) {
  for (const char* name : {"", "/", "/fpscope-", "/fpscope-12-34", "/fpscope-12-34-abc", "/fpscope-12-34-abcdefgh",
                           "/fpscope-x-34-abcdef12", "/fpscope-0-34-abcdef12", "/fpscope-12--abcdef12",
                           "/fpscope-test-dup-0", "/other-12-34-abcdef12", "/fpscope-12-34-abcdef12-extra",
                           "/fpscope-12-34-abcdef12-", "/fpscope-12-34-abcdef12-1-2"}) {
    EXPECT_FALSE(ring_collector(name)) << name;
  }
}

TEST(RingNames, OrphanedRingsAreRemovedLiveOnesKept) {
  std::string error;
  common::ProcessIdentity dead = common::self_identity();
  dead.pid = test::reaped_pid();
  common::ProcessIdentity reused = common::self_identity();
  reused.start_ticks += 1;  // our pid, but not our start: a collector that had this pid before us
  const common::ProcessIdentity me = common::self_identity();
  // Each name holds a collector identity no other test process has, so a fixed random part will do.
  const uint32_t token = 0x7e57;
  auto orphan = RingConsumer::create(ring_name_for(dead, token), kMinRingSlots, &error);
  ASSERT_TRUE(orphan) << error;
  auto orphan2 = RingConsumer::create(ring_name_for(reused, token), kMinRingSlots, &error);
  ASSERT_TRUE(orphan2) << error;
  auto live = RingConsumer::create(ring_name_for(me, token), kMinRingSlots, &error);
  ASSERT_TRUE(live) << error;

  // An `fpscope run` of a test running beside this one may sweep first: what counts is that the
  // orphans are gone afterwards and the live ring is not.
  const std::vector<std::string> removed = remove_orphaned_rings();
  EXPECT_EQ(std::count(removed.begin(), removed.end(), live->name()), 0);
  EXPECT_FALSE(shm_exists(orphan->name()));
  EXPECT_FALSE(shm_exists(orphan2->name()));
  EXPECT_TRUE(shm_exists(live->name()));
  // A producer still attached to a removed name keeps its mapping: removal loses nothing published.
}

}  // namespace
}  // namespace fpscope
