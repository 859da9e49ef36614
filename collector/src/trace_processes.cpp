// How the traced processes end: the exit each one says, those that vanished without saying it,
// and the launchers that did no work of their own, left out of `processes` (trace_records.cpp
// writes each process's row when its first record arrives).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "trace_writer_impl.h"

namespace fpscope {

void TraceWriter::Impl::handle(const wire::ProcessExitRecord& r) {
  src->exited = true;
  end_process->bind(1, src->index).bind(2, std::string_view("exited")).bind(3, r.t_ns);
  end_process->run();
}

// Processes that never said they exit were killed or crashed (or their last records were lost).
// Meta ranks_ended says it in one line, by rank: "0:exited 1:vanished".
void TraceWriter::Impl::finish_processes() {
  leave_out_idle_processes();
  std::vector<std::pair<int32_t, const char*>> ended;
  for (const auto& source : sources) {
    if (!source || !source->announced || source->left_out) continue;
    ended.emplace_back(source->rank, source->exited ? "exited" : "vanished");
    if (source->exited) continue;
    end_process->bind(1, source->index).bind(2, std::string_view("vanished")).bind_null(3);
    end_process->run();
  }
  std::sort(ended.begin(), ended.end());
  std::string text;
  for (const auto& [rank, how] : ended) text += (text.empty() ? "" : " ") + std::to_string(rank) + ":" + how;
  if (!text.empty()) set_meta("ranks_ended", text);
}

// A process of a multi-process run that imported torch, so traced, but only started the others
// (torchrun's elastic agent; a program whose ranks torch.multiprocessing.spawn starts) exits having
// done no work of its own (no launch, allocation, scalar: at most the ranges the front end opens
// on its own): it is not a rank, and its row would stand beside the real rank 0. Once another
// process did work, such a process is taken out of `processes`, with its ranges and its meta (a
// lone process that did nothing stays: the trace then says how it ended). Only a process that
// said it exits: it sends nothing more, so this holds however often the trace is completed.
void TraceWriter::Impl::leave_out_idle_processes() {
  bool any_active = false;
  for (const auto& source : sources) any_active = any_active || (source && source->active);
  if (!any_active) return;
  for (const auto& source : sources) {
    if (!source || !source->announced || !source->exited || source->active || source->left_out) continue;
    source->left_out = true;
    ++counts.idle_processes;
    const std::string index = std::to_string(source->index);
    db.exec("DELETE FROM processes WHERE id = " + index);
    if (!source->ranges_while_idle.empty()) {
      // Their starts and ends may be the minimum or the maximum the rollups keep.
      steps_rollup.give_up("ranges of a process left out as idle");
      run_rollup.give_up("ranges of a process left out as idle");
    }
    for (const int64_t range : source->ranges_while_idle)
      db.exec("DELETE FROM nvtx_ranges WHERE id = " + std::to_string(range));
    counts.nvtx_ranges -= source->ranges_while_idle.size();
    source->ranges_while_idle.clear();
    db.exec("DELETE FROM meta WHERE key LIKE 'injector.%' AND key LIKE '%.process" + index + "'");
    if (source->index != 0) continue;
    // The meta that describe the first traced process describe the first one left.
    db.exec("DELETE FROM meta WHERE key LIKE 'injector.%' AND key NOT LIKE '%.process%'");
    describe_first_process();
  }
}

// The meta keys that describe the first traced process, and the `processes` column each copies (as
// text, as meta holds every value).
constexpr std::pair<const char*, const char*> kFirstProcessMeta[] = {
    {"traced_pid", "pid"},
    {"traced_exe", "exe"},
    {"injector_options", "injector_options"},
    {"process.realtime_ns", "realtime_ns"},
    {"process.monotonic_ns", "monotonic_ns"},
};

void TraceWriter::Impl::describe_first_process() {
  for (const auto& [key, column] : kFirstProcessMeta)
    db.exec(std::string("INSERT OR REPLACE INTO meta (key, value) SELECT '") + key + "', CAST(" + column +
            " AS TEXT) FROM processes ORDER BY id LIMIT 1");
}

}  // namespace fpscope
