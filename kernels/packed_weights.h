// Weight matrices in the layouts of the GEMV kernels, packed once at model load (the model file
// keeps them row-major, docs/format.md). Decode reads every weight once per token, so a layout
// that the GEMV reads as one sequential stream, in the order it uses the weights, is worth a copy:
// a row-major matrix read a few rows at a time is many short streams, which the hardware
// prefetchers follow poorly (measured: bf16 rows of 1 KB read at half the rate of one stream).
//
// q8_0: rows in groups of kQ8GroupRows (the last group padded with zero rows). A group's quants
// are stored block after block (kQ8BlockSize columns), each block as 8 steps of 4 columns, each
// step the group's rows side by side:
//   quants[((g * blocks + b) * 8 + s) * 64 + i * 4 + j] = wq[g * 16 + i][32 b + 4 s + j]
//   scales[(g * blocks + b) * 16 + i]                    = wd[g * 16 + i][b]
// so that one SIMD register holds 4 columns of many rows, and the step's 4 activation quants,
// broadcast to every lane, multiply all of them without horizontal sums.
//
// bf16: rows in groups of kBf16GroupRows (16), columns padded with zeros to whole chunks of
// kBf16ChunkCols (32), the last group padded with zero rows; a group pair of columns after pair,
// each pair the group's rows side by side, a row's pair a 32-bit lane (column 2p in its low half):
//   w[((g * packed_cols / 2 + p) * 16 + i) * 2 + h] = w[g * 16 + i][2 p + h]
// so that one 64-byte line holds two columns of 16 rows: widened (a shift, a mask) they are two
// columns of the f32 layout below, and as they are, one vdpbf16ps multiplies them by a broadcast
// pair of activations, or 16 lines (a chunk) are one AMX tile of weights.
//
// f32: rows in groups of kF32GroupRows (the last group padded with zero rows), each group column
// after column, the group's rows side by side:
//   w[(g * cols + c) * 16 + i] = w[g * 16 + i][c]
// so that one register holds a column of many rows, which a broadcast value of x multiplies and
// adds into the rows' sums: no horizontal sums, and the same order of sums for one vector and for
// a batch (group_gemv.hpp).
//
// In all three, the group of row r (a multiple of the group's rows) starts at r * cols (bf16: the
// padded cols) values, and its q8_0 scales at r * cols / 32, as a row does in a row-major layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/huge_page_buffer.h"
#include "kernels/kernels.h"
#include "kernels/weight_matrix.h"

namespace aft::kernels {

// Rows rounded up to whole q8_0 groups.
constexpr std::size_t q8_0_packed_rows(std::size_t rows) {
  return (rows + kQ8GroupRows - 1) / kQ8GroupRows * kQ8GroupRows;
}

// The places of weight (r, c) and of the scale of row r's block b in the packed q8_0 planes.
constexpr std::size_t q8_0_packed_quant(std::size_t r, std::size_t c, std::size_t cols) {
  const std::size_t group_block = r / kQ8GroupRows * (cols / kQ8BlockSize) + c / kQ8BlockSize;
  return (group_block * (kQ8BlockSize / 4) + c % kQ8BlockSize / 4) * 4 * kQ8GroupRows +
         r % kQ8GroupRows * 4 + c % 4;
}
constexpr std::size_t q8_0_packed_scale(std::size_t r, std::size_t b, std::size_t cols) {
  return (r / kQ8GroupRows * (cols / kQ8BlockSize) + b) * kQ8GroupRows + r % kQ8GroupRows;
}

// Packs the file layout's planes (wq: rows x cols quants, wd: rows x cols / 32 scales; cols % 32
// == 0) into pq (q8_0_packed_rows(rows) * cols quants) and pd (q8_0_packed_rows(rows) * cols / 32
// scales).
void pack_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd, int8_t* pq,
               float* pd);

