// Threads that share the scan of a large tensor with the thread that launched the kernel.
//
// compute_stats() cuts an array into fixed chunks and merges their partial states in chunk order
// (fpscope/tensor_stats.h), so which thread scans which chunk never changes a number. While the
// launching thread measures a kernel's tensors the program's own worker threads are idle, so on a
// machine with more than one hardware thread the helpers here take chunks beside it.
//
// A program whose kernel library offers its own pool (libmpt_kernels' mpt_parallel_tasks) lends
// it instead, when the thread count is automatic: its workers are the threads that wait for the
// next kernel, awake for a few microseconds after the last one, so they take chunks at once and
// are still awake when the next kernel starts. Helpers of our own would have to be woken, and the
// program's workers would fall asleep while the scan runs.
//
// The launching thread always takes chunks itself: a helper that is slow to wake (the machine is
// busy) only means the launching thread scans more of the array, never that it waits for work no
// one does. One tensor is shared at a time; a launch from another program thread that finds the
// helpers busy scans on its own. Helpers block every signal (the program's handlers run on its own
// threads). A forked child has none of them, and the locks it inherited may have been held by one
// at the fork: there every scan runs on the launching thread alone, touching none of them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <mutex>
#include <pthread.h>
#include <vector>

#include "fpscope/tensor_stats.h"

namespace fpscope::inject {

class StatsWorkers final : public ChunkRunner {
 public:
  // `threads` counts the launching thread: threads - 1 helpers (none for 0 or 1). With
  // `program_pool`, a pool the program's kernel library lends is used in their place.
  explicit StatsWorkers(int threads, bool program_pool = false);
  ~StatsWorkers();
  StatsWorkers(const StatsWorkers&) = delete;
  StatsWorkers& operator=(const StatsWorkers&) = delete;

  void run(std::size_t count, void (*body)(void* context, std::size_t i), void* context) override;

  // The threads a scan may use: the launching thread and its helpers.
  int threads() const { return helpers_wanted_ + 1; }
  // How many scans were shared with the program's pool, and with the helpers.
  uint64_t lent_scans() const { return lent_scans_.load(std::memory_order_relaxed); }
  uint64_t helped_scans() const { return helped_scans_.load(std::memory_order_relaxed); }

 private:
  bool start_helpers();
  void helper(uint64_t seen);
  static void* helper_main(void* start);
  void take_chunks(std::size_t count, void (*body)(void*, std::size_t), void* context);
  using ProgramTasks = void (*)(int64_t tasks, void (*task)(void*, int64_t), void* context);
  ProgramTasks program_tasks();

  const int helpers_wanted_;
  const bool program_pool_;
  const long creator_pid_;  // the process whose kernel library's pool may be used
  std::once_flag program_tasks_looked_up_;
  ProgramTasks program_tasks_ = nullptr;  // set once, under program_tasks_looked_up_
  std::atomic<uint64_t> lent_scans_{0}, helped_scans_{0};
  std::mutex use_;  // one shared scan at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<pthread_t> helpers_;  // plain handles: a forked child must not join or detach them
  std::atomic<long> owner_pid_{0};  // the process the helpers run in, 0 before the first shared scan
  bool stopping_ = false;
  uint64_t generation_ = 0;  // bumped for every shared scan
  int active_ = 0;           // helpers between taking a job and leaving it
  // The job of the current generation.
  void (*body_)(void*, std::size_t) = nullptr;
  void* context_ = nullptr;
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> finished_{0};
};

// The helper count when FPSCOPE_STATS_THREADS is 0 (automatic): one thread per hardware thread,
// at most 4, counting the launching thread.
int default_stats_threads();

}  // namespace fpscope::inject
