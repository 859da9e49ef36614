// Tests of the shared-memory ring: ordering and integrity under a multi-threaded producer,
// wrap-around with Pad records, back-pressure without loss, SIGKILL of the producer process at
// random moments, and counted drops (not a hang) when the collector is gone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fpscope/collector/ring.h"
#include "temp_path.h"

namespace fpscope {
namespace {

// A test record: header, producer thread, sequence number within that thread, then a payload of
// words derived from both so that torn or misplaced slots are detected.
struct TestRecord {
  wire::RecordHeader h;
  uint32_t producer;
  uint32_t pad;
  uint64_t seq;
};

std::string unique_name(const char* what) { return test::unique_shm_name(std::string("fpscope-test-") + what); }

uint64_t payload_word(uint32_t producer, uint64_t seq, std::size_t i) {
  return (seq * 1000003u) ^ (uint64_t{producer} << 40) ^ (i * 7919u);
}

// Writes one test record of `slots` slots; false if the ring dropped it.
bool write_record(RingProducer& p, uint32_t producer, uint64_t seq, uint16_t slots) {
  void* at = p.reserve(slots);
  if (!at) return false;
  auto* r = static_cast<TestRecord*>(at);
  r->h = {wire::RecordType::Scalar, slots, producer};
  r->producer = producer;
  r->seq = seq;
  auto* words = reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(at) + sizeof(TestRecord));
  const std::size_t n = (slots * wire::kSlotBytes - sizeof(TestRecord)) / sizeof(uint64_t);
  for (std::size_t i = 0; i < n; ++i) words[i] = payload_word(producer, seq, i);
  p.publish();
  return true;
}

// Checks one drained record's payload; returns its (producer, seq).
std::pair<uint32_t, uint64_t> check_record(const wire::RecordHeader* h) {
  const auto* r = reinterpret_cast<const TestRecord*>(h);
  EXPECT_EQ(r->h.thread, r->producer);
  const auto* words = reinterpret_cast<const uint64_t*>(reinterpret_cast<const unsigned char*>(h) + sizeof(TestRecord));
  const std::size_t n = (h->slots * wire::kSlotBytes - sizeof(TestRecord)) / sizeof(uint64_t);
  for (std::size_t i = 0; i < n; ++i) {
    if (words[i] != payload_word(r->producer, r->seq, i)) {
      ADD_FAILURE() << "torn record: producer " << r->producer << " seq " << r->seq << " word " << i;
      break;
    }
  }
  return {r->producer, r->seq};
}

struct Rings {
  std::unique_ptr<RingConsumer> consumer;
  std::unique_ptr<RingProducer> producer;
};

Rings make_rings(uint64_t slots) {
  std::string error;
  Rings r;
  r.consumer = RingConsumer::create(unique_name("ring"), slots, &error);
  EXPECT_TRUE(r.consumer) << error;
  r.producer = RingProducer::attach(r.consumer->name().c_str(), &error);
  EXPECT_TRUE(r.producer) << error;
  EXPECT_TRUE(r.producer->claim());
  return r;
}

TEST(Ring, MultiThreadedProducerKeepsEveryRecordInOrder) {
  Rings r = make_rings(1024);
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kPerThread = 40000;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t <= kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t seq = 0; seq < kPerThread; ++seq) {
        std::lock_guard<std::mutex> lock(mu);
        ASSERT_TRUE(write_record(*r.producer, t, seq, static_cast<uint16_t>(1 + seq % 7)));
      }
    });
  }
  std::vector<uint64_t> next(kThreads + 1, 0);
  uint64_t total = 0;
  while (total < kThreads * kPerThread) {
    total += r.consumer->drain([&](const wire::RecordHeader* h) {
      auto [producer, seq] = check_record(h);
      ASSERT_GE(producer, 1u);
      ASSERT_LE(producer, kThreads);
      EXPECT_EQ(seq, next[producer]) << "producer " << producer;
      next[producer] = seq + 1;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.consumer->drain([](const wire::RecordHeader*) {}), 0u);
  for (uint32_t t = 1; t <= kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
  EXPECT_EQ(r.consumer->dropped_records(), 0u);
  EXPECT_EQ(r.consumer->corrupt_records(), 0u);
}

TEST(Ring, RecordThatDoesNotFitBeforeTheEndIsPrecededByPad) {
  Rings r = make_rings(1024);
  // 341 records of 3 slots fill 1023 slots; the 342nd needs a 1-slot Pad before it.
  for (uint64_t seq = 0; seq < 341; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 3));
  std::vector<uint64_t> seen;
  auto collect = [&](const wire::RecordHeader* h) { seen.push_back(check_record(h).second); };
  EXPECT_EQ(r.consumer->drain(collect), 341u);
  EXPECT_EQ(r.consumer->header()->head.load(), 1023u);
  ASSERT_TRUE(write_record(*r.producer, 1, 341, 3));
  EXPECT_EQ(r.consumer->header()->head.load(), 1023u + 1u + 3u);
  const auto* filler = reinterpret_cast<const wire::RecordHeader*>(
      reinterpret_cast<const unsigned char*>(r.consumer->header()) + sizeof(RingHeader) + 1023 * wire::kSlotBytes);
  EXPECT_EQ(filler->type, wire::RecordType::Pad);
  EXPECT_EQ(filler->slots, 1u);
  EXPECT_EQ(r.consumer->drain(collect), 1u);  // the Pad is not handed over
  ASSERT_EQ(seen.size(), 342u);
  for (uint64_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
}

TEST(Ring, FullRingMakesTheProducerWaitAndLosesNothing) {
  Rings r = make_rings(1024);
  constexpr uint64_t kRecords = 20000;
  std::thread producer([&] {
    for (uint64_t seq = 0; seq < kRecords; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 5));
  });
  uint64_t expected = 0;
  while (expected < kRecords) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // a slow collector
    r.consumer->drain([&](const wire::RecordHeader* h) { EXPECT_EQ(check_record(h).second, expected++); });
  }
  producer.join();
  EXPECT_GT(r.consumer->producer_waits(), 0u);
  EXPECT_EQ(r.consumer->dropped_records(), 0u);
}