// The groups of rows of packed bf16 weights, the packed values of a [rows, cols] matrix, and the
// place of weight (r, c).
constexpr std::size_t bf16_packed_groups(std::size_t rows) {
  return (rows + kBf16GroupRows - 1) / kBf16GroupRows;
}
constexpr std::size_t bf16_packed_size(std::size_t rows, std::size_t cols) {
  return bf16_packed_groups(rows) * kBf16GroupRows * bf16_packed_cols(cols);
}
constexpr std::size_t bf16_packed_index(std::size_t r, std::size_t c, std::size_t cols) {
  return ((r / kBf16GroupRows * (bf16_packed_cols(cols) / 2) + c / 2) * kBf16GroupRows +
          r % kBf16GroupRows) *
             2 +
         c % 2;
}

// Packs row-major bf16 values w (rows x cols) into p (bf16_packed_size(rows, cols) values).
void pack_bf16(std::size_t rows, std::size_t cols, const uint16_t* w, uint16_t* p);

// Rows rounded up to whole f32 groups, and the place of weight (r, c).
constexpr std::size_t f32_packed_rows(std::size_t rows) {
  return (rows + kF32GroupRows - 1) / kF32GroupRows * kF32GroupRows;
}
constexpr std::size_t f32_packed_index(std::size_t r, std::size_t c, std::size_t cols) {
  return (r / kF32GroupRows * cols + c) * kF32GroupRows + r % kF32GroupRows;
}

// Packs row-major f32 values w (rows x cols) into p (f32_packed_rows(rows) * cols values).
void pack_f32(std::size_t rows, std::size_t cols, const float* w, float* p);
// Rows [first, first + rows) of packed f32 weights p (first a multiple of kF32GroupRows) as the
// columns of x, [cols, rows] row-major: x[c * rows + i] = w[first + i][c]. A group's column is 16
// contiguous values in both: copies, no transposition.
void unpack_f32_columns(std::size_t first, std::size_t rows, std::size_t cols, const float* p,
                        float* x);
// The same for packed bf16 weights p, widened exactly: a pair's line is two such columns.
void unpack_bf16_columns(std::size_t first, std::size_t rows, std::size_t cols, const uint16_t* p,
                         float* x);
// Packed f32 weights p (rows x cols) rounded to bf16 (f32_to_bf16), row-major into w (rows x
// cols): what add_bf16 packs, for an f32 model's products in bf16 (MatmulPrecision::BF16).
void unpack_f32_rounded_to_bf16(std::size_t rows, std::size_t cols, const float* p, uint16_t* w);

// A model's weight matrices in the GEMVs' layouts, in one allocation sized before the first, on
// 2 MiB pages where the system gives them (huge_page_buffer.h). Each matrix is 64-byte aligned.
// Each is packed by up to `threads` threads of the calling thread's team, groups of rows shared
// out: loading is mostly first touches of the copy's pages and reads of the file's, which the
// kernel serves for several threads at once.
class PackedWeights {
 public:
  PackedWeights() = default;
  // Room for `bytes` in all: the sum of the q8_0_bytes, bf16_bytes and f32_bytes of what is added.
  explicit PackedWeights(std::size_t bytes, int threads = 1);
  static std::size_t q8_0_bytes(std::size_t rows, std::size_t cols);
  static std::size_t bf16_bytes(std::size_t rows, std::size_t cols);
  static std::size_t f32_bytes(std::size_t rows, std::size_t cols);
  // Each packs into the room left (std::length_error if it does not fit: a wrong size above).
  WeightMatrix add_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd);
  WeightMatrix add_bf16(std::size_t rows, std::size_t cols, const uint16_t* w);
  WeightMatrix add_f32(std::size_t rows, std::size_t cols, const float* w);

 private:
  template <class T>
  T* take(std::size_t count);

  HugePageBuffer memory_;
  std::size_t used_ = 0;
  int threads_ = 1;
};

}  // namespace aft::kernels
