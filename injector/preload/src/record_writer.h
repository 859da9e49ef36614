// Writes wire records into a ring, and interns strings so each travels once per process.
//
// RecordSink is the ring as the injector needs it (reserve contiguous slots, publish, wait until
// the collector has read everything); RingSink adapts the collector's RingProducer to it, tests
// may use a sink of their own. RecordWriter is not thread-safe: the session's mutex guards it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fpscope/contract/wire.h"

namespace fpscope::inject {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // `slots` contiguous slots, or null when the record had to be dropped.
  virtual void* reserve(uint16_t slots) = 0;
  // Makes the record last reserved visible to the collector.
  virtual void publish() = 0;
  virtual bool wait_drained(std::chrono::milliseconds limit) = 0;
};

class RecordWriter {
 public:
  explicit RecordWriter(RecordSink* sink) : sink_(sink) {}

  // Fills in the header of `record` (its type from the wire's record list, slot count, thread) and
  // publishes it.
  template <typename R>
  bool put(R record, uint32_t thread) {
    return put_with_tail(record, nullptr, 0, thread);
  }

  // A record followed by `tail_bytes` more (a histogram's bins, a string's bytes).
  template <typename R>
  bool put_with_tail(const R& record, const void* tail, size_t tail_bytes, uint32_t thread) {
    return put_bytes(wire::record_type_v<R>, &record, sizeof(R), tail, tail_bytes, thread);
  }

  // A record framed elsewhere (type, slots and thread already set): copied as it is.
  bool put_framed(const wire::RecordHeader* record) {
    return put_bytes(record->type, record, size_t{record->slots} * wire::kSlotBytes, nullptr, 0, record->thread);
  }


  // The id of `text` (cut to kMaxStringBytes), sending a String record the first time it is seen.
  // An empty string is still a string (id != 0).
  uint32_t intern(std::string_view text, uint32_t thread);

  size_t interned_count() const { return ids_.size(); }
  RecordSink* sink() const { return sink_; }

 private:
  bool put_bytes(wire::RecordType type, const void* fixed, size_t fixed_bytes, const void* tail,
                 size_t tail_bytes, uint32_t thread);

  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Texts looked up lately, by where they were: a program passes the same kernel and tensor names
  // from the same places launch after launch, so most lookups end here, on one cache line, and not
  // in the hash map, whose buckets and nodes the scans between two launches push out of the caches.
  // The text is compared as well as its address, so a place that holds another text by now is
  // looked up afresh. Only texts whose String record went out are kept (id != 0); the empty text,
  // whose address may be null, is not kept.
  static constexpr size_t kRecentTextBytes = 48;
  struct alignas(64) Recent {
    uintptr_t address = 0;  // where the text was: compared, never followed
    uint32_t id = 0;
    uint32_t length = 0;
    char text[kRecentTextBytes];
  };
  static constexpr size_t kRecentSlots = 128;
  static size_t recent_slot(uintptr_t a) { return ((a >> 3) ^ (a >> 12)) % kRecentSlots; }

  RecordSink* sink_;
  std::unordered_map<std::string, uint32_t, TextHash, std::equal_to<>> ids_;
  std::array<Recent, kRecentSlots> recent_{};
  uint32_t next_id_ = 1;
};

}  // namespace fpscope::inject