// The child produces numbered records forever and, after each publish, stores how many it has
// published in `published` (shared memory). The parent drains while it runs and kills it.
[[noreturn]] void produce_until_killed(const std::string& ring, std::atomic<uint64_t>* published, unsigned seed) {
  std::string error;
  auto p = RingProducer::attach(ring.c_str(), &error);
  if (!p || !p->claim()) _exit(3);
  std::mt19937 rng(seed);
  for (uint64_t seq = 0;; ++seq) {
    if (!write_record(*p, 1, seq, static_cast<uint16_t>(1 + rng() % 9))) _exit(4);
    published->store(seq + 1, std::memory_order_release);
  }
}

TEST(Ring, SigkilledProducerLosesNothingItPublished) {
  auto* published = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(published, MAP_FAILED);
  std::mt19937 rng(12345);
  for (int round = 0; round < 8; ++round) {
    std::string error;
    auto consumer = RingConsumer::create(unique_name("kill"), 4096, &error);
    ASSERT_TRUE(consumer) << error;
    published->store(0);
    const unsigned seed = rng();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) produce_until_killed(consumer->name(), published, seed);
    uint64_t expected = 0;
    auto check = [&](const wire::RecordHeader* h) { ASSERT_EQ(check_record(h).second, expected++); };
    // The random moment counts from the first publish: a loaded machine may start the child late.
    while (published->load() == 0) consumer->drain(check);
    const auto kill_at = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 20000);
    while (std::chrono::steady_clock::now() < kill_at) consumer->drain(check);
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "producer exited early with " << WEXITSTATUS(status);
    consumer->drain(check);
    const uint64_t known = published->load();
    EXPECT_GE(expected, known) << "round " << round;
    EXPECT_LE(expected, known + 1) << "at most the record published just before the counter";
    EXPECT_GT(expected, 0u);
    EXPECT_EQ(consumer->corrupt_records(), 0u);
  }
  munmap(published, sizeof(std::atomic<uint64_t>));
}

