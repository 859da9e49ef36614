// Record framing and string interning (see record_writer.h).
#include "record_writer.h"

#include <algorithm>

namespace fpscope::inject {

bool RecordWriter::put_bytes(wire::RecordType type, const void* fixed, size_t fixed_bytes,
                             const void* tail, size_t tail_bytes, uint32_t thread) {
  const uint16_t slots = wire::slots_for(fixed_bytes, tail_bytes);
  auto* dst = static_cast<unsigned char*>(sink_->reserve(slots));
  if (dst == nullptr) return false;
  const size_t total = size_t{slots} * wire::kSlotBytes;
  std::memcpy(dst, fixed, fixed_bytes);
  if (tail_bytes > 0) std::memcpy(dst + fixed_bytes, tail, tail_bytes);
  std::memset(dst + fixed_bytes + tail_bytes, 0, total - fixed_bytes - tail_bytes);
  wire::RecordHeader header{type, slots, thread};
  std::memcpy(dst, &header, sizeof header);
  sink_->publish();
  return true;
}

uint32_t RecordWriter::intern(std::string_view text, uint32_t thread) {
  text = text.substr(0, std::min<size_t>(text.size(), wire::kMaxStringBytes));
  const auto address = reinterpret_cast<uintptr_t>(text.data());
  Recent* recent =
      !text.empty() && text.size() <= kRecentTextBytes ? &recent_[recent_slot(address)] : nullptr;
  if (recent && recent->id != 0 && recent->address == address && recent->length == text.size() &&
      std::memcmp(recent->text, text.data(), text.size()) == 0)
    return recent->id;
  const auto remember = [&](uint32_t id) {
    if (!recent) return;
    recent->address = address;
    recent->id = id;
    recent->length = static_cast<uint32_t>(text.size());
    std::memcpy(recent->text, text.data(), text.size());
  };
  if (auto it = ids_.find(text); it != ids_.end()) {
    remember(it->second);
    return it->second;
  }
  const uint32_t id = next_id_++;
  wire::StringRecord fixed{};
  fixed.id = id;
  fixed.length = static_cast<uint32_t>(text.size());
  constexpr size_t kFixedPart = offsetof(wire::StringRecord, bytes);
  // The bytes start inside the struct: only its fixed part goes first. A dropped String (the
  // collector is gone) is not remembered, so a later use sends it again.
  if (put_bytes(wire::record_type_v<wire::StringRecord>, &fixed, kFixedPart, text.data(), text.size(), thread)) {
    ids_.emplace(std::string(text), id);
    remember(id);
  }
  return id;
}

}  // namespace fpscope::inject
