// One-pass numerical statistics of a tensor: what fpscope measures for every tensor it sees.
//
// compute_stats() reads a contiguous array of fp32, fp16, bf16, fp64 or 8-bit float values once and
// fills TensorStats:
// counts of NaN, +Inf, -Inf, zeros and subnormals (in the array's own format), min, max, absmax,
// smallest nonzero magnitude, mean and rms over the finite values, the first non-finite value, an
// exponent histogram, and for each narrower format (fp16, bf16, fp8 e4m3, fp8 e5m2) how many values
// a round-to-nearest-even cast would overflow, flush to zero, make subnormal, or leave within a
// factor of two of the largest finite value. docs/statistics.md defines each number exactly; tests
// check each against an independent reference.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fpscope/contract/number_formats.h"

namespace fpscope {

// The measured contract::Dtype values (contract::is_measured), under the same numbers.
enum class ElementType : uint8_t {
  F32 = 0, F16 = 1, BF16 = 2, F64 = 6,
  E4M3 = 7, E5M2 = 8, E4M3FNUZ = 9, E5M2FNUZ = 10, E8M0 = 11,  // the 8-bit formats
  E2M1 = 12                                                     // OCP FP4, one value per byte
};
static_assert(static_cast<int>(ElementType::BF16) == static_cast<int>(contract::Dtype::BF16));
static_assert(static_cast<int>(ElementType::F64) == static_cast<int>(contract::Dtype::F64));
static_assert(static_cast<int>(ElementType::E4M3) == static_cast<int>(contract::Dtype::E4M3));
static_assert(static_cast<int>(ElementType::E8M0) == static_cast<int>(contract::Dtype::E8M0));
static_assert(static_cast<int>(ElementType::E2M1) == static_cast<int>(contract::Dtype::E2M1));

// Whether the type is one of the 8-bit formats (contract::kByteFormats).
constexpr bool is_byte_type(ElementType type) {
  return contract::is_byte_float(static_cast<contract::Dtype>(type));
}

// Bytes of one element of that type.
constexpr std::size_t element_bytes(ElementType type) {
  return is_byte_type(type) ? 1 : type == ElementType::F64 ? 8 : type == ElementType::F32 ? 4 : 2;
}

enum class StatsLevel : uint8_t {
  Basic = 0,  // counts, min/max/absmax/min_nonzero, mean/rms, first non-finite
  Full = 1    // Basic plus the exponent histogram and the per-format cast counts
};

// Narrower formats and the histogram's range: the trace contract's.
using contract::CastFormat;
using contract::kCastFormatCount;
using contract::kHistBins;
using contract::kHistMaxExponent;
using contract::kHistMinExponent;

struct CastCounts {
  uint64_t overflow = 0;   // finite, and rounds beyond the format's largest finite value
  uint64_t underflow = 0;  // finite and nonzero, and rounds to zero
  uint64_t subnormal = 0;  // finite and nonzero, and rounds to a nonzero subnormal
  uint64_t near_max = 0;   // finite, max_finite/2 <= |x|, and does not overflow
  friend bool operator==(const CastCounts&, const CastCounts&) = default;
};

struct TensorStats {
  uint64_t count = 0;
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;
  // Over finite values; NaN when there is none (min_nonzero: no finite nonzero value).
  // min/max order -0 below +0 (IEEE totalOrder); mean and rms are accumulated in double with the
  // error bound given in docs/statistics.md.
  double min, max, absmax, min_nonzero, mean, rms;
  int64_t first_nonfinite = -1;     // flat index of the first NaN/Inf, -1 if none
  uint64_t first_nonfinite_bits = 0;  // its raw bits, zero-extended
  // Full level only (zero otherwise):
  std::array<CastCounts, kCastFormatCount> cast{};
  // Finite nonzero fp64 values beyond the histogram's range: |x| < 2^kHistMinExponent, and
  // |x| >= 2^(kHistMaxExponent + 1). Always 0 for the narrower types.
  uint64_t hist_below = 0, hist_above = 0;
  // hist[e - kHistMinExponent] counts finite nonzero x with 2^e <= |x| < 2^(e+1). Last: a copy
  // may keep the fields before it whole and the histogram's populated span only.
  std::array<uint64_t, kHistBins> hist{};

  uint64_t nonfinite() const { return nan + pos_inf + neg_inf; }
};

// The bins of `hist` from its first nonzero one to its last, [first, end); empty (first == end)
// when every bin is zero. Most tensors span a few dozen of the 277 bins: this looks at whole
// groups of eight from either end, so that writing or keeping a histogram costs its span.
struct HistSpan {
  int first = 0, end = 0;
};
inline HistSpan populated_bins(const std::array<uint64_t, kHistBins>& hist) {
  constexpr int kGroup = 8;
  const auto any = [&](int g) {  // bins [g, g + 8), all of them inside the histogram
    const uint64_t* h = &hist[static_cast<std::size_t>(g)];
    return (h[0] | h[1] | h[2] | h[3] | h[4] | h[5] | h[6] | h[7]) != 0;
  };
  int first = 0;
  while (first + kGroup <= kHistBins && !any(first)) first += kGroup;
  while (first < kHistBins && hist[static_cast<std::size_t>(first)] == 0) ++first;
  if (first == kHistBins) return {};
  int end = kHistBins;
  while (end - kGroup >= first && !any(end - kGroup)) end -= kGroup;
  while (hist[static_cast<std::size_t>(end - 1)] == 0) --end;
  return {first, end};
}

// Measures `n` elements at `data` (any alignment). Thread-safe; allocates nothing. Picks the
// fastest kernel the CPU supports (AVX-512, AVX2 or portable); every kernel gives the same counts.
// An array of more than kStatsChunkElements elements is scanned in chunks of that many, each into
// a partial state of its own, and the partial states are merged in chunk order: so the result is
// the same whether one thread scans every chunk or several threads share them (below).
void compute_stats(const void* data, ElementType type, std::size_t n, StatsLevel level,
                   TensorStats* out);

inline constexpr std::size_t kStatsChunkElements = std::size_t{1} << 14;

// Runs body(i) once for every i in [0, count), on any threads, and returns when all have run.
class ChunkRunner {
 public:
  virtual void run(std::size_t count, void (*body)(void* context, std::size_t i), void* context) = 0;

 protected:
  ~ChunkRunner() = default;
};

// compute_stats() with the chunks handed to `runner`: the same TensorStats, bit for bit. Allocates
// the chunks' partial states (reused by later calls on the same thread).
void compute_stats(const void* data, ElementType type, std::size_t n, StatsLevel level,
                   TensorStats* out, ChunkRunner& runner);

// Name of the kernel compute_stats() uses on this CPU ("avx512_gfni", "avx512", "avx2" or
// "scalar"), for run metadata.
const char* compute_stats_kernel();

}  // namespace fpscope