TEST(Ring, StalledCollectorLeadsToCountedDropsNotAHang) {
  Rings r = make_rings(1024);
  r.producer->set_wait_limit(std::chrono::milliseconds(20));
  uint64_t written = 0;
  for (; written < 1024; ++written) ASSERT_TRUE(write_record(*r.producer, 1, written, 1));
  EXPECT_FALSE(write_record(*r.producer, 1, written, 1));  // full: waits 20 ms, then drops
  EXPECT_EQ(r.consumer->dropped_records(), 1u);
  EXPECT_EQ(r.consumer->producer_waits(), 1u);
  // Nothing moved since: the next record is dropped at once instead of waiting again.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(write_record(*r.producer, 1, written, 1));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(15));
  EXPECT_EQ(r.consumer->dropped_records(), 2u);
  // Once the collector drains again, records flow.
  uint64_t expected = 0;
  r.consumer->drain([&](const wire::RecordHeader* h) { EXPECT_EQ(check_record(h).second, expected++); });
  EXPECT_EQ(expected, 1024u);
  EXPECT_TRUE(write_record(*r.producer, 1, 1024, 1));
}

TEST(Ring, GoneCollectorEndsTheWaitAtOnce) {
  Rings r = make_rings(1024);
  r.producer->set_wait_limit(std::chrono::seconds(60));
  for (uint64_t seq = 0; seq < 1024; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 1));
  r.consumer->mark_collector_gone();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(write_record(*r.producer, 1, 1024, 1));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.consumer->dropped_records(), 1u);
  EXPECT_FALSE(r.producer->wait_drained(std::chrono::milliseconds(10)));
}

TEST(Ring, WaitDrainedReturnsOnceTheCollectorCaughtUp) {
  Rings r = make_rings(1024);
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 2));
  EXPECT_FALSE(r.producer->wait_drained(std::chrono::milliseconds(5)));
  std::thread collector([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.consumer->drain([](const wire::RecordHeader*) {});
  });
  EXPECT_TRUE(r.producer->wait_drained(std::chrono::seconds(10)));
  collector.join();
}

