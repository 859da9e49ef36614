// The helper threads of a shared tensor scan (see stats_workers.h).
//
// A job is published under mutex_ only when no helper is inside an earlier one (active_ == 0), and
// a helper copies the job and joins it under the same lock, so a helper never runs one job's body
// with another job's chunk numbers. A helper that wakes after its job is over finds every chunk
// taken (next_ >= count_) and leaves without calling anything.
#include "stats_workers.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace fpscope::inject {

int default_stats_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 4u));
}

StatsWorkers::StatsWorkers(int threads, bool program_pool)
    : helpers_wanted_(std::max(0, threads - 1)), program_pool_(program_pool), creator_pid_(getpid()) {}

// The kernel library's task runner, looked up once (it is linked by the program, loaded before
// the first kernel). Never in a forked child, whose copy of the pool has no worker threads.
StatsWorkers::ProgramTasks StatsWorkers::program_tasks() {
  if (!program_pool_ || static_cast<long>(getpid()) != creator_pid_) return nullptr;
  std::call_once(program_tasks_looked_up_, [this] {
    program_tasks_ = reinterpret_cast<ProgramTasks>(dlsym(RTLD_DEFAULT, "mpt_parallel_tasks"));
  });
  return program_tasks_;
}

StatsWorkers::~StatsWorkers() {
  // In a forked child the helpers (and perhaps these locks) are the parent's: leave them be.
  if (owner_pid_.load() != static_cast<long>(getpid())) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (pthread_t t : helpers_) pthread_join(t, nullptr);
}

namespace {

struct HelperStart {
  StatsWorkers* workers;
  uint64_t seen;
};

}  // namespace

void* StatsWorkers::helper_main(void* start) {
  const HelperStart s = *static_cast<HelperStart*>(start);
  delete static_cast<HelperStart*>(start);
  s.workers->helper(s.seen);
  return nullptr;
}

// Under mutex_, in the process that made no helpers yet. False when none could be made.
bool StatsWorkers::start_helpers() {
  if (!helpers_.empty()) return true;
  owner_pid_.store(static_cast<long>(getpid()));
  // Helpers start with every signal blocked; this thread's mask is restored after.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  for (int i = 0; i < helpers_wanted_; ++i) {
    auto* start = new HelperStart{this, generation_};
    pthread_t t;
    if (pthread_create(&t, nullptr, &StatsWorkers::helper_main, start) != 0) {
      delete start;
      break;  // no more threads to be had: scan with those there are
    }
    pthread_setname_np(t, "fpscope-stats");
    helpers_.push_back(t);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return !helpers_.empty();
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
  if (count < 2) return alone();
  if (const ProgramTasks lend = program_tasks()) {
    struct Job {
      void (*body)(void*, std::size_t);
      void* context;
    } job{body, context};
    lend(
        static_cast<int64_t>(count),
        [](void* j, int64_t i) {
          const Job& part = *static_cast<const Job*>(j);
          part.body(part.context, static_cast<std::size_t>(i));
        },
        &job);
    lent_scans_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (helpers_wanted_ == 0) return alone();
  // A forked child of a process that had helpers: touch none of the inherited state.
  const long owner = owner_pid_.load();
  if (owner != 0 && owner != static_cast<long>(getpid())) return alone();
  std::unique_lock use(use_, std::try_to_lock);
  if (!use.owns_lock()) return alone();
  {
    std::unique_lock lock(mutex_);
    if (!start_helpers()) {
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
  helped_scans_.fetch_add(1, std::memory_order_relaxed);
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
