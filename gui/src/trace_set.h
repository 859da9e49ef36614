// The traces open in the window. Each trace loads on its own background thread (the window keeps
// drawing, with a progress bar); a trace that fails to load keeps its error message and leaves the
// others alone; a trace whose run is still being written (meta end_reason = 'running') is
// re-read periodically and its snapshot swapped in when the new one is complete.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trace_data.h"

namespace fpscope::gui {

enum class LoadState { kLoading, kReady, kFailed };

// Progress shared between a loading thread and the window.
struct LoadStatus {
  std::atomic<float> fraction{0.0f};
  std::atomic<bool> cancelled{false};
  std::mutex mutex;
  std::string stage;  // what the loader is doing, for the progress bar
  // The reports, published before the timeline index is built so the views can start drawing.
  std::shared_ptr<const TraceData> partial;
};

class TraceDoc {
 public:
  TraceDoc(int id, std::filesystem::path path);
  ~TraceDoc();
  TraceDoc(const TraceDoc&) = delete;
  TraceDoc& operator=(const TraceDoc&) = delete;

  int id() const { return id_; }
  const std::filesystem::path& path() const { return path_; }
  std::string name() const { return path_.filename().string(); }
  LoadState state() const { return state_; }
  const std::string& error() const { return error_; }
  // The latest complete snapshot; null until the first load finishes. Stays valid (shared) while a
  // refresh builds the next one.
  const std::shared_ptr<const TraceData>& data() const { return data_; }
  bool refreshing() const { return job_ != nullptr && data_ != nullptr; }
  // Seconds from opening to the first drawable snapshot (the reports), and to the complete one.
  double first_data_seconds() const { return first_data_seconds_; }
  float progress() const;
  std::string stage() const;
  double load_seconds() const { return load_seconds_; }

  void start_load();
  // One rank of a multi-process trace, or every rank (nullopt): a new choice reads the trace again.
  const std::optional<int32_t>& rank() const { return rank_; }
  void set_rank(std::optional<int32_t> rank);
  // The ranks the trace holds (known after its first complete read of every rank).
  const std::vector<int32_t>& ranks() const { return ranks_; }
  // Collects a finished load; starts a refresh when the run is still being written and the last
  // read is older than `refresh_every`. Returns true when the snapshot changed.
  bool poll(std::chrono::steady_clock::duration refresh_every);

 private:
  struct Job;
  bool take_partial();
  int id_;
  std::filesystem::path path_;
  std::optional<int32_t> rank_;
  std::vector<int32_t> ranks_;
  LoadState state_ = LoadState::kLoading;
  std::string error_;
  std::shared_ptr<const TraceData> data_;
  std::unique_ptr<Job> job_;
  std::chrono::steady_clock::time_point last_read_{};
  double load_seconds_ = 0;
  double first_data_seconds_ = 0;
};

// analysis::compare() of the current source and target, computed on a background thread whenever
// either snapshot changes.
class PairComparison {
 public:
  ~PairComparison();
  // Starts a computation when the pair differs from the last one; null data clears it.
  void update(const std::shared_ptr<const TraceData>& source, const std::shared_ptr<const TraceData>& target);
  // The comparison when ready (null while computing or without a pair); error() says why not.
  const analysis::Comparison* result() const { return result_.get(); }
  const std::string& error() const { return error_; }
  bool computing() const { return worker_.joinable(); }

 private:
  void collect();
  std::shared_ptr<const TraceData> source_, target_;
  std::shared_ptr<analysis::Comparison> result_;
  std::string error_;
  std::thread worker_;
  std::mutex mutex_;
  bool done_ = false;
  std::shared_ptr<analysis::Comparison> pending_;
  std::string pending_error_;
};

class TraceSet {
 public:
  // Opens a trace (loading starts at once). Opening a path already open does nothing. `rank`: read
  // only that rank of it.
  void open(const std::filesystem::path& path, std::optional<int32_t> rank = std::nullopt);
  void close(int id);
  // Collects finished loads and schedules refreshes; returns true when any snapshot changed.
  bool poll();
  // True while any trace has not finished its first complete read.
  bool any_loading() const;

  const std::vector<std::unique_ptr<TraceDoc>>& docs() const { return docs_; }
  // The comparison pair: the first two traces in list order. Either may be absent or not ready.
  TraceDoc* source() const { return docs_.size() > 0 ? docs_[0].get() : nullptr; }
  TraceDoc* target() const { return docs_.size() > 1 ? docs_[1].get() : nullptr; }
  void swap_pair();  // exchanges source and target
  void move_to_front(int id);
  // The comparison of source and target, when both are loaded.
  const PairComparison& comparison() const { return comparison_; }

 private:
  std::vector<std::unique_ptr<TraceDoc>> docs_;
  PairComparison comparison_;
  int next_id_ = 1;
};

}  // namespace fpscope::gui
