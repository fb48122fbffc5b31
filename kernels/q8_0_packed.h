// q8_0 weights in the layout of the GEMV kernels (the file keeps them row-major, docs/format.md).
//
// Rows are taken in groups of kQ8GroupRows (the last group padded with zero rows). A group's
// quants are stored block after block (kQ8BlockSize columns), each block as 8 steps of 4 columns,
// each step the group's rows side by side:
//   quants[((g * blocks + b) * 8 + s) * 64 + i * 4 + j] = wq[g * 16 + i][32 b + 4 s + j]
//   scales[(g * blocks + b) * 16 + i]                    = wd[g * 16 + i][b]
// so that one SIMD register holds 4 columns of many rows, and the step's 4 activation quants,
// broadcast to every lane, multiply all of them without horizontal sums. The group of row r (a
// multiple of 16) starts at quants + r * cols and scales + r * cols / 32, as a row does in the
// file's layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/kernels.h"
#include "kernels/weight_matrix.h"

namespace aft::kernels {

// Rows rounded up to whole groups.
constexpr std::size_t q8_0_packed_rows(std::size_t rows) {
  return (rows + kQ8GroupRows - 1) / kQ8GroupRows * kQ8GroupRows;
}

// The places of weight (r, c) and of the scale of row r's block b in the packed planes.
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

// A packed copy of one weight matrix, 64-byte aligned, owned.
class PackedQ8_0 {
 public:
  PackedQ8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd);
  WeightMatrix matrix() const { return {WeightType::Q8_0, quants_.get(), scales_.get()}; }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<int8_t[], Free> quants_;
  std::unique_ptr<float[], Free> scales_;
};

}  // namespace aft::kernels
