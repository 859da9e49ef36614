// The shared-memory ring between one traced process (the producer, inside the injector) and the
// collector (the consumer, in the `fpscope run` process).
//
// The collector creates the ring as a POSIX shared-memory object before it starts the program and
// passes its name in the environment (FPSCOPE_RING). The ring holds slots of wire::kSlotBytes; a
// record occupies consecutive slots and never wraps (a Pad record fills the end instead; a producer
// the collector keeps up with goes back to the start early, past the ring's first 4 MiB, so that it
// writes into memory already mapped: RingProducer::reserve). The
// producer publishes a record with one release store of `head`; the consumer frees slots with a
// release store of `tail`. Whatever the producer published before it died, SIGKILL included, is in
// the shared mapping and reaches the trace. A full ring makes the producer wait; after
// kProducerWaitLimit without progress (the collector is gone) it drops records and counts them.
//
// Every traced process of a run has a ring of its own. The collector creates the first one; a process
// that finds it owned by another (the ranks of an MPI run, the programs of a script) creates a
// sibling ring "<first name>-<k>" of the same size and marks it ready in the first ring's header,
// where the collector finds it and drains it like the first.
//
// The layout of the shared object is the contract's (fpscope/contract/ring_layout.h). This header
// is self-contained (libc, pthread, rt) because the injector links it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fpscope/contract/ring_layout.h"
#include "fpscope/contract/wire.h"

namespace fpscope {

// The mapping of one ring, shared by both ends: unmaps on destruction.
class RingMapping {
 public:
  RingMapping(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
  ~RingMapping();
  RingMapping(const RingMapping&) = delete;
  RingMapping& operator=(const RingMapping&) = delete;

  RingHeader* header() const { return static_cast<RingHeader*>(base_); }
  unsigned char* slot(uint64_t index) const {
    return static_cast<unsigned char*>(base_) + sizeof(RingHeader) + index * wire::kSlotBytes;
  }

 private:
  void* base_;
  std::size_t bytes_;
};

// The writing end, inside the traced process. Not thread-safe: callers serialize reserve/publish
// with their own mutex. One process owns a ring (claim()); a forked child must not produce into it.
class RingProducer {
 public:
  // Maps the existing ring named `shm_name` (as in FPSCOPE_RING). On failure returns nullptr and
  // says why in *error.
  static std::unique_ptr<RingProducer> attach(const char* shm_name, std::string* error);

  // For a process that found the first ring `first` (named `first_name`) owned by another: creates
  // a sibling ring of the same size, owned by this process, and marks it ready for the collector.
  // nullptr and *error when it cannot (kMaxRings reached: counted; the collector is gone; shm).
  static std::unique_ptr<RingProducer> create_sibling(RingProducer& first, const std::string& first_name,
                                                      std::string* error);

  // Takes ownership for this process (owner_pid 0 -> getpid()). True if it is now ours, also when
  // it already was; false if another process owns it.
  bool claim();

  // Reserves `slots` contiguous slots (1..kMaxRecordSlots) and returns their start. Past the ring's
  // warm part (ring_warm_slots()), once the collector has drained that part, it goes back to the
  // ring's start over Pad records to its end: a producer the collector keeps up with writes into
  // the same few MiB, pages already mapped and in cache, instead of faulting in a new page every
  // 64 slots on its way round the whole ring; one the collector lags behind goes on into the rest.
  // Waits while the ring is full. Returns nullptr and counts a dropped record when the collector is gone
  // (collector_alive == 0) or made no progress for the wait limit. The caller fills the record
  // (its RecordHeader included) and calls publish() before the next reserve().
  void* reserve(uint16_t slots);

  // Makes the reserved record visible to the collector: one release store of head, and a ring of
  // the run's doorbell when the collector sleeps on it asking for this publish (CollectorWaiting:
  // any publish while it is idle; one that fills the ring to ring_fill_mark while it naps).
  void publish();

  // Waits until the collector has consumed everything published (tail == head). False if it did
  // not within `limit` or the collector is gone.
  bool wait_drained(std::chrono::milliseconds limit);

  // How long reserve() waits without progress before it drops (tests shorten it).
  void set_wait_limit(std::chrono::nanoseconds limit) { wait_limit_ = limit; }

  RingHeader* header() const { return map_->header(); }

 private:
  explicit RingProducer(std::unique_ptr<RingMapping> map);
  bool wait_for_space(uint64_t needed);
  bool filled_to_mark();
  void ring_doorbell();

