// Statistics of the 8-bit floating formats (see byte_stats.h).
#include "byte_stats.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "accumulator.h"

namespace fpscope::stats {
namespace {

constexpr bool reaches(double magnitude, Bound b) { return b.inclusive ? magnitude >= b.value : magnitude > b.value; }

constexpr ByteTable make_table(const contract::ByteFormat& f) {
  ByteTable t;
  for (int b = 0; b < 256; ++b) {
    BytePattern& p = t.pattern[std::size_t(b)];
    const auto bits = uint8_t(b);
    if (f.is_nan(bits)) {
      p.kind = BytePattern::Nan;
      continue;
    }
    if (f.is_inf(bits)) {
      p.kind = f.negative(bits) ? BytePattern::NegInf : BytePattern::PosInf;
      continue;
    }
    const double m = f.magnitude(bits);
    p.value = f.negative(bits) ? -m : m;
    p.zero = m == 0;
    p.subnormal = f.is_subnormal(bits);
    if (p.zero) continue;
    p.hist = floor_log2(m) - kHistMinExponent;
    for (int c = 0; c < kCastFormatCount; ++c) {
      const CastBounds bounds = cast_bounds(cast_format(c));
      const auto i = std::size_t(c);
      p.overflow[i] = reaches(m, bounds.overflow);
      p.near_max[i] = reaches(m, bounds.near_max) && !p.overflow[i];
      p.underflow[i] = !reaches(m, bounds.nonzero);
      p.cast_subnormal[i] = reaches(m, bounds.nonzero) && !reaches(m, bounds.normal);
    }
  }
  // Finite patterns by magnitude: a selection sort is cheap at compile time.
  std::array<bool, 256> taken{};
  for (;;) {
    int best = -1;
    for (int b = 0; b < 256; ++b) {
      const BytePattern& p = t.pattern[std::size_t(b)];
      if (taken[std::size_t(b)] || p.kind != BytePattern::Finite) continue;
      const double m = p.value < 0 ? -p.value : p.value;
      const BytePattern* q = best < 0 ? nullptr : &t.pattern[std::size_t(best)];
      if (q == nullptr || m < (q->value < 0 ? -q->value : q->value)) best = b;
    }
    if (best < 0) break;
    taken[std::size_t(best)] = true;
    t.by_magnitude[std::size_t(t.finite++)] = uint8_t(best);
  }
  return t;
}

constexpr std::array<ByteTable, 6> kTables = {
    make_table(contract::kByteFormats[0]), make_table(contract::kByteFormats[1]),
    make_table(contract::kByteFormats[2]), make_table(contract::kByteFormats[3]),
    make_table(contract::kByteFormats[4]), make_table(contract::kByteFormats[5])};
static_assert(kTables.size() == contract::kByteFormats.size());

// The tables against the formats' definitions (docs/statistics.md, "8-bit formats").
static_assert(kTables[0].finite == 254 && kTables[0].pattern[0x7E].value == 448.0 &&
              kTables[0].pattern[0x7F].kind == BytePattern::Nan && kTables[0].pattern[0x01].subnormal);
static_assert(kTables[1].finite == 248 && kTables[1].pattern[0x7C].kind == BytePattern::PosInf &&
              kTables[1].pattern[0xFC].kind == BytePattern::NegInf);
static_assert(kTables[2].finite == 255 && kTables[2].pattern[0x80].kind == BytePattern::Nan &&
              kTables[2].pattern[0x7F].value == 240.0);
// e2m1: every byte is finite (the high four bits are ignored); 0x7 is 6, 0x1 the subnormal 0.5.
static_assert(kTables[5].finite == 256 && kTables[5].pattern[0x7].value == 6.0 && kTables[5].pattern[0xF].value == -6.0 &&
              kTables[5].pattern[0x1].subnormal && kTables[5].pattern[0x8].zero);
static_assert(kTables[4].finite == 255 && !kTables[4].pattern[0].zero && kTables[4].pattern[0].hist == -127 - kHistMinExponent);
// 448 (e4m3's largest) neither overflows e4m3 nor fp16; e5m2's 57344 is near fp16's largest.
static_assert(!kTables[0].pattern[0x7E].overflow[int(CastFormat::E4M3)] &&
              kTables[0].pattern[0x7E].near_max[int(CastFormat::E4M3)]);
static_assert(kTables[1].pattern[0x7B].near_max[int(CastFormat::F16)]);

bool is_nonfinite(const BytePattern& p) { return p.kind != BytePattern::Finite; }

}  // namespace

const ByteTable& byte_table(ElementType type) {
  return kTables[std::size_t(int(type) - int(ElementType::E4M3))];
}

void count_bytes(const uint8_t* data, std::size_t n, const ByteTable& table, ByteCounts& out) {
  // Four tables of 32-bit counts, in runs short enough that none can overflow.
  constexpr std::size_t kRun = std::size_t{1} << 30;
  for (std::size_t start = 0; start < n; start += kRun) {
    const std::size_t len = n - start < kRun ? n - start : kRun;
    const uint8_t* p = data + start;
    uint32_t t[4][256] = {};
    std::size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      ++t[0][w & 0xFF];
      ++t[1][(w >> 8) & 0xFF];
      ++t[2][(w >> 16) & 0xFF];
      ++t[3][(w >> 24) & 0xFF];
      ++t[0][(w >> 32) & 0xFF];
      ++t[1][(w >> 40) & 0xFF];
      ++t[2][(w >> 48) & 0xFF];
      ++t[3][w >> 56];
    }
    for (; i < len; ++i) ++t[0][p[i]];
    uint64_t nonfinite = 0;
    for (std::size_t b = 0; b < 256; ++b) {
      const uint64_t c = uint64_t(t[0][b]) + t[1][b] + t[2][b] + t[3][b];
      out.n[b] += c;
      if (is_nonfinite(table.pattern[b])) nonfinite += c;
    }
    if (nonfinite != 0 && out.first_nonfinite < 0) {
      for (std::size_t j = 0; j < len; ++j) {
        if (is_nonfinite(table.pattern[p[j]])) {
          out.first_nonfinite = int64_t(start + j);
          out.first_nonfinite_bits = p[j];
          break;
        }
      }
    }
  }
}