TEST(Ring, OnlyOneProcessMayClaim) {
  Rings r = make_rings(1024);
  EXPECT_TRUE(r.producer->claim());  // again, same process
  EXPECT_EQ(r.consumer->owner_pid(), getpid());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string error;
    auto p = RingProducer::attach(r.consumer->name().c_str(), &error);
    _exit(p && !p->claim() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A second process finds the first ring owned: it makes a sibling ring of the same size, marks it
// ready in the first ring's header, and the collector adopts it and reads what it published.
// A process forked to find the ring of `r` owned: it makes a sibling ring, claims it, writes
// `records` records (producer 7, sequence numbers from 0) and exits; the exit status says how far
// it got (0: all of it); *child is its pid.
int sibling_writes(const Rings& r, uint64_t records, pid_t* child = nullptr) {
  const pid_t pid = fork();
  if (child != nullptr) *child = pid;
  if (pid < 0) return -1;
  if (pid == 0) {
    std::string error;
    auto first = RingProducer::attach(r.consumer->name().c_str(), &error);
    if (!first || first->claim()) _exit(1);
    auto sibling = RingProducer::create_sibling(*first, r.consumer->name(), &error);
    if (!sibling || !sibling->claim()) _exit(2);
    for (uint64_t seq = 0; seq < records; ++seq)
      if (!write_record(*sibling, 7, seq, static_cast<uint16_t>(1 + seq % 3))) _exit(3);
    _exit(0);  // records published before the exit stay in the shared object
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Ring, ASecondProcessGetsASiblingRingTheCollectorAdopts) {
  Rings r = make_rings(1024);
  EXPECT_EQ(r.consumer->rings_created(), 0u);
  pid_t pid = 0;
  ASSERT_EQ(sibling_writes(r, 100, &pid), 0);
  ASSERT_EQ(r.consumer->rings_created(), 1u);
  ASSERT_TRUE(r.consumer->ring_ready(1));
  EXPECT_FALSE(r.consumer->ring_ready(2));
  const std::string name = sibling_ring_name(r.consumer->name(), 1);
  std::string error;
  {
    auto sibling = RingConsumer::adopt(name, &error);
    ASSERT_TRUE(sibling) << error;
    EXPECT_EQ(sibling->slot_count(), 1024u);
    EXPECT_EQ(sibling->owner_pid(), pid);
    uint64_t next = 0;
    sibling->drain([&](const wire::RecordHeader* h) {
      const auto [producer, seq] = check_record(h);
      EXPECT_EQ(producer, 7u);
      EXPECT_EQ(seq, next++);
    });
    EXPECT_EQ(next, 100u);
  }
  // The adopted ring removed its name, as the first ring does.
  EXPECT_FALSE(RingConsumer::adopt(name, &error));
}

// The doorbell: a collector sleeping on it (for far longer than the test may take) is woken by the
// producer's next publish.
TEST(Ring, APublishWakesTheCollectorSleepingOnTheDoorbell) {
  Rings r = make_rings(1024);
  RingHeader* h = r.consumer->header();
  const uint32_t seen = h->doorbell.load();
  h->collector_waiting.store(1);
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(write_record(*r.producer, 1, 0, 1));
  });
  const auto start = std::chrono::steady_clock::now();
  while (h->doorbell.load() == seen) ring_sleep(h, seen, std::chrono::seconds(60));
  const auto slept = std::chrono::steady_clock::now() - start;
  producer.join();
  EXPECT_LT(slept, std::chrono::seconds(30));
  EXPECT_TRUE(r.consumer->has_records());
  // Not waiting: a publish leaves the doorbell alone.
  h->collector_waiting.store(0);
  const uint32_t quiet = h->doorbell.load();
  EXPECT_TRUE(write_record(*r.producer, 1, 1, 1));
  EXPECT_EQ(h->doorbell.load(), quiet);
  ring_wake(h);  // the collector's own thread ends a sleep the same way
  EXPECT_EQ(h->doorbell.load(), quiet + 1);
}

// A collector napping between the drains of a busy run is rung only by a publish that leaves the
// ring filled to its fill mark (half the warm part: 256 slots of a 1024-slot ring), however stale
// the producer's view of the tail is; a producer that waits for the drain at its end rings it too.
TEST(Ring, ANappingCollectorIsRungOnlyAtTheFillMark) {
  Rings r = make_rings(1024);
  ASSERT_EQ(ring_fill_mark(1024), 256u);
  RingHeader* h = r.consumer->header();
  h->collector_waiting.store(kWakePastFillMark);
  const uint32_t seen = h->doorbell.load();
  uint64_t seq = 0;
  for (; seq < 255; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 1));
  EXPECT_EQ(h->doorbell.load(), seen);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen + 1);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));  // still at the mark: rings until the collector wakes
  EXPECT_EQ(h->doorbell.load(), seen + 2);
  // Drained: the producer's last look at the tail says 0, the tail says 257.
  EXPECT_EQ(r.consumer->drain([](const wire::RecordHeader*) {}), 257u);
  for (int i = 0; i < 255; ++i) ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen + 2);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen + 3);
  // Idle, it is rung by any publish; awake, by none.
  EXPECT_EQ(r.consumer->drain([](const wire::RecordHeader*) {}), 256u);
  h->collector_waiting.store(kWakeOnPublish);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen + 4);
  h->collector_waiting.store(kCollectorAwake);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen + 4);
  EXPECT_FALSE(r.producer->wait_drained(std::chrono::milliseconds(0)));  // awake: left alone
  EXPECT_EQ(h->doorbell.load(), seen + 4);
  h->collector_waiting.store(kWakePastFillMark);
  EXPECT_FALSE(r.producer->wait_drained(std::chrono::milliseconds(0)));  // two records below the mark
  EXPECT_EQ(h->doorbell.load(), seen + 5);
}

