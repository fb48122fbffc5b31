// Rows of d channels (one per position) stored by channel blocks: block b holds channels
// [b * kBlock, (b + 1) * kBlock) of every row, kBlock floats a row, the block's rows contiguous.
//
// Why not plain rows: threads split the AFT mixer's work by channel blocks. With rows of d
// channels side by side, each thread's slice of a row sat next to another thread's, the hardware
// prefetchers of one core pulled in lines the other was writing, and the lines ping-ponged between
// cores: the AFT-local prefill's mixer ran at half speed per channel at 2 threads. By blocks, each
// thread's rows form one memory range of their own, and a block's window stays in L1.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/huge_page_buffer.h"

namespace aft {

class ChannelBlockedRows {
 public:
  // Channels per block: a multiple of every SIMD width, one 256-byte (4-line) row per block.
  static constexpr std::size_t kBlock = 64;

  static std::size_t blocks_of(std::size_t width) { return (width + kBlock - 1) / kBlock; }
  // The memory a row of width channels takes (its blocks' rows).
  static std::size_t row_bytes(std::size_t width) {
    return blocks_of(width) * kBlock * sizeof(float);
  }
  // Channels of block `block` of a width-channel row: kBlock, or fewer for the last one.
  static std::size_t block_width(std::size_t width, std::size_t block) {
    return std::min(kBlock, width - block * kBlock);
  }

  std::size_t rows() const { return rows_; }
  std::size_t width() const { return width_; }
  std::size_t blocks() const { return blocks_of(width_); }

  float* row(std::size_t r, std::size_t block) {
    return data_.data() + (block * rows_ + r) * kBlock;
  }
  const float* row(std::size_t r, std::size_t block) const {
    return data_.data() + (block * rows_ + r) * kBlock;
  }

  // Sets the rows of width channels; the first min(old, new) rows keep their values.
  void resize(std::size_t rows, std::size_t width) { *this = resized(rows, width); }
  // A copy with rows of width channels: the first min(rows, rows()) as here if the width is the
  // same, the others zero.
  ChannelBlockedRows resized(std::size_t rows, std::size_t width) const {
    ChannelBlockedRows to;
    to.data_.resize(blocks_of(width) * rows * kBlock);
    to.rows_ = rows;
    to.width_ = width;
    if (width == width_) {
      const std::size_t kept = std::min(rows, rows_);
      for (std::size_t b = 0; b < blocks_of(width) && kept > 0; ++b) {
        std::memcpy(to.row(0, b), row(0, b), kept * kBlock * sizeof(float));
      }
    }
    return to;
  }

  // Every float, block by block (the padding lanes of a last narrow block included): for saving.
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::size_t floats() const { return data_.size(); }

  // Copies block `block`'s channels of a plain row of width channels into row r (each thread of an
  // op the blocks it computes).
  void store(std::size_t r, std::size_t block, const float* values) {
    std::memcpy(row(r, block), values + block * kBlock, block_width(width_, block) * sizeof(float));
  }

 private:
  // On 2 MiB pages from 2 MiB on: a prefill's first touch of its new rows is a fault per page.
  std::vector<float, kernels::HugePageAllocator<float>> data_;
  std::size_t rows_ = 0, width_ = 0;
};

}  // namespace aft
