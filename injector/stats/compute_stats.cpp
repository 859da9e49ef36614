// compute_stats(): picks the fastest kernel this CPU supports, runs it over the array and turns
// the accumulated state into TensorStats (decoding extremes, deriving cast outcomes from the
// cumulative threshold counts, dividing the sums).
#include <algorithm>
#include <cmath>
#include <vector>

#include "byte_stats.h"
#include "fp_mode.h"
#include "kernels.h"

namespace fpscope::stats {
namespace {

const SourceLayout& layout_of(ElementType type) {
  switch (type) {
    case ElementType::F16:
      return kLayoutF16;
    case ElementType::BF16:
      return kLayoutBF16;
    case ElementType::F64:
      return kLayoutF64;
    default:  // fp32 (the 8-bit formats have no layout here: byte_stats.h)
      break;
  }
  return kLayoutF32;
}

const ThresholdTable& thresholds_of(ElementType type) {
  switch (type) {
    case ElementType::F16:
      return kThresholdsF16;
    case ElementType::BF16:
      return kThresholdsBF16;
    case ElementType::F64:
      return kThresholdsF64;
    default:  // fp32 (the 8-bit formats have no thresholds here: byte_stats.h)
      break;
  }
  return kThresholdsF32;
}

// The value whose total-order key is `key` (order_key() is its own inverse).
double key_to_double(ElementType type, int64_t key) {
  if (type == ElementType::F64) return f64_bits_to_double(uint64_t(order_key(uint64_t(key))));
  if (type == ElementType::F32) return bits_to_double(uint32_t(order_key(uint32_t(key))));
  const auto bits = uint16_t(order_key(uint16_t(key)));
  return type == ElementType::F16 ? f16_bits_to_double(bits) : bf16_bits_to_double(bits);
}

// Finite source values whose magnitude reaches threshold reference `ref` (formats.h).
uint64_t reaching(const Accumulator& acc, int8_t ref, uint64_t finite_nonzero) {
  if (ref == kNoneReach) return 0;
  if (ref == kAllNonzeroReach) return finite_nonzero;
  return acc.at_least[ref];
}

void fill_cast_counts(const Accumulator& acc, const ThresholdTable& t, TensorStats* out) {
  const uint64_t finite_nonzero = out->count - out->nonfinite() - out->zero;
  for (int f = 0; f < kCastFormatCount; ++f) {
    const CastRefs& r = t.refs[f];
    const uint64_t overflow = reaching(acc, r.overflow, finite_nonzero);
    const uint64_t near_max = reaching(acc, r.near_max, finite_nonzero);
    const uint64_t nonzero = reaching(acc, r.nonzero, finite_nonzero);
    const uint64_t normal = reaching(acc, r.normal, finite_nonzero);
    out->cast[f] =
        CastCounts{overflow, finite_nonzero - nonzero, nonzero - normal, near_max - overflow};
  }
}

}  // namespace

void finalize(const Accumulator& acc, ElementType type, StatsLevel level, TensorStats* out) {
  const DefaultFloatingPointMode mode;  // also called for the GPU's partial results
  *out = TensorStats{};
  out->count = acc.count;
  out->nan = acc.nan;
  out->pos_inf = acc.pos_inf;
  out->neg_inf = acc.neg_inf;
  out->zero = acc.zero;
  out->subnormal = acc.subnormal;
  out->first_nonfinite = acc.first_nonfinite;
  out->first_nonfinite_bits = acc.first_nonfinite_bits;

  const uint64_t finite = acc.count - out->nonfinite();
  if (finite == 0) {
    out->min = out->max = out->absmax = out->mean = out->rms = NAN;
  } else {
    out->min = key_to_double(type, acc.min_key);
    out->max = key_to_double(type, acc.max_key);
    out->absmax = std::fmax(std::fabs(out->min), std::fabs(out->max));
    out->mean = acc.sum.value() / double(finite);
    out->rms = std::sqrt(acc.sum_squares.value() / double(finite));
  }
  const SourceLayout& s = layout_of(type);
  out->min_nonzero = acc.min_nonzero_abs < s.inf_abs ? s.magnitude(acc.min_nonzero_abs) : NAN;

  if (level == StatsLevel::Full) {
    // Only the populated bins: the rest are zero already, and most tensors span a few dozen of them.
    const HistSpan span = populated_bins(acc.hist);
    std::copy(acc.hist.begin() + span.first, acc.hist.begin() + span.end, out->hist.begin() + span.first);
    out->hist_below = acc.hist_below;
    out->hist_above = acc.hist_above;
    fill_cast_counts(acc, thresholds_of(type), out);
  }
}

bool kernel_supported(Kernel k) {
  // The injector may get here from a constructor that runs before libgcc's own CPU probe.
  __builtin_cpu_init();
  switch (k) {
    case Kernel::Scalar:
      return true;
    case Kernel::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("fma");
    case Kernel::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512cd");
    case Kernel::Avx512Gfni:
      return kernel_supported(Kernel::Avx512) && __builtin_cpu_supports("gfni") &&
             __builtin_cpu_supports("avx512bitalg") && __builtin_cpu_supports("avx512vbmi");
  }
  return false;
}

Kernel best_kernel() {
  static const Kernel best = kernel_supported(Kernel::Avx512Gfni) ? Kernel::Avx512Gfni
                             : kernel_supported(Kernel::Avx512)   ? Kernel::Avx512
                             : kernel_supported(Kernel::Avx2)     ? Kernel::Avx2
                                                                  : Kernel::Scalar;
  return best;
}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::Scalar:
      return "scalar";
    case Kernel::Avx2:
      return "avx2";
    case Kernel::Avx512:
      return "avx512";
    case Kernel::Avx512Gfni:
      return "avx512_gfni";
  }
  return "?";
}

