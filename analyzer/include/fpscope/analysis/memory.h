// Memory: use by category over time and at its peak.
// Part of libfpscope_analysis (fpscope/analysis.h includes every area).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/trace.h"

namespace fpscope::analysis {

// Allocations grouped by (name, category, bytes): an activation allocated every step is one row.
struct Allocation {
  std::string name, category;
  int64_t bytes = 0;            // of one allocation
  int64_t count = 0;            // times allocated
  int64_t first_alloc_id = 0;
  int64_t first_alloc_ns = 0;
  std::optional<int64_t> first_step;
};

struct CategoryMemory {
  std::string category;
  int64_t at_peak = 0;        // live bytes at the moment total live bytes peaked
  int64_t max_live = 0;       // the category's own peak
  int64_t allocated = 0;      // sum over all allocations
  int64_t allocations = 0;
};

struct MemoryReport {
  int64_t peak_bytes = 0;                 // total live bytes at the peak (first moment)
  std::optional<int64_t> peak_ns, peak_step;
  std::array<CategoryMemory, kCategoryCount> by_category;  // in kCategoryNames order
  std::vector<Allocation> largest;        // by bytes, then first allocation
  int64_t live_at_end = 0;
  int64_t events = 0;
};
MemoryReport memory(const Trace& trace, std::size_t largest = 10);

}  // namespace fpscope::analysis
