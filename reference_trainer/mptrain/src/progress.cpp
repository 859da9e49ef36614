// The per-epoch progress display (see progress.h).
#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace mptrain {

EpochProgress::EpochProgress(int epoch, int epochs, int64_t steps, bool shown)
    : epoch_(epoch), epochs_(epochs), steps_(steps), terminal_(shown && isatty(STDERR_FILENO) == 1), shown_(shown),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double EpochProgress::images_per_s(int64_t images) const {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return seconds > 0.0 ? static_cast<double>(images) / seconds : 0.0;
}

void EpochProgress::update(int64_t step_in_epoch, double mean_loss, double accuracy, int64_t images) {
  if (!terminal_) return;
  auto now = std::chrono::steady_clock::now();
  // Redrawing costs a write per step; ten times a second is enough for the eye.
  if (step_in_epoch + 1 < steps_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  int filled = steps_ > 0 ? static_cast<int>((step_in_epoch + 1) * kWidth / steps_) : kWidth;
  std::string bar = std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(kWidth - filled), '.');
  fmt::print(stderr, "\repoch {}/{} [{}] {}/{} loss {:.4f} acc {:.2f}% {:.0f} img/s  ", epoch_ + 1, epochs_,
             bar, step_in_epoch + 1, steps_, mean_loss, accuracy, images_per_s(images));
  std::fflush(stderr);
}

double EpochProgress::finish(double mean_loss, double accuracy, int64_t images) {
  double rate = images_per_s(images);
  if (!shown_) return rate;
  if (terminal_) fmt::print(stderr, "\n");
  fmt::print(stderr, "epoch {}/{}: {} steps, loss {:.4f}, train accuracy {:.2f}%, {:.0f} images/s\n",
             epoch_ + 1, epochs_, steps_, mean_loss, accuracy, rate);
  return rate;
}

}  // namespace mptrain
