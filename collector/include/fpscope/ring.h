// The shared-memory ring between one traced process (the producer, inside the injector) and the
// collector (the consumer, in the `fpscope run` process).
//
// The collector creates the ring as a POSIX shared-memory object before it starts the program and
// passes its name in the environment (FPSCOPE_RING). The ring holds slots of wire::kSlotBytes; a
// record occupies consecutive slots and never wraps (a Pad record fills the end instead). The
// producer publishes a record with one release store of `head`; the consumer frees slots with a
// release store of `tail`. Whatever the producer published before it died, SIGKILL included, is in
// the shared mapping and reaches the trace. A full ring makes the producer wait; after
// kProducerWaitLimit without progress (the collector is gone) it drops records and counts them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fpscope/wire.h"

namespace fpscope {

inline constexpr uint64_t kRingMagic = 0x474e495250435346ull;  // "FSCPRING"
inline constexpr const char* kRingEnv = "FPSCOPE_RING";
inline constexpr auto kProducerWaitLimit = std::chrono::seconds(30);

struct alignas(64) RingHeader {
  uint64_t magic;
  uint32_t protocol;            // wire::kProtocolVersion
  uint32_t reserved0;
  uint64_t slot_count;          // a power of two
  std::atomic<int32_t> owner_pid;   // the one process allowed to produce (first to claim), 0 free
  std::atomic<uint32_t> collector_alive; // 1 while the collector drains
  alignas(64) std::atomic<uint64_t> head;  // slots published by the producer (monotonic)
  alignas(64) std::atomic<uint64_t> tail;  // slots consumed by the collector (monotonic)
  alignas(64) std::atomic<uint64_t> dropped_records;  // records the producer gave up on
  std::atomic<uint64_t> producer_waits;   // times the producer found the ring full
};

}  // namespace fpscope
