// Builds wire records in memory for the writer tests, as the injector would lay them out in the
// ring: fixed structs, multi-slot strings and histograms. Each record is a vector of 64-byte slots.
#pragma once

#include <cstring>
#include <string_view>
#include <vector>

#include "fpscope/contract/wire.h"

namespace fpscope::test {

struct alignas(64) Slot {
  unsigned char bytes[wire::kSlotBytes];
};
using Record = std::vector<Slot>;

template <typename R>
R blank(wire::RecordType type, uint32_t thread = 1) {
  R r{};
  r.h = {type, static_cast<uint16_t>(sizeof(R) / wire::kSlotBytes), thread};
  return r;
}

template <typename R>
Record pack(const R& r) {
  Record out(r.h.slots);
  std::memcpy(out.data(), &r, sizeof r);
  return out;
}

inline Record string_record(uint32_t id, std::string_view s, uint32_t thread = 1) {
  const uint16_t slots = wire::slots_for(offsetof(wire::StringRecord, bytes), s.size());
  Record out(slots);
  wire::StringRecord head{};
  head.h = {wire::RecordType::String, slots, thread};
  head.id = id;
  head.length = static_cast<uint32_t>(s.size());
  std::memcpy(out.data(), &head, offsetof(wire::StringRecord, bytes));
  std::memcpy(reinterpret_cast<unsigned char*>(out.data()) + offsetof(wire::StringRecord, bytes), s.data(), s.size());
  return out;
}

inline Record histogram_record(uint64_t seq, uint8_t role_slot, const std::vector<wire::HistogramBin>& bins,
                               uint32_t thread = 1) {
  const uint16_t slots = wire::slots_for(sizeof(wire::TensorHistogramRecord), bins.size() * sizeof(wire::HistogramBin));
  Record out(slots);
  wire::TensorHistogramRecord head{};
  head.h = {wire::RecordType::TensorHistogram, slots, thread};
  head.seq = seq;
  head.role_slot = role_slot;
  head.bins = static_cast<uint32_t>(bins.size());
  std::memcpy(out.data(), &head, sizeof head);
  std::memcpy(reinterpret_cast<unsigned char*>(out.data()) + sizeof head, bins.data(),
              bins.size() * sizeof(wire::HistogramBin));
  return out;
}

inline const wire::RecordHeader* header(const Record& r) {
  return reinterpret_cast<const wire::RecordHeader*>(r.data());
}

}  // namespace fpscope::test
