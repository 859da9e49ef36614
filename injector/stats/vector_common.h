// Pieces shared by the AVX2 and AVX-512 kernels that need no vector instructions: the block and
// group sizes, the scalar fallback for a group holding a NaN/Inf (or, at the Full level, a
// subnormal of fp32/bf16), and the exponent histogram counted from a buffer of bin indices.
//
// How the vector kernels work (docs/statistics.md has the reasoning):
// - The array is read in groups of 64 elements. A group without special values takes the fast
//   path: min/max as integer total-order keys, smallest nonzero magnitude as min(|x| bits - 1)
//   (zero wraps to the largest value), zero/subnormal counts and the cast threshold counts as
//   per-lane counters incremented under compare masks, sums converted to double.
// - A group with a special value is handed element by element to add_element(), the scalar
//   kernel's own routine; its order is kept, so the first NaN/Inf is found exactly.
// - Per-lane counters are flushed every block of 4096 elements (short enough for 16-bit lanes).
// - At the Full level each fast element's histogram index (floor(log2|x|) + 150, 0 for zero) goes
//   to a small buffer; a scalar loop then counts the block's buffer into four sub-histograms, so
//   that repeated bins do not wait on one another's stores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "accumulator.h"

namespace fpscope::stats {

inline constexpr std::size_t kGroupElements = 64;
inline constexpr std::size_t kBlockElements = 4096;
// Histogram index as the kernels buffer it: hist bin + 1, with 0 for a zero.
inline constexpr int kHistIndexCount = kHistBins + 1;

// Four interleaved sub-histograms with 32-bit counters, flushed into the accumulator before any
// counter can overflow.
struct SubHistograms {
  uint32_t bins[4][kHistIndexCount];
  std::size_t pending = 0;  // elements counted since the last flush

  void clear() {
    std::memset(bins, 0, sizeof bins);
    pending = 0;
  }
  void count(const uint16_t* index, std::size_t n, Accumulator& acc) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      uint64_t w;
      std::memcpy(&w, index + i, 8);
      ++bins[0][w & 0xFFFF];
      ++bins[1][(w >> 16) & 0xFFFF];
      ++bins[2][(w >> 32) & 0xFFFF];
      ++bins[3][w >> 48];
    }
    for (; i < n; ++i) ++bins[0][index[i]];
    pending += n;
    if (pending >= (std::size_t(1) << 31)) flush(acc);
  }
  void flush(Accumulator& acc) {
    for (int b = 1; b < kHistIndexCount; ++b)
      acc.hist[b - 1] += uint64_t(bins[0][b]) + bins[1][b] + bins[2][b] + bins[3][b];
    clear();
  }
};

// The scalar path for `count` elements starting at element `first` of the array.
template <const SourceLayout& S, const ThresholdTable& T, typename Bits, typename ToDouble>
inline void add_elements(Accumulator& acc, const unsigned char* base, std::size_t first,
                         std::size_t count, bool full, ToDouble to_double) {
  for (std::size_t i = first; i < first + count; ++i) {
    Bits b;
    std::memcpy(&b, base + i * sizeof(Bits), sizeof(Bits));
    add_element<S, T>(acc, b, int64_t(i), to_double(b), full);
  }
}

}  // namespace fpscope::stats
