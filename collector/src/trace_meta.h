// What `fpscope run` records in a trace's meta table about the run itself: versions, the command,
// the environment variables that change numerics or placement, times and how the program ended.
// Private to the collector; keys are documented in docs/schema.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/contract/run_end.h"

namespace fpscope {

class TraceWriter;
struct ChildEnd;

// CLOCK_REALTIME now, in ns, and as ISO-8601 UTC with milliseconds ("2026-11-21T19:40:15.123Z").
int64_t realtime_ns();
std::string iso8601_utc(int64_t realtime_ns);

// Variables worth keeping with a trace, with their values in `environment` ("NAME=value" lines).
std::vector<std::pair<std::string, std::string>> variables_of_interest(const std::vector<std::string>& environment);

// The keys written before the program starts (end_reason 'running'), with the collector's own
// identity (collector_pid, collector_start_ticks, collector_boot_id) so that a reader can tell a
// trace still being written from one whose collector died.
struct StartMeta {
  std::vector<std::string> command;  // the program and its arguments
  std::string cwd;
  int64_t start_ns = 0;
  std::string options_json;
  uint64_t ring_slots = 0;
  std::string ring_name;             // the shared-memory ring (removed when the run ends)
  std::vector<std::pair<std::string, std::string>> environment;  // of interest
};
void write_start_meta(TraceWriter& w, const StartMeta& m);

// The keys written after it ended: end time, end_reason and exit code or signal.
void write_end_meta(TraceWriter& w, const ChildEnd& end, contract::RunEnd end_reason, int64_t end_ns);

}  // namespace fpscope
