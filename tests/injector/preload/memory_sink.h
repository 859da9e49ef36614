// A RecordSink that keeps records in memory, and a decoder of record streams, for tests.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fpscope/contract/wire.h"
#include "record_writer.h"

namespace fpscope::inject::testing {

class MemorySink : public RecordSink {
 public:
  void* reserve(uint16_t slots) override {
    if (full) return nullptr;
    pending.assign(size_t{slots} * wire::kSlotBytes, 0xAB);  // garbage the writer must overwrite
    return pending.data();
  }
  void publish() override { records.push_back(pending); }
  bool wait_drained(std::chrono::milliseconds) override { return true; }

  bool full = false;
  std::vector<unsigned char> pending;
  std::vector<std::vector<unsigned char>> records;
};

// Records by type, and the strings they refer to.
struct DecodedTrace {
  std::vector<std::vector<unsigned char>> records;
  std::map<uint32_t, std::string> strings;

  void add(const void* record) {
    const auto* h = static_cast<const wire::RecordHeader*>(record);
    const auto* bytes = static_cast<const unsigned char*>(record);
    records.emplace_back(bytes, bytes + size_t{h->slots} * wire::kSlotBytes);
    if (h->type == wire::RecordType::String) {
      wire::StringRecord s;
      std::memcpy(&s, record, sizeof s);
      strings[s.id] = std::string(reinterpret_cast<const char*>(bytes) + offsetof(wire::StringRecord, bytes), s.length);
    }
  }
  template <typename R>
  std::vector<R> all(wire::RecordType type) const {
    std::vector<R> out;
    for (const auto& r : records) {
      if (reinterpret_cast<const wire::RecordHeader*>(r.data())->type != type) continue;
      R rec;
      std::memcpy(&rec, r.data(), sizeof rec);
      out.push_back(rec);
    }
    return out;
  }
  size_t count(wire::RecordType type) const {
    size_t n = 0;
    for (const auto& r : records) n += reinterpret_cast<const wire::RecordHeader*>(r.data())->type == type;
    return n;
  }
  std::string text(uint32_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? "<no string " + std::to_string(id) + ">" : it->second;
  }
};

}  // namespace fpscope::inject::testing
