// A small fixed-size pool: workers wait on a condition variable for a numbered job, each takes
// the chunk with its own number, the calling thread takes chunk 0 and waits for the rest. A job of
// tasks (run_tasks) is shared out as the threads come instead, and a worker that has not taken it
// by the time the tasks are done is let off.
#include "parallel.h"

#include "launch_report.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mpt {
namespace {

class ThreadPool {
 public:
  ~ThreadPool() { stop_workers(); }

  int size() const { return threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> use(use_mutex_);
    stop_workers();
    threads_ = std::max(1, n);
  }

  // Runs chunk(i) for i in [0, chunks) with chunks <= size(); returns false if the pool is busy.
  bool run(int chunks, const std::function<void(int)>& chunk) { return run_job(chunks, chunk, false); }

  // Runs task(context, i) for each i in [0, tasks) once: the caller and the workers take the next
  // task as they come free. Once every task is taken, the workers that have not yet joined are let
  // off, so a worker asleep in the kernel costs the caller nothing. False if the pool is busy.
  bool run_tasks(int64_t tasks, void (*task)(void*, int64_t), void* context) {
    std::atomic<int64_t> next{0};
    const std::function<void(int)> take = [&](int) {
      for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < tasks;
           i = next.fetch_add(1, std::memory_order_relaxed))
        task(context, i);
    };
    return run_job(tasks, take, true);
  }

 private:
  // Publishes `job` to workers 1..chunks-1 (at most the pool's size), runs chunk 0 here and waits
  // for the workers that run theirs. With `let_off` (a job whose chunks share their work out), the
  // workers that have not joined once chunk 0 returns find no chunk of theirs (job_chunks_ = 1)
  // and take nothing.
  bool run_job(int64_t at_most, const std::function<void(int)>& job, bool let_off) {
    std::unique_lock<std::mutex> use(use_mutex_, std::try_to_lock);
    if (!use.owns_lock()) return false;
    const int chunks = static_cast<int>(std::min<int64_t>(threads_, at_most));
    start_workers();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      job_chunks_ = chunks;
      joined_ = 0;
      remaining_.store(chunks - 1, std::memory_order_relaxed);
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    job(0);
    if (let_off) {
      std::lock_guard<std::mutex> lock(mutex_);
      remaining_.fetch_sub(job_chunks_ - 1 - joined_, std::memory_order_acq_rel);
      job_chunks_ = 1;
    }
    spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
    return true;
  }

  void start_workers() {
    if (!workers_.empty() || threads_ <= 1) return;
    stopping_ = false;
    // A new worker must only run jobs published after it was made: it starts from the current
    // generation (run() holds use_mutex_, so no one else is changing it now).
    uint64_t current = generation_;
    for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w, current] { work(w, current); });
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  // Kernels come in quick succession: a thread that just finished a chunk waits a few microseconds
  // for the next job before it blocks (and the caller for the last chunk before it blocks), so
  // back-to-back loops are not each delayed by a wake-up through the kernel. The wait is bounded,
  // so an idle pool costs no CPU.
  template <typename Ready>
  static void spin_until(Ready ready) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (!ready()) {
      for (int i = 0; i < 32; ++i) __builtin_ia32_pause();
      if (std::chrono::steady_clock::now() > until) return;
    }
  }

  void work(int number, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      if (!stopping_ && generation_ == seen) {
        lock.unlock();
        spin_until([&] { return published_.load(std::memory_order_acquire) != seen; });
        lock.lock();
      }
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (number >= job_chunks_) continue;
      ++joined_;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      (*job)(number);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        lock.lock();
        done_.notify_one();
      } else {
        lock.lock();
      }
    }
  }

  std::mutex use_mutex_;  // one parallel loop at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  int job_chunks_ = 0;
  int joined_ = 0;                        // workers that took the current job (under mutex_)
  std::atomic<int> remaining_{0};         // chunks of the current job not yet finished by workers
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};    // generation_, readable without the lock
  bool stopping_ = false;
  int threads_ = default_threads();

  static int default_threads() {
    if (const char* env = std::getenv("MPT_NUM_THREADS")) {
      int n = std::atoi(env);
      if (n > 0) return n;
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
};

ThreadPool& pool() {
  static ThreadPool* instance = new ThreadPool();  // never destroyed: workers may outlive exit
  return *instance;
}

thread_local bool t_inside_parallel = false;

}  // namespace

bool parallel_tasks(int64_t tasks, void (*task)(void*, int64_t), void* context) {
  if (tasks <= 0) return true;
  if (tasks == 1 || num_threads() <= 1 || t_inside_parallel) return false;
  struct Inside {
    Inside() { t_inside_parallel = true; }
    ~Inside() { t_inside_parallel = false; }
  };
  struct Task {
    void (*task)(void*, int64_t);
    void* context;
  } wrapped{task, context};
  // Kernels launched by a task run serially, as they do inside a parallel_for.
  return pool().run_tasks(
      tasks,
      [](void* w, int64_t i) {
        const Task& t = *static_cast<const Task*>(w);
        const Inside inside;
        t.task(t.context, i);
      },
      &wrapped);
}

int num_threads() { return pool().size(); }

void set_num_threads(int n) {
  pool().resize(n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(num_threads(), n / std::max<int64_t>(1, min_chunk));
  if (chunks <= 1 || t_inside_parallel) {
    body(0, n);
    return;
  }
  LaunchReport* report = current_report();  // the launch's report goes with its chunks
  auto chunk = [&](int i) {
    const CurrentReportScope reporting(report);
    t_inside_parallel = true;
    body(n * i / chunks, n * (i + 1) / chunks);
    t_inside_parallel = false;
  };
  if (!pool().run(static_cast<int>(chunks), chunk)) body(0, n);
}

}  // namespace mpt
