// The portable kernel: one element at a time, in the order of the array. It is the definition the
// vector kernels are tested against, and the path taken on CPUs without AVX2.
#include <cstring>

#include "kernels.h"

namespace fpscope::stats {
namespace {

template <const SourceLayout& S, const ThresholdTable& T, typename Bits, typename ToDouble>
void scan(const void* data, std::size_t n, unsigned parts, Accumulator& acc, ToDouble to_double) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));  // the array may be misaligned
    add_element<S, T>(acc, b, int64_t(i), to_double(b), parts);
  }
}

}  // namespace

void scan_scalar(const void* data, ElementType type, std::size_t n, StatsLevel level,
                 Accumulator& acc) {
  const unsigned parts = level == StatsLevel::Full ? kFullParts : 0;
  switch (type) {
    case ElementType::F32:
      scan<kLayoutF32, kThresholdsF32, uint32_t>(data, n, parts, acc, bits_to_double);
      break;
    case ElementType::F16:
      scan<kLayoutF16, kThresholdsF16, uint16_t>(data, n, parts, acc, f16_bits_to_double);
      break;
    case ElementType::BF16:
      scan<kLayoutBF16, kThresholdsBF16, uint16_t>(data, n, parts, acc, bf16_bits_to_double);
      break;
    case ElementType::F64:
      scan<kLayoutF64, kThresholdsF64, uint64_t>(data, n, parts, acc, f64_bits_to_double);
      break;
    default:  // the 8-bit formats reach no kernel (kernels.h)
      break;
  }
}

}  // namespace fpscope::stats
