// Events: the things that went wrong, or that the loss scaler did, in time order.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

// One thing that went wrong, or that the loss scaler did: a non-finite output, an output that would
// overflow or flush to zero in fp16 or bf16, a loss-scale backoff or growth, a skipped step.
// Trap: where `fpscope run --trap` stopped the program (meta trap.*), with the trap's message.
// Forecast: a range heading for fp16's largest value (forecast()), placed at the last step fitted,
// on the launch that wrote the row's largest tensor then.
enum class EventKind : uint8_t { NaN, Inf, Overflow, Underflow, ScaleBackoff, ScaleGrowth, SkippedStep, Trap, Forecast };
inline constexpr int kEventKindCount = 9;
const char* event_kind_name(EventKind kind);  // "NaN", "overflow", "scale backoff", ...

struct Event {
  EventKind kind = EventKind::NaN;
  int64_t t_ns = 0;
  std::optional<int64_t> step;
  int64_t kernel_id = 0;
  std::optional<int64_t> tensor_id;  // for tensor events
  std::string kernel, layer, tensor;
  std::string detail;  // what happened, in words: "first nan at [17]; 1 NaN, 0 Inf of 4096"
  double amount = 0;   // values involved (NaN + Inf, the larger fp16/bf16 count) or the new scale
  bool origin = false; // a non-finite output its launch made from finite inputs
};

struct EventQuery {
  std::array<bool, kEventKindCount> kinds = {true, true, true, true, true, true, true, true, true};  // by EventKind
  std::optional<int64_t> step;  // only this step's events
  std::size_t offset = 0;       // skip this many (in time order) ...
  std::size_t limit = 50'000;   // ... then return at most this many
};

struct EventPage {
  std::vector<Event> events;  // in time order (ties: non-finite, cast, loss scale; then trace order)
  bool more = false;          // events after this page exist
};
EventPage events(const Trace& trace, const EventQuery& query = {});

}  // namespace fpscope::analysis
