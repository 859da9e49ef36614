// The shared-memory ring's two ends: mapping, claiming, reserving with back-pressure, publishing
// and draining. See fpscope/collector/ring.h for the protocol. Only libc, pthread and rt: the injector links
// this file into the traced process.
#include "fpscope/collector/ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace fpscope {
namespace {

std::string errno_text(const char* what, const std::string& name) {
  return std::string(what) + " " + name + ": " + std::strerror(errno);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void sleep_for(std::chrono::nanoseconds d) {
  timespec ts{static_cast<time_t>(d.count() / 1000000000), static_cast<long>(d.count() % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The futex calls on a word of shared memory (not FUTEX_PRIVATE: the word is shared between
// processes).
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000000), static_cast<long>(limit.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

constexpr uint64_t kSlotsPerPage = 4096 / wire::kSlotBytes;

// Maps an open shared-memory descriptor read-write.
std::unique_ptr<RingMapping> map_ring(int fd, std::size_t bytes, const std::string& name,
                                      std::string* error) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    *error = errno_text("cannot map ring", name);
    return nullptr;
  }
  return std::make_unique<RingMapping>(base, bytes);
}

// Creates the shared object `name` for a ring of `slot_count` slots, zero-filled, with its header
// filled in except for collector_alive and owner_pid. Fails if the name exists.
std::unique_ptr<RingMapping> create_ring_object(const std::string& name, uint64_t slot_count, std::string* error) {
  if (!is_power_of_two(slot_count) || slot_count < kMinRingSlots) {
    *error = "ring size must be a power of two of at least " + std::to_string(kMinRingSlots) + " slots";
    return nullptr;
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = errno_text("cannot create ring", name);
    return nullptr;
  }
  const std::size_t bytes = ring_bytes(slot_count);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *error = errno_text("cannot size ring", name);
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  auto map = map_ring(fd, bytes, name, error);
  close(fd);
  if (!map) {
    shm_unlink(name.c_str());
    return nullptr;
  }
  // ftruncate zero-fills: every counter starts at 0.
  RingHeader* h = map->header();
  h->protocol = wire::kProtocolVersion;
  h->slot_count = slot_count;
  h->magic = kRingMagic;
  return map;
}

// Maps the existing ring `name` and checks that it is one this build speaks.
std::unique_ptr<RingMapping> open_ring_object(const std::string& name, std::string* error) {
  if (name.empty()) {
    *error = "no ring name (FPSCOPE_RING is empty)";
    return nullptr;
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    *error = errno_text("cannot open ring", name);
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(RingHeader)) {
    close(fd);
    *error = "ring " + name + " is too small to be an fpscope ring";
    return nullptr;
  }
  auto map = map_ring(fd, static_cast<std::size_t>(st.st_size), name, error);
  close(fd);
  if (!map) return nullptr;
  const RingHeader* h = map->header();
  if (h->magic != kRingMagic) {
    *error = "ring " + name + " is not an fpscope ring (bad magic)";
    return nullptr;
  }
  if (h->protocol != wire::kProtocolVersion) {
    *error = "ring " + name + " speaks protocol " + std::to_string(h->protocol) +
             ", this injector speaks " + std::to_string(wire::kProtocolVersion) +
             ": use the injector and the fpscope of the same build";
    return nullptr;
  }
  if (!is_power_of_two(h->slot_count) || ring_bytes(h->slot_count) > static_cast<std::size_t>(st.st_size)) {
    *error = "ring " + name + " has an inconsistent size";
    return nullptr;
  }
  return map;
}

}  // namespace

RingMapping::~RingMapping() { munmap(base_, bytes_); }

// [SECTION] Producer ------------------------------------------------------------------------------

std::unique_ptr<RingProducer> RingProducer::attach(const char* shm_name, std::string* error) {
  auto map = open_ring_object(shm_name ? shm_name : "", error);
  if (!map) return nullptr;
  return std::unique_ptr<RingProducer>(new RingProducer(std::move(map)));
}

std::unique_ptr<RingProducer> RingProducer::create_sibling(RingProducer& first, const std::string& first_name,
                                                           std::string* error) {
  RingHeader* f = first.header();
  if (f->collector_alive.load(std::memory_order_acquire) == 0) {
    *error = "the collector of ring " + first_name + " is gone";
    return nullptr;
  }
  const uint32_t k = f->rings_created.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (k >= kMaxRings) {
    f->rings_refused.fetch_add(1, std::memory_order_relaxed);
    *error = "the run already traces " + std::to_string(kMaxRings) + " processes, the most one trace takes";
    return nullptr;
  }
  const std::string name = sibling_ring_name(first_name, k);
  auto map = create_ring_object(name, f->slot_count, error);
  if (!map) return nullptr;
  // Its own view of the first ring, for the doorbell (without one it rings its own header's, and
  // the collector finds its records at the end of its timed sleep instead).
  std::string ignored;
  auto first_map = open_ring_object(first_name, &ignored);
  RingHeader* h = map->header();
  h->owner_pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  h->collector_alive.store(1, std::memory_order_release);
  auto producer = std::unique_ptr<RingProducer>(new RingProducer(std::move(map)));
  if (first_map) {
    producer->bell_ = first_map->header();
    producer->first_map_ = std::move(first_map);
  }
  f->ring_ready[k].store(1, std::memory_order_release);  // the collector may map it from now on
  producer->ring_doorbell();  // a new ring to adopt
  return producer;
}

RingProducer::RingProducer(std::unique_ptr<RingMapping> map) : map_(std::move(map)), bell_(map_->header()) {
  RingHeader* h = map_->header();
  mask_ = h->slot_count - 1;
  head_ = h->head.load(std::memory_order_acquire);
  pending_head_ = head_;
  tail_seen_ = h->tail.load(std::memory_order_acquire);
  warm_slots_ = ring_warm_slots(mask_ + 1);
  fill_mark_ = ring_fill_mark(mask_ + 1);
}

bool RingProducer::claim() {
  const int32_t me = static_cast<int32_t>(getpid());
  int32_t expected = 0;
  RingHeader* h = map_->header();
  if (h->owner_pid.compare_exchange_strong(expected, me, std::memory_order_acq_rel)) {
    // Another process may have produced before (it died or released): continue after its records.
    head_ = h->head.load(std::memory_order_acquire);
    pending_head_ = head_;
    return true;
  }
  return expected == me;
}

// Waits until `needed` slots are free after head_. False means: drop this record.
bool RingProducer::wait_for_space(uint64_t needed) {
  RingHeader* h = map_->header();
  const uint64_t capacity = mask_ + 1;
  tail_seen_ = h->tail.load(std::memory_order_acquire);
  if (capacity - (head_ - tail_seen_) >= needed) return true;
  if (tail_seen_ == stalled_at_tail_) return false;  // gave up before and nothing moved since
  h->producer_waits.fetch_add(1, std::memory_order_relaxed);
  ring_doorbell();

  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  auto nap = std::chrono::microseconds(20);
  for (int spin = 0;; ++spin) {
    if (h->collector_alive.load(std::memory_order_acquire) == 0) return false;
    if (spin < 256) {
      cpu_relax();
    } else {
      sleep_for(nap);
      if (nap < std::chrono::milliseconds(1)) nap *= 2;
    }
    const uint64_t tail = h->tail.load(std::memory_order_acquire);
    if (tail != tail_seen_) {
      tail_seen_ = tail;
      last_progress = Clock::now();
      if (capacity - (head_ - tail_seen_) >= needed) return true;
    } else if (spin >= 256 && Clock::now() - last_progress >= wait_limit_) {
      stalled_at_tail_ = tail_seen_;
      return false;
    }
  }
}

void* RingProducer::reserve(uint16_t slots) {
  if (slots == 0 || slots > kMaxRecordSlots) return nullptr;
  const uint64_t capacity = mask_ + 1;
  const uint64_t pos = head_ & mask_;
  // A record never wraps: if it does not fit before the end, a Pad fills the end first.
  uint64_t pad = pos + slots > capacity ? capacity - pos : 0;
  // Past the warm part, back to the start early once the collector has drained the warm part of
  // this lap (it then has room for at least that much before it meets the collector). The tail is
  // read at most once a page of slots, so the collector's line is not pulled over for every record.
  if (pad == 0 && pos >= warm_slots_ && head_ >= next_wrap_look_) {
    tail_seen_ = map_->header()->tail.load(std::memory_order_acquire);
    if (tail_seen_ >= head_ - pos + warm_slots_) pad = capacity - pos;
    else next_wrap_look_ = head_ + kSlotsPerPage;
  }
  if (!wait_for_space(pad + slots)) {
    map_->header()->dropped_records.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  stalled_at_tail_ = UINT64_MAX;
  if (pad != 0) {
    pad_begin_ = head_;
    pad_end_ = head_ + pad;
  }
  // A Pad's slot count is 16 bits: a long stretch takes several, each skipped by the collector
  // after reading its first slot only.
  for (uint64_t done = 0; done < pad;) {
    const uint64_t n = std::min<uint64_t>(pad - done, UINT16_MAX);
    auto* filler = reinterpret_cast<wire::RecordHeader*>(map_->slot((head_ + done) & mask_));
    filler->type = wire::RecordType::Pad;
    filler->slots = static_cast<uint16_t>(n);
    filler->thread = 0;
    done += n;
  }
  pending_head_ = head_ + pad + slots;
  return map_->slot((head_ + pad) & mask_);
}

void RingProducer::publish() {
  if (pending_head_ == head_) return;
  head_ = pending_head_;
  map_->header()->head.store(head_, std::memory_order_release);
  // No fence: a collector that began to sleep just as this published misses the ring and wakes
  // at the end of its timed sleep instead (RingSet::wait_for_records).
  const uint32_t waiting = bell_->collector_waiting.load(std::memory_order_relaxed);
  if (waiting == kWakeOnPublish || (waiting == kWakePastFillMark && filled_to_mark())) ring_doorbell();
}

// Whether the ring holds at least its fill mark of undrained records (the last Pad's filler is
// not counted: going back to the start early leaves most of a lap of it). The tail seen last can
// only make the ring look fuller than it is, so the collector's line is read only when that says
// yes.
bool RingProducer::filled_to_mark() {
  auto undrained = [this](uint64_t tail) {
    const uint64_t filler = tail < pad_end_ ? pad_end_ - std::max(tail, pad_begin_) : 0;
    return head_ - tail - filler;
  };
  if (undrained(tail_seen_) < fill_mark_) return false;
  tail_seen_ = map_->header()->tail.load(std::memory_order_acquire);
  return undrained(tail_seen_) >= fill_mark_;
}

void RingProducer::ring_doorbell() {
  bell_->doorbell.fetch_add(1, std::memory_order_release);
  futex_wake_all(&bell_->doorbell);
}

bool RingProducer::wait_drained(std::chrono::milliseconds limit) {
  RingHeader* h = map_->header();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  // A sleeping collector, idle or napping, would only look at the end of its sleep.
  if (h->tail.load(std::memory_order_acquire) < head_ &&
      bell_->collector_waiting.load(std::memory_order_relaxed) != kCollectorAwake)
    ring_doorbell();
  while (h->tail.load(std::memory_order_acquire) < head_) {
    if (h->collector_alive.load(std::memory_order_acquire) == 0) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// [SECTION] Consumer ------------------------------------------------------------------------------

void ring_sleep(RingHeader* first, uint32_t seen, std::chrono::nanoseconds limit) {
  futex_wait(&first->doorbell, seen, limit);
}

void ring_wake(RingHeader* first) {
  first->doorbell.fetch_add(1, std::memory_order_release);
  futex_wake_all(&first->doorbell);
}

std::unique_ptr<RingConsumer> RingConsumer::create(const std::string& shm_name, uint64_t slot_count,
                                                   std::string* error) {
  auto map = create_ring_object(shm_name, slot_count, error);
  if (!map) return nullptr;
  // The ring is complete before the program that attaches to it is started (process creation
  // orders everything before it).
  map->header()->collector_alive.store(1, std::memory_order_release);
  return std::unique_ptr<RingConsumer>(new RingConsumer(shm_name, slot_count, std::move(map)));
}

std::unique_ptr<RingConsumer> RingConsumer::adopt(const std::string& shm_name, std::string* error) {
  auto map = open_ring_object(shm_name, error);
  if (!map) return nullptr;
  const uint64_t slots = map->header()->slot_count;
  return std::unique_ptr<RingConsumer>(new RingConsumer(shm_name, slots, std::move(map)));
}

RingConsumer::RingConsumer(std::string name, uint64_t slot_count, std::unique_ptr<RingMapping> map)
    : name_(std::move(name)), slot_count_(slot_count), map_(std::move(map)) {}

RingConsumer::~RingConsumer() {
  mark_collector_gone();
  map_.reset();
  shm_unlink(name_.c_str());
}

}  // namespace fpscope
