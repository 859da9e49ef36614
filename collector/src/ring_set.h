// The rings of one run: the first, which the collector creates, and the siblings the run's other
// traced processes create beside it (ring.h). The collector drains them all into one trace; ring k's
// records are source k of the trace writer.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/collector/ring.h"
#include "fpscope/collector/trace_writer.h"

namespace fpscope {

class RingSet {
 public:
  explicit RingSet(std::unique_ptr<RingConsumer> first) : first_(std::move(first)) {}
  ~RingSet();
  RingSet(const RingSet&) = delete;
  RingSet& operator=(const RingSet&) = delete;

  // Takes over the siblings marked ready since the last call. A sibling that cannot be mapped is
  // reported once through *error (its process's records are lost; the others go on).
  void adopt_ready(std::string* error);

  // Drains every ring into `writer`, at most `limit_per_ring` records of each this call; returns
  // the records handed over.
  std::size_t drain(TraceWriter& writer, std::size_t limit_per_ring = SIZE_MAX);

  // Whether every process of the run has said it exits (its last record drained into `writer`):
  // the first ring's and every sibling's, none being made or left unadopted. A process may still
  // write after that (a thread racing its exit, a child it forks on the way out), so the records
  // are only as complete as the drain that follows says.
  bool every_process_said_exit(const TraceWriter& writer) const;

  // Tells every producer that the collector is gone.
  void mark_collector_gone();

  // Sleeps on the run's doorbell until a producer rings it (as `ask` says: at its next publish, or
  // only once its ring is filled to the fill mark), a sibling is made ready, wake() is called, or
  // `limit` has passed; returns at once when a ring holds records or a ready sibling waits to be
  // adopted.
  void wait_for_records(std::chrono::nanoseconds limit, CollectorWaiting ask = kWakeOnPublish);
  // Ends a wait_for_records() of another thread.
  void wake();

  RingConsumer& first() { return *first_; }
  const std::string& name() const { return first_->name(); }
  uint64_t slot_count() const { return first_->slot_count(); }
  // Sums over the rings.
  uint64_t dropped_records() const;
  uint64_t producer_waits() const;
  uint64_t corrupt_records() const;
  // Processes that traced (rings with an owner) and those refused a ring (kMaxRings reached).
  uint32_t traced_processes() const;
  uint32_t refused_processes() const { return first_->rings_refused(); }

 private:
  // A counter of every ring, summed.
  template <typename Count>
  uint64_t sum(Count count) const;

  std::unique_ptr<RingConsumer> first_;
  std::vector<std::unique_ptr<RingConsumer>> siblings_;  // [k - 1]: sibling k, nullptr until adopted
};

}  // namespace fpscope
