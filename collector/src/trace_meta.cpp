// The run's own meta keys (see trace_meta.h and docs/schema.md).
#include "trace_meta.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>

#include "child_process.h"
#include "fpscope/common/process_identity.h"
#include "fpscope/collector/trace_writer.h"
#include "fpscope/contract/wire.h"

namespace fpscope {
namespace {

// Variables that change threading, device placement or what is loaded into the program.
constexpr const char* kInteresting[] = {
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE",
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "HOSTNAME"};

}  // namespace

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string iso8601_utc(int64_t ns) {
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>((ns / 1000000) % 1000));
  return buf;
}

std::vector<std::pair<std::string, std::string>> variables_of_interest(const std::vector<std::string>& environment) {
  std::vector<std::pair<std::string, std::string>> found;
  for (const char* name : kInteresting) {
    const std::string prefix = std::string(name) + "=";
    for (const auto& line : environment)
      if (line.compare(0, prefix.size(), prefix) == 0) found.emplace_back(name, line.substr(prefix.size()));
  }
  return found;
}

void write_start_meta(TraceWriter& w, const StartMeta& m) {
  w.set_meta("fpscope_version", FPSCOPE_VERSION);
  w.set_meta("protocol_version", std::to_string(wire::kProtocolVersion));
  w.set_meta("command", nlohmann::json(m.command).dump());
  w.set_meta("cwd", m.cwd);
  w.set_meta("start_time", iso8601_utc(m.start_ns));
  w.set_meta("start_ns", std::to_string(m.start_ns));
  w.set_meta("end_reason", std::string(contract::info(contract::RunEnd::Running).meta));
  const common::ProcessIdentity me = common::self_identity();
  w.set_meta("collector_pid", std::to_string(me.pid));
  w.set_meta("collector_start_ticks", std::to_string(me.start_ticks));
  w.set_meta("collector_boot_id", me.boot_id);
  w.set_meta("options", m.options_json);
  w.set_meta("ring_slots", std::to_string(m.ring_slots));
  w.set_meta("ring", m.ring_name);
  for (const auto& [name, value] : m.environment) w.set_meta("env." + name, value);
}

void write_end_meta(TraceWriter& w, const ChildEnd& end, contract::RunEnd end_reason, int64_t end_ns) {
  w.set_meta("end_time", iso8601_utc(end_ns));
  w.set_meta("end_ns", std::to_string(end_ns));
  w.set_meta("end_reason", std::string(contract::info(end_reason).meta));
  if (end.signaled) {
    w.set_meta("signal", signal_name(end.signal));
    w.set_meta("signal_number", std::to_string(end.signal));
  } else {
    w.set_meta("exit_code", std::to_string(end.exit_code));
  }
}

}  // namespace fpscope
