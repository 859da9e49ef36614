// The library's own thread pool: splits big elementwise loops over mpt_set_num_threads() threads.
// A loop is cut into the same chunks for the same thread count, so results never depend on timing.
#ifndef MPT_KERNELS_PARALLEL_H
#define MPT_KERNELS_PARALLEL_H

#include <cstdint>
#include <functional>

namespace mpt {

int num_threads();
void set_num_threads(int n);  // n <= 0: one per hardware thread

// Calls body(begin, end) on disjoint ranges covering [0, n), in parallel when n is at least
// 2 * min_chunk. Nested calls, and calls while another thread uses the pool, run serially.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body);

// Runs task(context, i) for each i in [0, tasks) on the pool's threads and the caller's, each
// taking the next task as it comes free. False, with nothing run, when the pool cannot be had
// (one thread, a nested call, another thread using it): the caller then runs them itself.
bool parallel_tasks(int64_t tasks, void (*task)(void* context, int64_t i), void* context);

}  // namespace mpt

#endif
