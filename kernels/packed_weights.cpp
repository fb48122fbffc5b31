#include "kernels/packed_weights.h"

#include <algorithm>
#include <new>

namespace aft::kernels {
namespace {

constexpr std::size_t kAlignment = 64;

template <class T>
T* allocate_aligned(std::size_t count) {
  const std::size_t bytes = std::max<std::size_t>(
      kAlignment, (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<T*>(p);
}

}  // namespace

void pack_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd, int8_t* pq,
               float* pd) {
  const std::size_t blocks = cols / kQ8BlockSize;
  for (std::size_t r = 0; r < q8_0_packed_rows(rows); ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      pq[q8_0_packed_quant(r, c, cols)] = r < rows ? wq[r * cols + c] : 0;
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      pd[q8_0_packed_scale(r, b, cols)] = r < rows ? wd[r * blocks + b] : 0.0f;
    }
  }
}

void pack_bf16(std::size_t rows, std::size_t cols, const uint16_t* w, uint16_t* p) {
  std::fill(p, p + bf16_packed_size(rows, cols), uint16_t{0});
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) p[bf16_packed_index(r, c, cols)] = w[r * cols + c];
  }
}

PackedWeights PackedWeights::q8_0(std::size_t rows, std::size_t cols, const int8_t* wq,
                                  const float* wd) {
  PackedWeights packed;
  auto* quants = allocate_aligned<int8_t>(q8_0_packed_rows(rows) * cols);
  packed.values_.reset(quants);
  packed.scales_.reset(allocate_aligned<float>(q8_0_packed_rows(rows) * cols / kQ8BlockSize));
  pack_q8_0(rows, cols, wq, wd, quants, packed.scales_.get());
  packed.matrix_ = {WeightType::Q8_0, quants, packed.scales_.get()};
  return packed;
}

PackedWeights PackedWeights::bf16(std::size_t rows, std::size_t cols, const uint16_t* w) {
  PackedWeights packed;
  auto* values = allocate_aligned<uint16_t>(bf16_packed_size(rows, cols));
  packed.values_.reset(values);
  pack_bf16(rows, cols, w, values);
  packed.matrix_ = {WeightType::BF16, values, nullptr};
  return packed;
}

}  // namespace aft::kernels
