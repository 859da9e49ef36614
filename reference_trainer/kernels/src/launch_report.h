// The launch report (mpt_launch_report in mpt/abi.h): what a kernel tells a caller that asked
// about its own work. The report of the launch running on a thread is reachable from anywhere in
// the kernel (current_report()), and parallel_for() hands it to the pool's threads with each chunk,
// so the library's store path counts narrowing stores without any kernel passing it along.
#ifndef MPT_KERNELS_LAUNCH_REPORT_H
#define MPT_KERNELS_LAUNCH_REPORT_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "mpt/abi.h"

namespace mpt {

class LaunchReport {
 public:
  LaunchReport(const mpt_launch_desc& desc, mpt_launch_report* out);

  // n fp32 results `src` were rounded into the 16-bit (f16 or bf16) values `stored`, at `dst`: when
  // dst lies in one of the launch's outputs, that output's store counts grow (atomically: chunks
  // count at once, and integer sums do not depend on their order).
  void count_store(const void* dst, int32_t dtype, const float* src, const uint16_t* stored, int64_t n);

  // Adds a chunk's store counts to output `output`'s (atomically) and marks it narrowed: count_store's,
  // or a quantize kernel's of its 8-bit or 4-bit output (its nonzero finite inputs, and of them those
  // quantized to zero, to a subnormal, or saturated: `overflowed`).
  void add_stores(int output, const mpt_store_counts& part);

  // Parameter updates: each chunk of elements [begin, end) adds its partial counts; finish() sums
  // them in the order of `begin`, so the double sums depend on the chunking only, not on timing.
  void add_update_chunk(int64_t begin, const mpt_update_counts& part);
  void finish_update(uint64_t elements);

 private:
  const mpt_launch_desc& desc_;
  mpt_launch_report* out_;
  std::mutex mutex_;
  std::vector<std::pair<int64_t, mpt_update_counts>> update_parts_;
};

// The report of the launch running on this thread (or on the thread whose parallel_for chunk this
// thread runs); nullptr when nobody asked.
LaunchReport* current_report();

// Makes `report` current on this thread for the scope's life.
class CurrentReportScope {
 public:
  explicit CurrentReportScope(LaunchReport* report);
  ~CurrentReportScope();
  CurrentReportScope(const CurrentReportScope&) = delete;
  CurrentReportScope& operator=(const CurrentReportScope&) = delete;

 private:
  LaunchReport* previous_;
};

// Adds one element's comparison of its old value p, its computed update u (double: the exact
// sum of the fp32 terms the kernel adds) and the value stored (as fp32) into `c`. A 16-bit
// parameter's old and new values arrive as fp32; that conversion is one to one, so equal fp32 bits
// are equal stored bits. The sums take the elements whose p, u and stored value are all finite.
inline void add_update_element(mpt_update_counts& c, float p, double u, float stored) {
  uint32_t p_bits, s_bits;
  std::memcpy(&p_bits, &p, 4);
  std::memcpy(&s_bits, &stored, 4);
  const bool nonzero = u != 0.0;  // NaN too
  const bool changed = p_bits != s_bits;
  c.nonzero += nonzero ? 1 : 0;
  c.changed += changed ? 1 : 0;
  c.lost += nonzero && !changed ? 1 : 0;
  if (std::isfinite(p) && std::isfinite(stored) && std::isfinite(u)) {
    const double applied = static_cast<double>(stored) - static_cast<double>(p);
    c.computed_abs_sum += std::fabs(u);
    c.computed_sq_sum += u * u;
    c.applied_abs_sum += std::fabs(applied);
    c.applied_sq_sum += applied * applied;
    c.weight_sq_sum += static_cast<double>(p) * static_cast<double>(p);
  }
}

}  // namespace mpt

#endif
