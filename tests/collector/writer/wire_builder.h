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

// Records of the kinds most tests need, with the fields they vary.
inline wire::NvtxPushRecord push(int64_t t, uint32_t domain, uint32_t category, uint32_t message, int64_t step = -1) {
  auto r = blank<wire::NvtxPushRecord>(wire::RecordType::NvtxPush);
  r.t_ns = t;
  r.domain = domain;
  r.category = category;
  r.message = message;
  if (step >= 0) {
    r.payload_kind = 1;
    r.payload_i = step;
  }
  return r;
}

inline wire::NvtxPopRecord pop(int64_t t, uint32_t domain) {
  auto r = blank<wire::NvtxPopRecord>(wire::RecordType::NvtxPop);
  r.t_ns = t;
  r.domain = domain;
  return r;
}

inline wire::TensorStatsRecord stats(uint64_t seq, wire::Role role, uint8_t slot, uint32_t name, uint32_t thread = 1) {
  auto r = blank<wire::TensorStatsRecord>(wire::RecordType::TensorStats, thread);
  r.seq = seq;
  r.role = role;
  r.slot = slot;
  r.name = name;
  r.ndim = 1;
  r.shape[0] = 10;
  r.count = 10;
  r.min = r.max = r.absmax = r.min_nonzero = r.mean = r.rms = 1.0;
  return r;
}

inline wire::TensorFormatsRecord formats(uint64_t seq, uint8_t role_slot, uint64_t base, uint32_t thread = 1) {
  auto r = blank<wire::TensorFormatsRecord>(wire::RecordType::TensorFormats, thread);
  r.seq = seq;
  r.role_slot = role_slot;
  for (int f = 0; f < wire::kFormatCount; ++f)
    r.formats[f] = {base + 4u * f, base + 4u * f + 1, base + 4u * f + 2, base + 4u * f + 3};
  return r;
}

inline wire::LaunchRecord launch(uint64_t seq, uint32_t kernel, int64_t step) {
  auto r = blank<wire::LaunchRecord>(wire::RecordType::Launch);
  r.seq = seq;
  r.start_ns = 1000 + 10 * static_cast<int64_t>(seq);
  r.end_ns = r.start_ns + 5;
  r.kernel = kernel;
  r.step = step;
  r.sampled = 1;
  return r;
}

inline const wire::RecordHeader* header(const Record& r) {
  return reinterpret_cast<const wire::RecordHeader*>(r.data());
}

}  // namespace fpscope::test
