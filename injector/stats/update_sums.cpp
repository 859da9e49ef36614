// A parameter's optimizer step counted from its copy before the step (fpscope/update_sums.h).
#include "fpscope/update_sums.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "accumulator.h"

namespace fpscope {

namespace {

constexpr std::size_t kBlock = 4096;  // elements summed in order before their sums are combined
constexpr int kLanes = 4;             // interleaved partial sums within a block

template <typename Bits>
Bits load(const void* data, std::size_t i) {
  Bits b;
  std::memcpy(&b, static_cast<const char*>(data) + i * sizeof(Bits), sizeof(Bits));
  return b;
}

template <typename Bits>
void snapshot(const void* param, const void* grad, std::size_t count, void* old, uint8_t* nonzero) {
  if (count == 0) return;
  std::memcpy(old, param, count * sizeof(Bits));
  constexpr Bits kMagnitude = std::numeric_limits<Bits>::max() >> 1;  // all bits but the sign
  for (std::size_t i = 0; i < count; ++i) nonzero[i] = (load<Bits>(grad, i) & kMagnitude) != 0;
}

template <typename Bits, typename Decode>
UpdateSums sums(const void* old, const void* now, const uint8_t* nonzero, std::size_t count, Decode decode) {
  UpdateSums s;
  stats::CompensatedSum abs_sum, sq_sum, weight_sum;  // the blocks' sums; +Inf once one overflows
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t end = begin + kBlock < count ? begin + kBlock : count;
    // Locals only, which nothing the loads read can alias: the compiler keeps them in registers.
    double abs_lane[kLanes] = {}, sq_lane[kLanes] = {}, weight_lane[kLanes] = {};
    uint64_t changed = 0, flagged = 0, lost = 0;
    // Element i into lane `lane`, branch-free. A left-out element adds +0, which changes no sum
    // (every partial sum starts at +0 and adds nonnegative terms).
    const auto add = [&](std::size_t i, int lane) {
      const Bits before = load<Bits>(old, i), after = load<Bits>(now, i);
      const bool moved = before != after, flag = nonzero[i] != 0;
      changed += moved;
      flagged += flag;
      lost += flag && !moved;
      const double p = decode(before);
      const double d = decode(after) - p;
      const bool summed = std::isfinite(d);  // not NaN or Inf on either side, nor beyond double's range
      const double dd = summed ? d : 0.0, pp = summed ? p : 0.0;
      abs_lane[lane] += std::fabs(dd);
      sq_lane[lane] += dd * dd;
      weight_lane[lane] += pp * pp;
    };
    std::size_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      add(i, 0);
      add(i + 1, 1);
      add(i + 2, 2);
      add(i + 3, 3);
    }
    for (int lane = 0; i < end; ++i, ++lane) add(i, lane);
    s.changed += changed;
    s.nonzero += flagged;
    s.lost += lost;
    abs_sum.add((abs_lane[0] + abs_lane[1]) + (abs_lane[2] + abs_lane[3]));
    sq_sum.add((sq_lane[0] + sq_lane[1]) + (sq_lane[2] + sq_lane[3]));
    weight_sum.add((weight_lane[0] + weight_lane[1]) + (weight_lane[2] + weight_lane[3]));
  }
  s.applied_abs_sum = abs_sum.value();
  s.applied_sq_sum = sq_sum.value();
  s.weight_sq_sum = weight_sum.value();
  return s;
}

// Calls f.template operator()<Bits>(decode) with the bits type and decoder of `type`. The decoders
// are passed as lambdas, each a type of its own, so that the loops inline them.
template <typename F>
auto with_type(ElementType type, F&& f) {
  switch (type) {
    case ElementType::F16:
      return f.template operator()<uint16_t>([](uint16_t b) { return stats::f16_bits_to_double(b); });
    case ElementType::BF16:
      return f.template operator()<uint16_t>([](uint16_t b) { return stats::bf16_bits_to_double(b); });
    case ElementType::F64:
      return f.template operator()<uint64_t>([](uint64_t b) { return stats::f64_bits_to_double(b); });
    default:  // F32; callers hold to update_sums_supported()
      return f.template operator()<uint32_t>([](uint32_t b) { return stats::bits_to_double(b); });
  }
}

}  // namespace

void snapshot_update(ElementType type, const void* param, const void* grad, std::size_t count, void* old,
                     uint8_t* nonzero) {
  with_type(type, [&]<typename Bits>(auto) { snapshot<Bits>(param, grad, count, old, nonzero); });
}

UpdateSums update_sums(ElementType type, const void* old, const void* now, const uint8_t* nonzero,
                       std::size_t count) {
  return with_type(type, [&]<typename Bits>(auto decode) { return sums<Bits>(old, now, nonzero, count, decode); });
}

}  // namespace fpscope