namespace {

// One contiguous run of elements into `acc` (whose count the caller sets).
void scan(Kernel k, const void* data, ElementType type, std::size_t n, StatsLevel level, Accumulator& acc) {
  if (n == 0) return;
  switch (k) {
    case Kernel::Scalar:
      scan_scalar(data, type, n, level, acc);
      break;
    case Kernel::Avx2:
      scan_avx2(data, type, n, level, acc);
      break;
    case Kernel::Avx512:
      scan_avx512(data, type, n, level, false, acc);
      break;
    case Kernel::Avx512Gfni:
      scan_avx512(data, type, n, level, true, acc);
      break;
  }
}

std::size_t chunk_count(std::size_t n) { return n == 0 ? 1 : (n + kStatsChunkElements - 1) / kStatsChunkElements; }

// Chunk i of the array: its first element and its length.
std::size_t chunk_begin(std::size_t i) { return i * kStatsChunkElements; }
std::size_t chunk_length(std::size_t n, std::size_t i) {
  return std::min(kStatsChunkElements, n - chunk_begin(i));
}

// Chunk i scanned into `part` (a fresh accumulator).
void scan_chunk(Kernel k, const void* data, ElementType type, std::size_t n, StatsLevel level, std::size_t i,
                Accumulator& part) {
  part.count = chunk_length(n, i);
  scan(k, static_cast<const unsigned char*>(data) + chunk_begin(i) * element_bytes(type), type, part.count,
       level, part);
}

// An 8-bit array (byte_stats.h), in the same chunks as the others: on this thread, or each chunk's
// counts on any thread, merged in chunk order.
void compute_byte_stats(const void* data, ElementType type, std::size_t n, StatsLevel level, TensorStats* out,
                        ChunkRunner* runner) {
  const DefaultFloatingPointMode mode;
  const ByteTable& table = byte_table(type);
  const auto* bytes = static_cast<const uint8_t*>(data);
  const std::size_t chunks = chunk_count(n);
  ByteCounts total;
  if (runner == nullptr || chunks == 1) {
    count_bytes(bytes, n, table, total);
  } else {
    thread_local std::vector<ByteCounts> parts;
    parts.assign(chunks, ByteCounts{});
    struct Job {
      const uint8_t* bytes;
      std::size_t n;
      const ByteTable* table;
      ByteCounts* parts;
    } job{bytes, n, &table, parts.data()};
    runner->run(
        chunks,
        [](void* context, std::size_t i) {
          const Job& j = *static_cast<const Job*>(context);
          count_bytes(j.bytes + chunk_begin(i), chunk_length(j.n, i), *j.table, j.parts[i]);
        },
        &job);
    for (std::size_t i = 0; i < chunks; ++i) total.merge(parts[i], chunk_begin(i));
  }
  finalize_bytes(total, type, level, out);
}

}  // namespace

void compute_stats_with(Kernel k, const void* data, ElementType type, std::size_t n,
                        StatsLevel level, TensorStats* out) {
  if (is_byte_type(type)) return compute_byte_stats(data, type, n, level, out, nullptr);
  // Chunk 0 goes straight into the total; each later chunk into a partial state, merged in order.
  const DefaultFloatingPointMode mode;
  Accumulator acc;
  scan_chunk(k, data, type, n, level, 0, acc);
  for (std::size_t i = 1; i < chunk_count(n); ++i) {
    Accumulator part;
    scan_chunk(k, data, type, n, level, i, part);
    acc.merge(part, chunk_begin(i));
  }
  finalize(acc, type, level, out);
}

void compute_stats_with(Kernel k, const void* data, ElementType type, std::size_t n,
                        StatsLevel level, TensorStats* out, ChunkRunner& runner) {
  if (is_byte_type(type)) return compute_byte_stats(data, type, n, level, out, &runner);
  const DefaultFloatingPointMode mode;  // the chunks on this thread, the merges
  const std::size_t chunks = chunk_count(n);
  if (chunks == 1) {
    compute_stats_with(k, data, type, n, level, out);
    return;
  }
  thread_local std::vector<Accumulator> parts;
  parts.assign(chunks, Accumulator{});
  struct Job {
    Kernel k;
    const void* data;
    ElementType type;
    std::size_t n;
    StatsLevel level;
    Accumulator* parts;
  } job{k, data, type, n, level, parts.data()};
  runner.run(
      chunks,
      [](void* context, std::size_t i) {
        const Job& j = *static_cast<const Job*>(context);
        const DefaultFloatingPointMode chunk_mode;  // on any of the program's threads
        scan_chunk(j.k, j.data, j.type, j.n, j.level, i, j.parts[i]);
      },
      &job);
  for (std::size_t i = 1; i < chunks; ++i) parts[0].merge(parts[i], chunk_begin(i));
  finalize(parts[0], type, level, out);
}

}  // namespace fpscope::stats

namespace fpscope {

void compute_stats(const void* data, ElementType type, std::size_t n, StatsLevel level,
                   TensorStats* out) {
  stats::compute_stats_with(stats::best_kernel(), data, type, n, level, out);
}

void compute_stats(const void* data, ElementType type, std::size_t n, StatsLevel level,
                   TensorStats* out, ChunkRunner& runner) {
  stats::compute_stats_with(stats::best_kernel(), data, type, n, level, out, runner);
}

const char* compute_stats_kernel() { return stats::kernel_name(stats::best_kernel()); }

}  // namespace fpscope