  std::unique_ptr<RingMapping> map_;
  std::unique_ptr<RingMapping> first_map_;  // a sibling's mapping of the run's first ring
  RingHeader* bell_;                        // the first ring's header: the doorbell's
  uint64_t mask_;
  uint64_t head_;              // our copy of header->head (we are its only writer)
  uint64_t tail_seen_;         // last tail read from the collector
  uint64_t pending_head_;      // head after the reserved record, published by publish()
  uint64_t warm_slots_;        // ring_warm_slots()
  uint64_t fill_mark_;         // ring_fill_mark(): undrained slots that ring a napping collector
  uint64_t pad_begin_ = 0, pad_end_ = 0;  // the last Pad's filler, [begin, end) in head positions
  uint64_t next_wrap_look_ = 0;  // head at which reserve() next reads the tail to go back early
  uint64_t stalled_at_tail_ = UINT64_MAX;  // tail when we last gave up: drop at once until it moves
  std::chrono::nanoseconds wait_limit_ = kProducerWaitLimit;
};

// The collector's side of the doorbell in the first ring's header `first`: sleeps until a producer
// (or ring_wake) bumps the doorbell past `seen`, or for `limit` at most.
void ring_sleep(RingHeader* first, uint32_t seen, std::chrono::nanoseconds limit);
// Wakes whoever sleeps on the doorbell of `first` (the collector's own thread that stops it).
void ring_wake(RingHeader* first);

// The reading end, in the `fpscope run` process. It creates the shared object and removes its name
// on destruction.
class RingConsumer {
 public:
  // Creates a new ring named `shm_name` ("/fpscope-<pid>-<n>") of `slot_count` slots (a power of
  // two, at least kMinRingSlots). Fails if the name exists.
  static std::unique_ptr<RingConsumer> create(const std::string& shm_name, uint64_t slot_count,
                                              std::string* error);
  // Takes over a sibling ring a producer created (create_sibling): maps and checks it, and
  // removes its name on destruction like a ring of its own.
  static std::unique_ptr<RingConsumer> adopt(const std::string& shm_name, std::string* error);
  ~RingConsumer();
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  // Calls on_record(const wire::RecordHeader*) for every record published so far, in order, and
  // frees their slots. The pointer is valid only during the call. Pad records are skipped; unknown
  // types are handed over (the writer counts them). A record
  // whose header is impossible (a producer bug) ends the drain of what is published and is counted
  // in corrupt_records(). Returns the number of records handed over: at most `limit`, the rest
  // wait for the next call.
  template <class Fn>
  std::size_t drain(Fn&& on_record, std::size_t limit = SIZE_MAX);

  // Tells producers the collector is gone: their full-ring waits end in counted drops.
  void mark_collector_gone() { header()->collector_alive.store(0, std::memory_order_release); }

  // Records published and not drained yet.
  bool has_records() const {
    return header()->head.load(std::memory_order_acquire) != header()->tail.load(std::memory_order_relaxed);
  }

  const std::string& name() const { return name_; }
  uint64_t slot_count() const { return slot_count_; }
  uint64_t dropped_records() const { return header()->dropped_records.load(std::memory_order_acquire); }
  uint64_t producer_waits() const { return header()->producer_waits.load(std::memory_order_acquire); }
  uint64_t corrupt_records() const { return corrupt_records_; }
  int32_t owner_pid() const { return header()->owner_pid.load(std::memory_order_acquire); }
  // The first ring's record of its siblings.
  uint32_t rings_created() const { return header()->rings_created.load(std::memory_order_acquire); }
  uint32_t rings_refused() const { return header()->rings_refused.load(std::memory_order_acquire); }
  bool ring_ready(uint32_t k) const {
    return k < kMaxRings && header()->ring_ready[k].load(std::memory_order_acquire) != 0;
  }
  RingHeader* header() const { return map_->header(); }

 private:
  RingConsumer(std::string name, uint64_t slot_count, std::unique_ptr<RingMapping> map);

  std::string name_;
  uint64_t slot_count_;
  uint64_t tail_ = 0;
  uint64_t corrupt_records_ = 0;
  std::unique_ptr<RingMapping> map_;
};

template <class Fn>
std::size_t RingConsumer::drain(Fn&& on_record, std::size_t limit) {
  RingHeader* h = header();
  const uint64_t head = h->head.load(std::memory_order_acquire);
  const uint64_t mask = slot_count_ - 1;
  // Free slots in chunks so that a full ring wakes the producer while a long drain goes on.
  const uint64_t release_every = slot_count_ / 8;
  uint64_t released = tail_;
  std::size_t records = 0;
  while (tail_ < head && records < limit) {
    const uint64_t pos = tail_ & mask;
    const auto* rec = reinterpret_cast<const wire::RecordHeader*>(map_->slot(pos));
    const uint64_t slots = rec->slots;
    if (slots == 0 || pos + slots > slot_count_ || tail_ + slots > head) {
      ++corrupt_records_;
      tail_ = head;
      break;
    }
    if (rec->type != wire::RecordType::Pad) {
      on_record(rec);
      ++records;
    }
    tail_ += slots;
    if (tail_ - released >= release_every) {
      h->tail.store(tail_, std::memory_order_release);
      released = tail_;
    }
  }
  h->tail.store(tail_, std::memory_order_release);
  return records;
}

}  // namespace fpscope
