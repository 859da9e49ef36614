// The statistics kernels and how one is chosen. Internal to fpscope_stats; the tests and the
// benchmark include it to run one kernel explicitly and to compare kernels with one another.
//
// Every kernel scans the whole array into an Accumulator and must give exactly the same counts,
// extremes, histogram and cast counts as the scalar kernel; sums may differ in rounding only
// within the bound stated in docs/statistics.md. fp64 arrays take the scalar kernel under every
// kernel. The 8-bit formats reach no kernel: compute_stats() counts their bit patterns instead
// (byte_stats.h), the same under every kernel.
#pragma once

#include <cstddef>

#include "accumulator.h"
#include "fpscope/fp8_recipes.h"
#include "fpscope/tensor_stats.h"

namespace fpscope::stats {

// Avx512Gfni is the AVX-512 kernel counting exponent fields with GFNI, BITALG and VBMI.
enum class Kernel { Scalar, Avx2, Avx512, Avx512Gfni };

void scan_scalar(const void* data, ElementType type, std::size_t n, StatsLevel level,
                 Accumulator& acc);
void scan_avx2(const void* data, ElementType type, std::size_t n, StatsLevel level,
               Accumulator& acc);
void scan_avx512(const void* data, ElementType type, std::size_t n, StatsLevel level, bool gfni,
                 Accumulator& acc);

// Whether this CPU can run `k` (the scalar kernel always can).
bool kernel_supported(Kernel k);
// The fastest kernel this CPU runs; compute_stats() uses it.
Kernel best_kernel();
const char* kernel_name(Kernel k);

// compute_stats() with a chosen kernel; `k` must be supported.
void compute_stats_with(Kernel k, const void* data, ElementType type, std::size_t n,
                        StatsLevel level, TensorStats* out);
void compute_stats_with(Kernel k, const void* data, ElementType type, std::size_t n,
                        StatsLevel level, TensorStats* out, ChunkRunner& runner);

// The kernels of compute_recipes() (fpscope/fp8_recipes.h): it takes the best this CPU runs; the
// tests and the benchmark run each explicitly. Every one gives the same counts and scales; the sums
// differ in order only.
enum class RecipeKernel { Portable, Avx2, Avx512 };
bool recipe_kernel_supported(RecipeKernel k);
const char* recipe_kernel_name(RecipeKernel k);
void compute_recipes_with(RecipeKernel k, const void* data, ElementType type, const RecipeRequest& request,
                          RecipeResult* out);

}  // namespace fpscope::stats
