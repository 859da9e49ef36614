// The shared-memory ring's layout, which the injector (producer) and the collector (consumer)
// must agree on: its header, the limits on records and rings, and how sibling rings are named.
// fpscope/collector/ring.h maps, fills and drains rings of this layout.
//
// Memory layout of the shared object: one RingHeader, then slot_count slots of wire::kSlotBytes
// (fpscope/contract/wire.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fpscope/contract/environment.h"
#include "fpscope/contract/wire.h"

namespace fpscope {

inline constexpr uint64_t kRingMagic = 0x474e495250435346ull;  // "FSCPRING"
inline constexpr const char* kRingEnv = contract::env::kRing;
inline constexpr auto kProducerWaitLimit = std::chrono::seconds(30);

// The largest record a producer may reserve, in slots. A ring must hold at least a few of them.
inline constexpr uint16_t kMaxRecordSlots = 256;
inline constexpr uint64_t kMinRingSlots = 1024;
// The part of a ring a producer goes round while the collector keeps up (RingProducer::reserve):
// 4 MiB of slots, or half the ring if that is less.
inline constexpr uint64_t kWarmRingSlots = (uint64_t{4} << 20) / wire::kSlotBytes;

// What the collector asks of producers while it sleeps (RingHeader::collector_waiting).
enum CollectorWaiting : uint32_t {
  kCollectorAwake = 0,     // draining: a publish leaves the doorbell alone
  kWakeOnPublish = 1,      // idle: the next publish into any ring rings the doorbell
  kWakePastFillMark = 2,   // napping between drains of a busy run: only a publish that leaves its
                           // ring filled to its fill mark or beyond rings (ring_fill_mark)
};

// The warm part of a ring of `slot_count` slots: kWarmRingSlots, or half the ring if that is less.
constexpr uint64_t ring_warm_slots(uint64_t slot_count) {
  return kWarmRingSlots < slot_count / 2 ? kWarmRingSlots : slot_count / 2;
}

// How many undrained slots of records make a producer ring a napping collector: half the ring's
// warm part, so that the collector drains it before the producer has to leave the pages in cache.
constexpr uint64_t ring_fill_mark(uint64_t slot_count) { return ring_warm_slots(slot_count) / 2; }

// Rings of one run, the first included: one per traced process. A process beyond them runs
// untraced and is counted (RingHeader::rings_refused).
inline constexpr uint32_t kMaxRings = 256;

struct alignas(64) RingHeader {
  uint64_t magic;
  uint32_t protocol;            // wire::kProtocolVersion
  uint32_t reserved0;
  uint64_t slot_count;          // a power of two
  std::atomic<int32_t> owner_pid;   // the one process allowed to produce (first to claim), 0 free
  std::atomic<uint32_t> collector_alive; // 1 while the collector drains
  // The collector's doorbell, used in the first ring's header only: a futex word that every
  // producer of the run bumps and wakes after a publish that `collector_waiting` asks for
  // (CollectorWaiting), and when it finds its ring full. The collector sleeps on it once every
  // ring is drained, for a bounded time (a wake-up missed in the race between the two ends costs
  // latency, never records).
  std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> collector_waiting;  // a CollectorWaiting
  alignas(64) std::atomic<uint64_t> head;  // slots published by the producer (monotonic)
  alignas(64) std::atomic<uint64_t> tail;  // slots consumed by the collector (monotonic)
  alignas(64) std::atomic<uint64_t> dropped_records;  // records the producer gave up on
  std::atomic<uint64_t> producer_waits;   // times the producer found the ring full
  // In the first ring's header only: the sibling rings of the run's other processes.
  alignas(64) std::atomic<uint32_t> rings_created;  // sibling numbers handed out (1, 2, ...)
  std::atomic<uint32_t> rings_refused;              // processes left untraced: kMaxRings reached
  alignas(64) std::atomic<uint8_t> ring_ready[kMaxRings];  // [k]: sibling k is complete
};
static_assert(sizeof(RingHeader) % wire::kSlotBytes == 0);
static_assert(offsetof(RingHeader, head) == 64, "the producer's and the collector's fields keep their lines");
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free &&
              std::atomic<uint8_t>::is_always_lock_free);

// The name of sibling ring k (1 .. kMaxRings - 1) of the run whose first ring is `first`.
inline std::string sibling_ring_name(const std::string& first, uint32_t k) { return first + "-" + std::to_string(k); }

// Bytes of the shared object for a ring of `slot_count` slots.
constexpr std::size_t ring_bytes(uint64_t slot_count) {
  return sizeof(RingHeader) + static_cast<std::size_t>(slot_count) * wire::kSlotBytes;
}

}  // namespace fpscope
