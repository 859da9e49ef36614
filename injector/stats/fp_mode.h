// The floating-point mode the statistics are computed under.
//
// Every statistic is defined under the IEEE defaults: round to nearest even, subnormal operands
// read as they are, subnormal results kept, no exception trapping. The scans run on the traced
// program's own threads, and a program may have changed those settings (torch.set_flush_denormal
// sets flush-to-zero and denormals-are-zero; feenableexcept unmasks exceptions; fesetround changes
// the rounding). Under denormals-are-zero a subnormal converted to double reads as zero, so the
// extremes and sums of subnormal values would come out wrong.
//
// DefaultFloatingPointMode sets the defaults for its scope and then gives the thread back its own
// MXCSR, status flags included: the scan neither depends on the program's mode nor leaves a mark
// in it. Elsewhere than x86-64 it does nothing (the C++ code there uses the defaults).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace fpscope::stats {

class DefaultFloatingPointMode {
 public:
#if defined(__x86_64__)
  // All exceptions masked, round to nearest, no flush-to-zero, no denormals-are-zero, no flags.
  static constexpr uint32_t kDefaultMxcsr = 0x1F80;

  DefaultFloatingPointMode() : saved_(_mm_getcsr()) { _mm_setcsr(kDefaultMxcsr); }
  ~DefaultFloatingPointMode() { _mm_setcsr(saved_); }
#else
  DefaultFloatingPointMode() = default;
#endif
  DefaultFloatingPointMode(const DefaultFloatingPointMode&) = delete;
  DefaultFloatingPointMode& operator=(const DefaultFloatingPointMode&) = delete;

 private:
#if defined(__x86_64__)
  uint32_t saved_;
#endif
};

}  // namespace fpscope::stats
