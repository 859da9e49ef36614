// Pieces shared by the AVX2 and AVX-512 kernels that need no vector instructions: the group and
// block sizes, the counts of a group's NaN and Inf from its lane masks, the scalar fallback for a
// group holding a subnormal at the Full level, and the Full level's per-block bookkeeping of
// exponent fields and cast thresholds.
//
// How the vector kernels work (docs/statistics.md has the reasoning):
// - The array is read in groups of 64 elements. A group without special values takes the fast
//   path: min/max as integer total-order keys (AVX2) or from the raw bits' unsigned and signed
//   extremes (AVX-512), smallest nonzero magnitude as min(|x| bits - 1)
//   (zero wraps to the largest value), zero/subnormal counts as per-lane counters incremented under
//   compare masks (the AVX-512 kernel's zeros at the Full level: fast elements less the nonzero
//   fields fold_block_fields counted), sums converted to double.
// - A group holding a NaN or an Inf and nothing else special counts those from compare masks
//   (add_nonfinite) and takes the fast path with them zeroed (attention scores under a causal mask
//   hold -inf in nearly every group); the zeros that makes are taken back out of the block's zero
//   and threshold counts.
// - A group holding, at the Full level, an fp32 or bf16 subnormal (which needs its exact histogram
//   bin) is handed element by element to add_element(), the scalar kernel's own routine, in order,
//   so the first NaN/Inf is found exactly there too.
// - Per-lane counters are flushed every block of 4096 elements (short enough for 16-bit lanes).
// - At the Full level each fast element's exponent field (as an fp32) goes to a per-block byte
//   buffer; the block's field histogram gives the exponent histogram and decides most cast
//   thresholds; the rest are compared against the block's values while they are still in L1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "accumulator.h"

namespace fpscope::stats {

inline constexpr std::size_t kGroupElements = 64;
inline constexpr std::size_t kBlockElements = 4096;
// At the Full level the vector kernels record, for each fast element, the exponent field its value
// has as an fp32 (fp16 values, subnormals included, are all normal fp32 values; fp32 and bf16
// subnormals take the scalar path), so 0 means zero and f in 1..254 means hist bin f - 127 + 149.
inline constexpr int kFieldToHistBin = -127 - kHistMinExponent;

// Whether a block of fp32 values holds an exact power of two (fold_block_fields): the kernels keep
// the signed maximum of (|x| bits - 1) & kPowerOfTwoProbeMask over its fast elements, which is
// kPowerOfTwoProbeHit exactly when one of them is a power of two (a zero gives a negative value,
// any other value less). fp16 and bf16 values are powers of two too often (one in 1024 and one in
// 128) for the probe to pay: their blocks are taken to hold some.
inline constexpr uint32_t kPowerOfTwoProbeMask = 0x807FFFFFu;
inline constexpr int32_t kPowerOfTwoProbeHit = 0x7FFFFF;

// The scalar way to count a buffer of exponent fields into `h` (every bin 1..254 written): eight
// interleaved sub-histograms, so that consecutive elements with the same exponent (the common case)
// do not wait on each other's stores. Used for blocks that span too many binades for vector
// counting.
inline void count_fields_scalar(const uint8_t* field, std::size_t n, uint32_t h[256]) {
  constexpr int kTables = 8;
  uint32_t bins[kTables][256] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, field + i, 8);
    for (int k = 0; k < kTables; ++k) ++bins[k][(w >> (8 * k)) & 0xFF];
  }
  for (; i < n; ++i) ++bins[0][field[i]];
  for (int f = 1; f < 255; ++f) {  // zeros (0) are counted elsewhere; 255 never occurs
    uint32_t total = 0;
    for (int k = 0; k < kTables; ++k) total += bins[k][f];
    h[f] = total;
  }
}

