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
// mode, status flags included: the scan neither depends on the program's mode nor leaves a mark
// in it. On x86-64 that is MXCSR, written only when it differs (a guard inside another costs two
// reads); elsewhere the C floating-point environment (<cfenv>).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

namespace fpscope::stats {

class DefaultFloatingPointMode {
 public:
#if defined(__x86_64__)
  // All exceptions masked, round to nearest, no flush-to-zero, no denormals-are-zero.
  static constexpr uint32_t kDefaultMxcsr = 0x1F80;
  static constexpr uint32_t kStatusFlags = 0x3F;

  DefaultFloatingPointMode() : saved_(_mm_getcsr()) {
    if ((saved_ & ~kStatusFlags) != kDefaultMxcsr)
      _mm_setcsr(kDefaultMxcsr | (saved_ & kStatusFlags));
  }
  ~DefaultFloatingPointMode() {
    if (_mm_getcsr() != saved_) _mm_setcsr(saved_);  // the flags the scan raised go too
  }
#else
  DefaultFloatingPointMode() {
    std::fegetenv(&saved_);
    std::fesetenv(FE_DFL_ENV);
  }
  ~DefaultFloatingPointMode() { std::fesetenv(&saved_); }
#endif
  DefaultFloatingPointMode(const DefaultFloatingPointMode&) = delete;
  DefaultFloatingPointMode& operator=(const DefaultFloatingPointMode&) = delete;

 private:
#if defined(__x86_64__)
  uint32_t saved_;
#else
  std::fenv_t saved_;
#endif
};

}  // namespace fpscope::stats
