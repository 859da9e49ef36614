// Background loading and refreshing of traces (see trace_set.h).
#include "trace_set.h"

#include <algorithm>
#include <exception>

namespace fpscope::gui {

// One load or refresh in flight: the thread and the slot it leaves its result in.
struct TraceDoc::Job {
  LoadStatus progress;
  std::mutex mutex;
  bool done = false;
  std::shared_ptr<const TraceData> result;
  std::string error;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::thread thread;

  ~Job() {
    progress.cancelled = true;
    if (thread.joinable()) thread.join();
  }
};

TraceDoc::TraceDoc(int id, std::filesystem::path path) : id_(id), path_(std::move(path)) {}

TraceDoc::~TraceDoc() = default;

float TraceDoc::progress() const { return job_ ? job_->progress.fraction.load() : 1.0f; }

std::string TraceDoc::stage() const {
  if (!job_) return {};
  std::lock_guard lock(job_->progress.mutex);
  return job_->progress.stage;
}

void TraceDoc::start_load() {
  if (job_) return;
  job_ = std::make_unique<Job>();
  Job* job = job_.get();
  const std::filesystem::path path = path_;
  const std::optional<int32_t> rank = rank_;
  job->thread = std::thread([job, path, rank] {
    std::shared_ptr<const TraceData> result;
    std::string error;
    try {
      result = load_trace_data(path, job->progress, rank);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error while reading the trace";
    }
    std::lock_guard lock(job->mutex);
    job->result = std::move(result);
    job->error = std::move(error);
    job->done = true;
  });
}

bool TraceDoc::poll(std::chrono::steady_clock::duration refresh_every) {
  if (!job_) {
    const bool live = data_ && data_->still_running();
    if (live && std::chrono::steady_clock::now() - last_read_ > refresh_every) start_load();
    return false;
  }
  {
    std::lock_guard lock(job_->mutex);
    if (!job_->done) return take_partial();
  }
  const bool first = state_ == LoadState::kLoading;
  if (job_->result) {
    data_ = job_->result;
    state_ = LoadState::kReady;
    if (!rank_) {
      ranks_.clear();
      for (const auto& r : data_->ranks.ranks) ranks_.push_back(r.rank);
    }
    error_.clear();
    if (first) {
      load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - job_->started).count();
      if (first_data_seconds_ == 0) first_data_seconds_ = load_seconds_;
    }
  } else if (first) {
    state_ = LoadState::kFailed;
    error_ = job_->error;
    data_.reset();  // an early snapshot of a trace that then failed is not shown
  }
  // A failed refresh keeps the last good snapshot: a trace being written may be briefly unreadable.
  job_.reset();
  last_read_ = std::chrono::steady_clock::now();
  return true;
}

void TraceDoc::set_rank(std::optional<int32_t> rank) {
  if (rank == rank_) return;
  rank_ = rank;
  job_.reset();  // a read of the former choice is cancelled
  state_ = LoadState::kLoading;
  data_.reset();
  first_data_seconds_ = 0;
  start_load();
}

bool TraceDoc::take_partial() {
  std::shared_ptr<const TraceData> partial;
  {
    std::lock_guard lock(job_->progress.mutex);
    partial = std::move(job_->progress.partial);
  }
  if (!partial || state_ != LoadState::kLoading) return false;  // a refresh keeps its last full read
  data_ = std::move(partial);
  first_data_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - job_->started).count();
  return true;
}

void TraceSet::open(const std::filesystem::path& path, std::optional<int32_t> rank) {
  std::error_code ec;
  std::filesystem::path key = std::filesystem::absolute(path, ec);
  if (ec) key = path;
  key = key.lexically_normal();
  for (const auto& doc : docs_) {
    if (doc->path() == key) return;
  }
  docs_.push_back(std::make_unique<TraceDoc>(next_id_++, key));
  docs_.back()->set_rank(rank);
  docs_.back()->start_load();
}

void TraceSet::close(int id) {
  std::erase_if(docs_, [id](const auto& doc) { return doc->id() == id; });
}

bool TraceSet::poll() {
  bool changed = false;
  for (auto& doc : docs_) changed |= doc->poll(std::chrono::seconds(2));
  // Compared once both reads are complete (an early snapshot would make it compare twice).
  static const std::shared_ptr<const TraceData> none;
  auto complete = [](const TraceDoc* d) -> const std::shared_ptr<const TraceData>& {
    return d && d->data() && d->data()->complete ? d->data() : none;
  };
  comparison_.update(complete(source()), complete(target()));
  return changed;
}

PairComparison::~PairComparison() {
  if (worker_.joinable()) worker_.join();
}

void PairComparison::collect() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    if (!done_) return;
  }
  worker_.join();
  result_ = std::move(pending_);
  error_ = std::move(pending_error_);
}

void PairComparison::update(const std::shared_ptr<const TraceData>& source,
                            const std::shared_ptr<const TraceData>& target) {
  collect();
  if (source == source_ && target == target_) return;
  if (worker_.joinable()) return;  // the running one finishes first; the next poll starts anew
  source_ = source;
  target_ = target;
  result_.reset();
  error_.clear();
  if (!source || !target) return;
  done_ = false;
  worker_ = std::thread([this, source, target] {
    std::shared_ptr<analysis::Comparison> result;
    std::string error;
    try {
      result = std::make_shared<analysis::Comparison>(analysis::compare(*source->trace, *target->trace));
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard lock(mutex_);
    pending_ = std::move(result);
    pending_error_ = std::move(error);
    done_ = true;
  });
}

bool TraceSet::any_loading() const {
  return std::any_of(docs_.begin(), docs_.end(), [](const auto& d) { return d->state() == LoadState::kLoading; });
}

void TraceSet::swap_pair() {
  if (docs_.size() >= 2) std::swap(docs_[0], docs_[1]);
}

void TraceSet::move_to_front(int id) {
  auto it = std::find_if(docs_.begin(), docs_.end(), [id](const auto& d) { return d->id() == id; });
  if (it != docs_.end()) std::rotate(docs_.begin(), it, it + 1);
}

}  // namespace fpscope::gui