// Going back to the start early leaves most of a lap of Pad filler undrained: it is not records,
// so it does not ring a napping collector; the records after it do, at the fill mark.
TEST(Ring, AnEarlyWrapsFillerDoesNotRingANappingCollector) {
  Rings r = make_rings(1024);  // warm part 512 slots, fill mark 256
  RingHeader* h = r.consumer->header();
  uint64_t seq = 0;
  for (; seq < 512; ++seq) ASSERT_TRUE(write_record(*r.producer, 1, seq, 1));
  EXPECT_EQ(r.consumer->drain([](const wire::RecordHeader*) {}), 512u);
  h->collector_waiting.store(kWakePastFillMark);
  const uint32_t seen = h->doorbell.load();
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->head.load(), 1025u) << "512 slots of filler, then the record at the ring's start";
  for (int i = 0; i < 254; ++i) ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));
  EXPECT_EQ(h->doorbell.load(), seen);
  ASSERT_TRUE(write_record(*r.producer, 1, seq++, 1));  // the 256th record since the drain
  EXPECT_EQ(h->doorbell.load(), seen + 1);
  std::vector<uint64_t> drained;
  r.consumer->drain([&](const wire::RecordHeader* rec) { drained.push_back(check_record(rec).second); });
  ASSERT_EQ(drained.size(), 256u);
  EXPECT_EQ(drained.front(), 512u);
  EXPECT_EQ(drained.back(), 767u);
}

// A process on a sibling ring rings the first ring's doorbell: once its ring is ready to adopt,
// and at each publish while the collector waits.
TEST(Ring, ASiblingRingsTheFirstRingsDoorbell) {
  Rings r = make_rings(1024);
  RingHeader* h = r.consumer->header();
  const uint32_t seen = h->doorbell.load();
  h->collector_waiting.store(1);
  ASSERT_EQ(sibling_writes(r, 3), 0);
  EXPECT_EQ(h->doorbell.load() - seen, 4u);  // ready, then three records
  std::string error;
  auto sibling = RingConsumer::adopt(sibling_ring_name(r.consumer->name(), 1), &error);
  ASSERT_TRUE(sibling) << error;
  EXPECT_EQ(sibling->header()->doorbell.load(), 0u);  // its own header's is not the one rung
}

// Past kMaxRings the process is refused a ring, counted, and told why.
TEST(Ring, ProcessesBeyondTheLastRingAreRefusedAndCounted) {
  Rings r = make_rings(1024);
  r.consumer->header()->rings_created.store(kMaxRings - 1);
  std::string error;
  EXPECT_FALSE(RingProducer::create_sibling(*r.producer, r.consumer->name(), &error));
  EXPECT_NE(error.find(std::to_string(kMaxRings) + " processes"), std::string::npos) << error;
  EXPECT_EQ(r.consumer->rings_refused(), 1u);
  // A collector that is gone gives no rings either.
  r.consumer->header()->rings_created.store(0);
  r.consumer->mark_collector_gone();
  EXPECT_FALSE(RingProducer::create_sibling(*r.producer, r.consumer->name(), &error));
  EXPECT_NE(error.find("collector"), std::string::npos) << error;
  EXPECT_EQ(r.consumer->rings_created(), 0u);
}

