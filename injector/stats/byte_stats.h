// Statistics of the 8-bit floating formats (e4m3, e5m2, their fnuz variants, e8m0).
//
// An 8-bit array has only 256 distinct values, so the scan does the least work there is: it counts
// how often each bit pattern occurs (four interleaved tables, so that a run of one value does not
// wait on its own increments), and every statistic follows from the 256 counts and a table of
// what each pattern is (its class, exact value, histogram bin and cast outcomes), made at compile
// time from the contract's ByteFormat. Only a chunk that holds a NaN or Inf is read a second time,
// up to its first one. docs/statistics.md, "8-bit formats", states the rules.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "formats.h"
#include "fpscope/tensor_stats.h"

namespace fpscope::stats {

// What one bit pattern of an 8-bit format is.
struct BytePattern {
  enum Kind : uint8_t { Finite, Nan, PosInf, NegInf };
  Kind kind = Finite;
  bool zero = false, subnormal = false;
  double value = 0;  // finite patterns: the exact value, -0 for negative zero
  int hist = -1;     // finite nonzero patterns: the TensorStats::hist index
  // Per cast format (CastFormat order), the outcome of a round-to-nearest-even cast.
  std::array<bool, kCastFormatCount> overflow{}, underflow{}, cast_subnormal{}, near_max{};
};

struct ByteTable {
  std::array<BytePattern, 256> pattern{};
  // Finite patterns by increasing magnitude: sums add small values first.
  std::array<uint8_t, 256> by_magnitude{};
  int finite = 0;  // entries of by_magnitude in use
};

const ByteTable& byte_table(ElementType type);

// Counts of each bit pattern over a run of elements, and where the run's first NaN or Inf lies.
struct ByteCounts {
  std::array<uint64_t, 256> n{};
  int64_t first_nonfinite = -1;
  uint8_t first_nonfinite_bits = 0;

  // Adds the counts of the run that follows, `offset` elements after this one's start.
  void merge(const ByteCounts& later, uint64_t offset) {
    for (std::size_t i = 0; i < n.size(); ++i) n[i] += later.n[i];
    if (first_nonfinite < 0 && later.first_nonfinite >= 0) {
      first_nonfinite = int64_t(offset) + later.first_nonfinite;
      first_nonfinite_bits = later.first_nonfinite_bits;
    }
  }
};

// Adds the `n` bytes at `data` to `out` (whose first_nonfinite is relative to `data`).
void count_bytes(const uint8_t* data, std::size_t n, const ByteTable& table, ByteCounts& out);

// TensorStats from the counts of a whole array.
void finalize_bytes(const ByteCounts& counts, ElementType type, StatsLevel level, TensorStats* out);

}  // namespace fpscope::stats
