// The rings of one run, drained together (ring_set.h).
#include "ring_set.h"

#include <sys/mman.h>

namespace fpscope {

RingSet::~RingSet() {
  // Adopted siblings remove their names as they go; a sibling created but never marked ready (its
  // process died while creating it, or after the last adoption) is removed here.
  const uint32_t created = first_->rings_created();
  for (uint32_t k = 1; k <= created && k < kMaxRings; ++k) {
    if (k > siblings_.size() || !siblings_[k - 1]) shm_unlink(sibling_ring_name(first_->name(), k).c_str());
  }
}

void RingSet::adopt_ready(std::string* error) {
  const uint32_t created = first_->rings_created();
  for (uint32_t k = 1; k <= created && k < kMaxRings; ++k) {
    if (k <= siblings_.size() && siblings_[k - 1]) continue;
    if (!first_->ring_ready(k)) continue;
    if (siblings_.size() < k) siblings_.resize(k);
    std::string why;
    siblings_[k - 1] = RingConsumer::adopt(sibling_ring_name(first_->name(), k), &why);
    if (!siblings_[k - 1] && error->empty()) *error = why;
  }
}

std::size_t RingSet::drain(TraceWriter& writer, std::size_t limit_per_ring) {
  // Each ring has a limit of its own: a busy first ring must not starve its siblings.
  std::size_t n = first_->drain([&](const wire::RecordHeader* r) { writer.on_record(r, 0); }, limit_per_ring);
  for (std::size_t i = 0; i < siblings_.size(); ++i) {
    if (!siblings_[i]) continue;
    const auto source = static_cast<uint32_t>(i + 1);
    n += siblings_[i]->drain([&](const wire::RecordHeader* r) { writer.on_record(r, source); }, limit_per_ring);
  }
  return n;
}

bool RingSet::every_process_said_exit(const TraceWriter& writer) const {
  if (first_->rings_created() > siblings_.size() || !writer.said_exit(0)) return false;
  for (std::size_t i = 0; i < siblings_.size(); ++i)
    if (!siblings_[i] || !writer.said_exit(static_cast<uint32_t>(i + 1))) return false;
  return true;
}

void RingSet::mark_collector_gone() {
  first_->mark_collector_gone();
  for (auto& s : siblings_)
    if (s) s->mark_collector_gone();
}

void RingSet::wait_for_records(std::chrono::nanoseconds limit, CollectorWaiting ask) {
  RingHeader* h = first_->header();
  const uint32_t seen = h->doorbell.load(std::memory_order_acquire);
  h->collector_waiting.store(ask, std::memory_order_seq_cst);
  bool waiting = !first_->has_records();
  for (const auto& s : siblings_)
    if (s && s->has_records()) waiting = false;
  for (uint32_t k = static_cast<uint32_t>(siblings_.size()) + 1; waiting && k <= first_->rings_created() && k < kMaxRings; ++k)
    if (first_->ring_ready(k)) waiting = false;
  if (waiting) ring_sleep(h, seen, limit);
  h->collector_waiting.store(kCollectorAwake, std::memory_order_relaxed);
}

void RingSet::wake() { ring_wake(first_->header()); }

template <typename Count>
uint64_t RingSet::sum(Count count) const {
  uint64_t n = (first_.get()->*count)();
  for (const auto& s : siblings_)
    if (s) n += (s.get()->*count)();
  return n;
}

uint64_t RingSet::dropped_records() const { return sum(&RingConsumer::dropped_records); }
uint64_t RingSet::producer_waits() const { return sum(&RingConsumer::producer_waits); }
uint64_t RingSet::corrupt_records() const { return sum(&RingConsumer::corrupt_records); }

uint32_t RingSet::traced_processes() const {
  uint32_t n = first_->owner_pid() != 0 ? 1 : 0;
  for (const auto& s : siblings_)
    if (s) ++n;
  return n;
}

}  // namespace fpscope