// Pages of the ring's shared object in memory, counted through the mapping at `base`.
std::size_t resident_pages(const void* base, std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(base), bytes, in.data()) != 0) return SIZE_MAX;
  std::size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// Whether the kernel may give shared memory transparent huge pages without being asked.
bool shared_memory_huge_pages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string modes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const char* mode : {"[always]", "[within_size]", "[force]"})
    if (modes.find(mode) != std::string::npos) return true;
  return false;
}

// A producer the collector keeps up with goes round the ring's warm part only (its memory is all
// the ring ever takes); one the collector lags behind goes on into the rest, and nothing is lost
// or reordered either way.
TEST(Ring, AProducerTheCollectorKeepsUpWithStaysInTheWarmPart) {
  const uint64_t slots = uint64_t{1} << 18;  // 16 MiB: four times the warm part
  Rings r = make_rings(slots);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = ring_bytes(slots);
  const void* base = r.consumer->header();
  uint64_t next = 0, seen = 0;
  auto check = [&](const wire::RecordHeader* h) { ASSERT_EQ(check_record(h).second, seen++); };
  // Kept up with: drained every 100 records, 2.3 rings' worth of slots in all.
  for (; next < 200000; ++next) {
    ASSERT_TRUE(write_record(*r.producer, 1, next, 3));
    if (next % 100 == 99) r.consumer->drain(check);
  }
  r.consumer->drain(check);
  EXPECT_EQ(seen, next);
  EXPECT_GT(r.consumer->header()->head.load(), 2 * slots);  // round the ring's count twice
  const std::size_t header_pages = (sizeof(RingHeader) + page - 1) / page;
  const std::size_t warm_pages = kWarmRingSlots * wire::kSlotBytes / page;
  const std::size_t kept_up = resident_pages(base, bytes);
  // Where shared memory may come in huge pages, a touched page brings in 2 MiB.
  const std::size_t slack = shared_memory_huge_pages() ? (std::size_t{4} << 20) / page : 16;
  EXPECT_GE(kept_up, header_pages + warm_pages);
  EXPECT_LE(kept_up, header_pages + warm_pages + slack);  // the collector's lag and the look's page
  // Lagged behind: 20000 records written before the collector drains go on past the warm part.
  for (uint64_t lagged = next + 20000; next < lagged; ++next) ASSERT_TRUE(write_record(*r.producer, 1, next, 3));
  for (uint64_t more = next + 20000; next < more; ++next) {
    ASSERT_TRUE(write_record(*r.producer, 1, next, 3));
    if (next % 100 == 99) r.consumer->drain(check);
  }
  r.consumer->drain(check);
  EXPECT_EQ(seen, next);
  EXPECT_GT(resident_pages(base, bytes), kept_up);
}

TEST(Ring, ErrorsSayWhatIsWrong) {
  std::string error;
  EXPECT_FALSE(RingProducer::attach("/fpscope-test-no-such-ring", &error));
  EXPECT_NE(error.find("cannot open ring /fpscope-test-no-such-ring"), std::string::npos) << error;
  EXPECT_FALSE(RingProducer::attach("", &error));
  EXPECT_NE(error.find("FPSCOPE_RING"), std::string::npos) << error;
  EXPECT_FALSE(RingConsumer::create(unique_name("bad"), 1000, &error));
  EXPECT_NE(error.find("power of two"), std::string::npos) << error;
  auto first = RingConsumer::create(unique_name("dup"), 1024, &error);
  ASSERT_TRUE(first) << error;
  EXPECT_FALSE(RingConsumer::create(first->name(), 1024, &error));
  EXPECT_NE(error.find("cannot create ring"), std::string::npos) << error;
  Rings r = make_rings(1024);
  EXPECT_EQ(r.producer->reserve(0), nullptr);
  EXPECT_EQ(r.producer->reserve(kMaxRecordSlots + 1), nullptr);
}

}  // namespace
}  // namespace fpscope