void finalize_bytes(const ByteCounts& counts, ElementType type, StatsLevel level, TensorStats* out) {
  const ByteTable& table = byte_table(type);
  *out = TensorStats{};
  for (uint64_t c : counts.n) out->count += c;
  out->first_nonfinite = counts.first_nonfinite;
  out->first_nonfinite_bits = counts.first_nonfinite >= 0 ? counts.first_nonfinite_bits : 0;
  for (std::size_t b = 0; b < 256; ++b) {
    const uint64_t c = counts.n[b];
    const BytePattern& p = table.pattern[b];
    if (p.kind == BytePattern::Nan) out->nan += c;
    else if (p.kind == BytePattern::PosInf) out->pos_inf += c;
    else if (p.kind == BytePattern::NegInf) out->neg_inf += c;
    else if (p.zero) out->zero += c;
    else if (p.subnormal) out->subnormal += c;
  }
  // Extremes, sums, histogram and cast outcomes: each finite pattern present, smallest first.
  // A product count * value is exact (a value has at most 4 significant bits, a square 8) for
  // arrays of fewer than 2^45 elements; the products are summed with TwoSum.
  const uint64_t finite = out->count - out->nonfinite();
  out->min = out->max = out->absmax = out->min_nonzero = out->mean = out->rms = NAN;
  CompensatedSum sum, squares;
  bool any = false;
  for (int k = 0; k < table.finite; ++k) {
    const uint8_t b = table.by_magnitude[std::size_t(k)];
    const uint64_t c = counts.n[b];
    if (c == 0) continue;
    const BytePattern& p = table.pattern[b];
    const double v = p.value;
    // -0 orders below +0 (IEEE totalOrder), as for the wider formats.
    const auto below = [](double x, double y) { return x < y || (x == y && std::signbit(x) && !std::signbit(y)); };
    if (!any || below(v, out->min)) out->min = v;
    if (!any || below(out->max, v)) out->max = v;
    any = true;
    if (!p.zero && std::isnan(out->min_nonzero)) out->min_nonzero = std::fabs(v);
    sum.add(double(c) * v);
    squares.add(double(c) * (v * v));
    if (level != StatsLevel::Full || p.zero) continue;
    out->hist[std::size_t(p.hist)] += c;
    for (std::size_t f = 0; f < std::size_t(kCastFormatCount); ++f) {
      CastCounts& cc = out->cast[f];
      if (p.overflow[f]) cc.overflow += c;
      if (p.underflow[f]) cc.underflow += c;
      if (p.cast_subnormal[f]) cc.subnormal += c;
      if (p.near_max[f]) cc.near_max += c;
    }
  }
  if (finite != 0) {
    out->absmax = std::fmax(std::fabs(out->min), std::fabs(out->max));
    out->mean = sum.value() / double(finite);
    out->rms = std::sqrt(squares.value() / double(finite));
  }
}

}  // namespace fpscope::stats