// Folds the exponent-field histogram `h` of a block's fast elements, whose counts lie in bins
// [first, last] (none if first > last; only those bins are read, so a count_fields() need write
// no other, and the bins outside may hold an earlier block's counts), into the accumulator:
// the exponent histogram, and every cast threshold count that the histogram decides on its own. A
// threshold inside a binade that holds some of the block's values needs a compare of each value:
// `count_at_least(thresholds, k, counts)` does that for k thresholds at once over the block's
// fast elements. `powers_of_two` says whether the block's fast values may include an exact power
// of two (the first value of a binade); when they do not, a threshold one step above a binade's
// first value is decided by the histogram too. Returns how many fields it counted (the block's
// fast values with a nonzero field).
template <const ThresholdTable& T, typename CountAtLeast>
inline uint64_t fold_block_fields(uint32_t h[256], int first, int last, bool powers_of_two,
                                  Accumulator& acc, CountAtLeast count_at_least) {
  uint64_t suffix[257];  // suffix[f]: fast values with first <= f' field, f <= f' <= last
  uint64_t total = 0;
  for (int f = last; f >= first; --f) {
    total += h[f];
    suffix[f] = total;
    acc.hist[f + kFieldToHistBin] += h[f];
  }
  // Fast nonzero values with field >= f (zeros, field 0, lie below every threshold).
  const auto at_or_above = [&](int f) -> uint64_t {
    return f > last ? 0 : f <= first ? total : suffix[f];
  };
  uint32_t pending[kMaxThresholds];
  int pending_index[kMaxThresholds];
  int k = 0;
  for (int t = 0; t < T.count; ++t) {
    const int f = T.field[t];
    if (T.starts_binade[t] || f == 0 || (T.follows_binade_start[t] && !powers_of_two)) {
      acc.at_least[t] += at_or_above(f);
    } else if (f < first || f > last || h[f] == 0) {
      acc.at_least[t] += at_or_above(f + 1);
    } else {
      pending[k] = T.value[t];
      pending_index[k++] = t;
    }
  }
  if (k == 0) return total;
  uint64_t counts[kMaxThresholds];
  count_at_least(pending, k, counts);
  for (int i = 0; i < k; ++i) acc.at_least[pending_index[i]] += counts[i];
  return total;
}

// A group's non-finite elements, counted from masks of its 64 elements (bit j for element
// first + j): the group's finite elements take the fast path with these zeroed, so that the
// block's zero count and the threshold compares made over its memory count them too, and the
// kernel takes them back out (nonfinite_zeroed). The first non-finite element of the array is the
// lowest bit of the first group with any, as the scalar path finds it.
template <typename Bits>
inline void add_nonfinite(Accumulator& acc, uint64_t nan, uint64_t pos_inf, uint64_t neg_inf,
                          const unsigned char* base, std::size_t first) {
  acc.nan += uint64_t(__builtin_popcountll(nan));
  acc.pos_inf += uint64_t(__builtin_popcountll(pos_inf));
  acc.neg_inf += uint64_t(__builtin_popcountll(neg_inf));
  if (acc.first_nonfinite < 0) {
    const std::size_t i = first + std::size_t(__builtin_ctzll(nan | pos_inf | neg_inf));
    Bits b;
    std::memcpy(&b, base + i * sizeof(Bits), sizeof(Bits));
    acc.first_nonfinite = int64_t(i);
    acc.first_nonfinite_bits = uint64_t(b);
  }
}

// The scalar path for `count` elements starting at element `first` of the array.
template <const SourceLayout& S, const ThresholdTable& T, typename Bits, typename ToDouble>
inline void add_elements(Accumulator& acc, const unsigned char* base, std::size_t first,
                         std::size_t count, unsigned parts, ToDouble to_double) {
  for (std::size_t i = first; i < first + count; ++i) {
    Bits b;
    std::memcpy(&b, base + i * sizeof(Bits), sizeof(Bits));
    add_element<S, T>(acc, b, int64_t(i), to_double(b), parts);
  }
}

}  // namespace fpscope::stats
