/* The kernel library's 8-bit and 4-bit float element formats (MPT_DTYPE_E4M3, MPT_DTYPE_E5M2,
 * MPT_DTYPE_E2M1) as its quantize kernels round to them, and the tiles a block-scaled tensor is cut
 * into: written once for the CPU kernels (src/kernels_fp8.cpp) and the CUDA ones
 * (cuda/src/quantize.cu), so that the two agree by construction on what they share. C++ only;
 * usable in device code. */
#ifndef MPT_BYTE_FORMATS_H
#define MPT_BYTE_FORMATS_H

#include <cstdint>

#include "mpt/abi.h"

#if defined(__CUDACC__)
#define MPT_BYTE_FORMATS_HD __host__ __device__
#else
#define MPT_BYTE_FORMATS_HD
#endif

namespace mpt {

struct ByteFormat {
  int32_t dtype;
  int mantissa_bits;
  int min_exponent;       // exponent of the smallest normal value
  int max_exponent;       // exponent of the largest finite value
  uint32_t max_mantissa;  // its mantissa field
  float max;              // the largest finite value
  uint8_t max_bits;       // its pattern
  uint8_t nan_bits;       // the pattern written for NaN (and for Inf in e4m3, which has none); e2m1 has none: 0
  uint8_t inf_bits;       // +Inf's pattern; 0 where the format has no Inf
  uint8_t sign_bit;       // 0x80; e2m1's value sits in the low four bits of its byte, its sign in bit 3
  MPT_BYTE_FORMATS_HD constexpr bool has_inf() const { return inf_bits != 0; }
  MPT_BYTE_FORMATS_HD constexpr bool has_nan() const { return nan_bits != 0; }
  MPT_BYTE_FORMATS_HD constexpr uint32_t magnitude_mask() const { return sign_bit - 1u; }
};

/* e4m3 (OCP E4M3FN: 448 at most, no Inf, NaN S.1111.111), e5m2 (57344, IEEE-like Inf and NaN) and
 * e2m1 (OCP FP4: 6 at most, no Inf or NaN); any other dtype gives e4m3. */
MPT_BYTE_FORMATS_HD constexpr ByteFormat byte_format(int dtype) {
  if (dtype == MPT_DTYPE_E5M2) return {MPT_DTYPE_E5M2, 2, -14, 15, 3, 57344.0f, 0x7B, 0x7F, 0x7C, 0x80};
  if (dtype == MPT_DTYPE_E2M1) return {MPT_DTYPE_E2M1, 1, 0, 2, 1, 6.0f, 0x07, 0x00, 0x00, 0x08};
  return {MPT_DTYPE_E4M3, 3, -6, 8, 6, 448.0f, 0x7E, 0x7F, 0x00, 0x80};
}

/* A tensor viewed as `rows` rows of its last dimension (`cols` values), cut into tiles of
 * `tile_rows` rows by `block` columns, row-major; the last tiles of a row or column may be smaller.
 * One scale per tile. */
struct TileGrid {
  int64_t rows, cols, block, tile_rows, rows_of_tiles, tiles_per_row;

  MPT_BYTE_FORMATS_HD constexpr int64_t tiles() const { return rows_of_tiles * tiles_per_row; }
  MPT_BYTE_FORMATS_HD constexpr int64_t tile_of(int64_t r, int64_t c) const {
    return (r / tile_rows) * tiles_per_row + c / block;
  }
  // Tile k's rows [row_begin, row_end) and columns [col_begin, col_end).
  MPT_BYTE_FORMATS_HD constexpr int64_t row_begin(int64_t k) const { return (k / tiles_per_row) * tile_rows; }
  MPT_BYTE_FORMATS_HD constexpr int64_t row_end(int64_t k) const {
    return row_begin(k) + tile_rows < rows ? row_begin(k) + tile_rows : rows;
  }
  MPT_BYTE_FORMATS_HD constexpr int64_t col_begin(int64_t k) const { return (k % tiles_per_row) * block; }
  MPT_BYTE_FORMATS_HD constexpr int64_t col_end(int64_t k) const {
    return col_begin(k) + block < cols ? col_begin(k) + block : cols;
  }
};

/* The grid of a rows x cols view in tiles of tile_rows x block (both at least 1). */
MPT_BYTE_FORMATS_HD constexpr TileGrid tile_grid(int64_t rows, int64_t cols, int64_t block, int64_t tile_rows) {
  return {rows, cols, block, tile_rows, rows / tile_rows + (rows % tile_rows != 0 ? 1 : 0),
          cols / block + (cols % block != 0 ? 1 : 0)};
}

/* Rows of the last dimension of a tensor (a scalar is one row of one value): its grid in tiles of
 * tile_rows x block. */
inline TileGrid tile_grid(const mpt_tensor& t, int64_t block, int64_t tile_rows) {
  int64_t rows = 1, cols = 1;
  if (t.ndim > 0) {
    cols = t.shape[t.ndim - 1];
    for (int i = 0; i + 1 < t.ndim; ++i) rows *= t.shape[i];
  }
  return tile_grid(rows, cols, block, tile_rows);
}

/* A tensor as one tile: the grid of a per-tensor scale. */
inline TileGrid one_tile(const mpt_tensor& t) {
  const TileGrid rows = tile_grid(t, 1, 1);
  return tile_grid(rows.rows, rows.cols, rows.cols > 0 ? rows.cols : 1, rows.rows > 0 ? rows.rows : 1);
}

}  // namespace mpt

#endif
