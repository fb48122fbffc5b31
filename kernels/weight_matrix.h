// A linear layer's weight matrix: [rows, cols] (PyTorch's nn.Linear layout, rows = outputs), in
// one of the weight dtypes, packed for the GEMV kernels at load (kernels/packed_weights.h; the
// model file keeps them row-major, docs/format.md), where a group of rows starts where its first
// row would in a row-major layout, so f32_rows / bf16_rows / q8_rows / q8_scales take a multiple of
// the group's rows (16 each).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace aft::kernels {

enum class WeightType { F32, BF16, Q8_0 };

struct WeightMatrix {
  WeightType type = WeightType::F32;
  // F32: packed float values; BF16: packed uint16 values; Q8_0: packed int8 quants.
  const void* data = nullptr;
  // Q8_0 only: the packed scales, one per row and block of kQ8BlockSize columns.
  const float* scales = nullptr;

  WeightMatrix() = default;
  WeightMatrix(WeightType type_, const void* data_, const float* scales_)
      : type(type_), data(data_), scales(scales_) {}

  const float* f32_rows(std::size_t first_row, std::size_t cols) const {
    return static_cast<const float*>(data) + first_row * cols;
  }
  const uint16_t* bf16_rows(std::size_t first_row, std::size_t cols) const {
    return static_cast<const uint16_t*>(data) + first_row * bf16_packed_cols(cols);
  }
  const int8_t* q8_rows(std::size_t first_row, std::size_t cols) const {
    return static_cast<const int8_t*>(data) + first_row * cols;
  }
  const float* q8_scales(std::size_t first_row, std::size_t cols) const {
    return scales + first_row * (cols / kQ8BlockSize);
  }
};

}  // namespace aft::kernels
