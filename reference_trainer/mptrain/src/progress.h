// Progress of an epoch on stderr: a redrawn bar (loss, accuracy so far, images/s) when stderr is
// a terminal, otherwise one line at the end of each epoch so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>

namespace mptrain {

class EpochProgress {
 public:
  // `shown` false: nothing is printed (the ranks but 0 of a data-parallel run).
  EpochProgress(int epoch, int epochs, int64_t steps, bool shown = true);
  // After each step: mean loss and accuracy (percent) so far, images done so far.
  void update(int64_t step_in_epoch, double mean_loss, double accuracy, int64_t images);
  // Prints the closing line; returns the images/s of the epoch.
  double finish(double mean_loss, double accuracy, int64_t images);

 private:
  double images_per_s(int64_t images) const;

  int epoch_;
  int epochs_;
  int64_t steps_;
  bool terminal_;
  bool shown_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mptrain
