// The helper threads of a shared tensor scan (see stats_workers.h).
//
// A job is published under mutex_ only when no helper is inside an earlier one (active_ == 0), and
// a helper copies the job and joins it under the same lock, so a helper never runs one job's body
// with another job's chunk numbers. A helper that wakes after its job is over finds every chunk
// taken (next_ >= count_) and leaves without calling anything.
#include "stats_workers.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

namespace fpscope::inject {

int default_stats_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 4u));
}

StatsWorkers::StatsWorkers(int threads) : helpers_wanted_(std::max(0, threads - 1)) {}

StatsWorkers::~StatsWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_) {
    // In a forked child the helpers are the parent's: nothing to join here.
    if (owner_pid_ == static_cast<long>(getpid())) t.join();
    else t.detach();
  }
}

void StatsWorkers::start_helpers() {
  const long pid = static_cast<long>(getpid());
  if (owner_pid_ == pid) return;
  // A forked child inherits the thread objects but not the threads: forget them.
  for (auto& t : helpers_) t.detach();
  helpers_.clear();
  owner_pid_ = pid;
  active_ = 0;
  // Helpers start with every signal blocked; this thread's mask is restored after.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  for (int i = 0; i < helpers_wanted_; ++i) {
    try {
      helpers_.emplace_back([this, seen = generation_] { helper(seen); });
      pthread_setname_np(helpers_.back().native_handle(), "fpscope-stats");
    } catch (const std::system_error&) {
      break;  // no more threads to be had: scan with those there are
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void StatsWorkers::take_chunks(std::size_t count, void (*body)(void*, std::size_t), void* context) {
  for (std::size_t i = next_.fetch_add(1, std::memory_order_relaxed); i < count;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    body(context, i);
    finished_.fetch_add(1, std::memory_order_release);
  }
}

void StatsWorkers::run(std::size_t count, void (*body)(void* context, std::size_t i), void* context) {
  auto alone = [&] {
    for (std::size_t i = 0; i < count; ++i) body(context, i);
  };
  if (helpers_wanted_ == 0 || count < 2) return alone();
  std::unique_lock use(use_, std::try_to_lock);
  if (!use.owns_lock()) return alone();
  {
    std::unique_lock lock(mutex_);
    start_helpers();
    if (helpers_.empty()) {
      lock.unlock();
      return alone();
    }
    done_.wait(lock, [&] { return active_ == 0; });
    body_ = body;
    context_ = context;
    count_ = count;
    next_.store(0, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
  take_chunks(count, body, context);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return active_ == 0 && finished_.load(std::memory_order_acquire) == count; });
}

// `seen`: the generation when the helper was made (under mutex_), so the job being published by the
// caller that made it is the first it takes.
void StatsWorkers::helper(uint64_t seen) {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::size_t count = count_;
    void (*body)(void*, std::size_t) = body_;
    void* context = context_;
    ++active_;
    lock.unlock();
    take_chunks(count, body, context);
    lock.lock();
    if (--active_ == 0) done_.notify_all();
  }
}

}  // namespace fpscope::inject
