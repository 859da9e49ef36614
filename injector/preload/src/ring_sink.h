// The collector's shared-memory ring as a RecordSink: what the injector writes in a traced run.
#pragma once

#include <memory>

#include "fpscope/collector/ring.h"
#include "record_writer.h"

namespace fpscope::inject {

class RingSink final : public RecordSink {
 public:
  explicit RingSink(std::unique_ptr<RingProducer> producer) : producer_(std::move(producer)) {}
  void* reserve(uint16_t slots) override { return producer_->reserve(slots); }
  void publish() override { producer_->publish(); }
  bool wait_drained(std::chrono::milliseconds limit) override { return producer_->wait_drained(limit); }
  RingProducer& producer() { return *producer_; }

 private:
  std::unique_ptr<RingProducer> producer_;
};

}  // namespace fpscope::inject
