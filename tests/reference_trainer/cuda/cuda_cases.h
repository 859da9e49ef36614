// The table of GPU-versus-CPU comparisons: one launch per case, every kernel of docs/kernels.md
// with several dtypes, special values and both accumulator modes, and for each how its outputs
// must agree (bit for bit, or within a stated tolerance; docs/gpu.md explains each tolerance).
#ifndef MPT_TESTS_CUDA_CASES_H
#define MPT_TESTS_CUDA_CASES_H

#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace mpt_cuda_test {

struct ComparisonCase {
  std::string label;  // unique, [A-Za-z0-9_]
  LaunchSpec spec;
  bool exact = true;
  double rtol = 0.0, atol = 0.0;
};

const std::vector<ComparisonCase>& comparison_cases();

}  // namespace mpt_cuda_test

#endif
