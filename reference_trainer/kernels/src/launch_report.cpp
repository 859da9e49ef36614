// The launch report: narrowing-store counts and parameter-update sums (launch_report.h).
#include "launch_report.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernel_context.h"

namespace mpt {
namespace {

thread_local LaunchReport* t_current = nullptr;

// What the rounding did to the nonzero finite results of one store.
struct Classes {
  uint64_t flushed = 0, subnormal = 0, overflowed = 0, results = 0;
};

// Branch-free on the bits, so the loop vectorizes (this file is built with -ftree-vectorize): a
// result counts when its fp32 magnitude bits are neither 0 nor those of Inf/NaN; the stored value's
// magnitude bits say the rest (0: zero; below the smallest normal's: subnormal; the exponent
// field's alone: infinity).
template <int kMantissaBits>
Classes classify(const float* src, const uint16_t* stored, int64_t n) {
  constexpr uint32_t kExponentMask = 0x7fffu & ~((1u << kMantissaBits) - 1);
  constexpr uint32_t kSmallestNormal = 1u << kMantissaBits;
  Classes c;
  for (int64_t begin = 0; begin < n; begin += 1 << 16) {  // 32-bit counters per piece
    const int64_t end = std::min<int64_t>(n, begin + (1 << 16));
    uint32_t results = 0, flushed = 0, subnormal = 0, overflowed = 0;
    for (int64_t i = begin; i < end; ++i) {
      uint32_t x;
      std::memcpy(&x, src + i, 4);
      const uint32_t magnitude = x & 0x7fffffffu;
      const uint32_t counted = (magnitude != 0) & (magnitude < 0x7f800000u);
      const uint32_t h = stored[i] & 0x7fffu;
      results += counted;
      flushed += counted & (h == 0);
      subnormal += counted & (h != 0) & (h < kSmallestNormal);
      overflowed += counted & (h == kExponentMask);
    }
    c.results += results;
    c.flushed += flushed;
    c.subnormal += subnormal;
    c.overflowed += overflowed;
  }
  return c;
}

void atomic_add(uint64_t& target, uint64_t value) {
  if (value != 0) std::atomic_ref<uint64_t>(target).fetch_add(value, std::memory_order_relaxed);
}

void add_counts(mpt_update_counts& into, const mpt_update_counts& c) {
  into.nonzero += c.nonzero;
  into.changed += c.changed;
  into.lost += c.lost;
  into.computed_abs_sum += c.computed_abs_sum;
  into.computed_sq_sum += c.computed_sq_sum;
  into.applied_abs_sum += c.applied_abs_sum;
  into.applied_sq_sum += c.applied_sq_sum;
  into.weight_sq_sum += c.weight_sq_sum;
}

}  // namespace

LaunchReport::LaunchReport(const mpt_launch_desc& desc, mpt_launch_report* out) : desc_(desc), out_(out) {
  *out_ = mpt_launch_report{};
  out_->filled = MPT_REPORTED_STORES;
}

void LaunchReport::count_store(const void* dst, int32_t dtype, const float* src, const uint16_t* stored, int64_t n) {
  if (n <= 0 || (dtype != MPT_DTYPE_F16 && dtype != MPT_DTYPE_BF16)) return;
  const char* at = static_cast<const char*>(dst);
  const int outputs = std::min(desc_.n_outputs, MPT_MAX_REPORTED_OUTPUTS);
  for (int o = 0; o < outputs; ++o) {
    const mpt_tensor& t = desc_.outputs[o];
    const char* begin = static_cast<const char*>(t.data);
    if (t.dtype != dtype || begin == nullptr || at < begin ||
        at + n * 2 > begin + element_count(t) * static_cast<int64_t>(dtype_size(t.dtype)))
      continue;
    const Classes c = dtype == MPT_DTYPE_F16 ? classify<10>(src, stored, n) : classify<7>(src, stored, n);
    mpt_store_counts part{};
    part.results = c.results;
    part.flushed = c.flushed;
    part.subnormal = c.subnormal;
    part.overflowed = c.overflowed;
    add_stores(o, part);
    return;  // outputs do not overlap (an in-place output is one tensor)
  }
}

void LaunchReport::add_stores(int output, const mpt_store_counts& part) {
  if (output < 0 || output >= std::min(desc_.n_outputs, MPT_MAX_REPORTED_OUTPUTS)) return;
  mpt_store_counts& s = out_->stores[output];
  std::atomic_ref<uint32_t>(s.narrowed).store(1, std::memory_order_relaxed);
  atomic_add(s.results, part.results);
  atomic_add(s.flushed, part.flushed);
  atomic_add(s.subnormal, part.subnormal);
  atomic_add(s.overflowed, part.overflowed);
}

void LaunchReport::add_update_chunk(int64_t begin, const mpt_update_counts& part) {
  std::lock_guard<std::mutex> lock(mutex_);
  update_parts_.emplace_back(begin, part);
}

void LaunchReport::finish_update(uint64_t elements) {
  std::sort(update_parts_.begin(), update_parts_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  mpt_update_counts total{};
  total.elements = elements;
  for (const auto& [begin, part] : update_parts_) add_counts(total, part);
  out_->update = total;
  out_->filled |= MPT_REPORTED_UPDATE;
}

LaunchReport* current_report() { return t_current; }

CurrentReportScope::CurrentReportScope(LaunchReport* report) : previous_(t_current) { t_current = report; }
CurrentReportScope::~CurrentReportScope() { t_current = previous_; }

}  // namespace mpt
