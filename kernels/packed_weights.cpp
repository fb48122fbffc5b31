#include "kernels/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/bf16.h"
#include "kernels/thread_team.h"

namespace aft::kernels {
namespace {

constexpr std::size_t kAlignment = 64;

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Group g of each layout: its rows (zeros past `rows`), packed.
void pack_q8_0_group(std::size_t g, std::size_t rows, std::size_t cols, const int8_t* wq,
                     const float* wd, int8_t* pq, float* pd) {
  const std::size_t blocks = cols / kQ8BlockSize;
  for (std::size_t r = g * kQ8GroupRows; r < (g + 1) * kQ8GroupRows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      pq[q8_0_packed_quant(r, c, cols)] = r < rows ? wq[r * cols + c] : 0;
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      pd[q8_0_packed_scale(r, b, cols)] = r < rows ? wd[r * blocks + b] : 0.0f;
    }
  }
}

void pack_bf16_group(std::size_t g, std::size_t rows, std::size_t cols, const uint16_t* w,
                     uint16_t* p) {
  const std::size_t group_values = kBf16GroupRows * bf16_packed_cols(cols);
  std::fill(p + g * group_values, p + (g + 1) * group_values, uint16_t{0});
  for (std::size_t r = g * kBf16GroupRows; r < std::min(rows, (g + 1) * kBf16GroupRows); ++r) {
    for (std::size_t c = 0; c < cols; ++c) p[bf16_packed_index(r, c, cols)] = w[r * cols + c];
  }
}

// Each row's values read in order and written 16 apart.
void pack_f32_group(std::size_t g, std::size_t rows, std::size_t cols, const float* w, float* p) {
  float* group = p + g * kF32GroupRows * cols;
  for (std::size_t i = 0; i < kF32GroupRows; ++i) {
    const std::size_t r = g * kF32GroupRows + i;
    const float* row = r < rows ? w + r * cols : nullptr;
    for (std::size_t c = 0; c < cols; ++c) group[c * kF32GroupRows + i] = row ? row[c] : 0.0f;
  }
}

}  // namespace

void pack_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd, int8_t* pq,
               float* pd) {
  for (std::size_t g = 0; g < q8_0_packed_rows(rows) / kQ8GroupRows; ++g) {
    pack_q8_0_group(g, rows, cols, wq, wd, pq, pd);
  }
}

void pack_bf16(std::size_t rows, std::size_t cols, const uint16_t* w, uint16_t* p) {
  for (std::size_t g = 0; g < bf16_packed_groups(rows); ++g) pack_bf16_group(g, rows, cols, w, p);
}

void pack_f32(std::size_t rows, std::size_t cols, const float* w, float* p) {
  for (std::size_t g = 0; g < f32_packed_rows(rows) / kF32GroupRows; ++g) {
    pack_f32_group(g, rows, cols, w, p);
  }
}

void unpack_f32_columns(std::size_t first, std::size_t rows, std::size_t cols, const float* p,
                        float* x) {
  // Row c of x at a time, written in order from the groups' columns c.
  const float* groups = p + f32_packed_index(first, 0, cols);
  const std::size_t whole = rows / kF32GroupRows * kF32GroupRows;
  for (std::size_t c = 0; c < cols; ++c, x += rows) {
    for (std::size_t i = 0; i < whole; i += kF32GroupRows) {
      std::memcpy(x + i, groups + (i * cols + c * kF32GroupRows), kF32GroupRows * sizeof(float));
    }
    if (whole < rows) {
      std::memcpy(x + whole, groups + (whole * cols + c * kF32GroupRows),
                  (rows - whole) * sizeof(float));
    }
  }
}

void unpack_f32_rounded_to_bf16(std::size_t rows, std::size_t cols, const float* p, uint16_t* w) {
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      w[r * cols + c] = f32_to_bf16(p[f32_packed_index(r, c, cols)]);
    }
  }
}

void unpack_bf16_columns(std::size_t first, std::size_t rows, std::size_t cols, const uint16_t* p,
                         float* x) {
  // Rows 2p and 2p + 1 of x at a time, from the groups' lines of pair p.
  const uint16_t* groups = p + bf16_packed_index(first, 0, cols);
  const std::size_t group_values = kBf16GroupRows * bf16_packed_cols(cols);
  for (std::size_t c = 0; c < cols; c += 2) {
    float* even = x + c * rows;
    float* odd = c + 1 < cols ? even + rows : nullptr;
    for (std::size_t i = 0; i < rows; i += kBf16GroupRows) {
      const uint16_t* line = groups + i / kBf16GroupRows * group_values + c * kBf16GroupRows;
      const std::size_t n = std::min(kBf16GroupRows, rows - i);
      for (std::size_t l = 0; l < n; ++l) even[i + l] = bf16_to_float(line[2 * l]);
      if (odd) {
        for (std::size_t l = 0; l < n; ++l) odd[i + l] = bf16_to_float(line[2 * l + 1]);
      }
    }
  }
}

PackedWeights::PackedWeights(std::size_t bytes, int threads)
    : memory_(bytes), threads_(std::max(threads, 1)) {}

std::size_t PackedWeights::q8_0_bytes(std::size_t rows, std::size_t cols) {
  const std::size_t values = q8_0_packed_rows(rows) * cols;
  return round_up(values, kAlignment) + round_up(values / kQ8BlockSize * sizeof(float), kAlignment);
}

std::size_t PackedWeights::bf16_bytes(std::size_t rows, std::size_t cols) {
  return round_up(bf16_packed_size(rows, cols) * sizeof(uint16_t), kAlignment);
}

std::size_t PackedWeights::f32_bytes(std::size_t rows, std::size_t cols) {
  return round_up(f32_packed_rows(rows) * cols * sizeof(float), kAlignment);
}

template <class T>
T* PackedWeights::take(std::size_t count) {
  const std::size_t bytes = round_up(count * sizeof(T), kAlignment);
  if (bytes > memory_.size() - used_) {
    throw std::length_error("packed weights: more than the room reserved");
  }
  T* p = reinterpret_cast<T*>(memory_.data() + used_);
  used_ += bytes;
  return p;
}

WeightMatrix PackedWeights::add_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq,
                                     const float* wd) {
  const std::size_t values = q8_0_packed_rows(rows) * cols;
  auto* quants = take<int8_t>(values);
  auto* scales = take<float>(values / kQ8BlockSize);
  parallel_parts(q8_0_packed_rows(rows) / kQ8GroupRows, threads_,
                 [&](std::size_t g) { pack_q8_0_group(g, rows, cols, wq, wd, quants, scales); });
  return {WeightType::Q8_0, quants, scales};
}

WeightMatrix PackedWeights::add_bf16(std::size_t rows, std::size_t cols, const uint16_t* w) {
  auto* values = take<uint16_t>(bf16_packed_size(rows, cols));
  parallel_parts(bf16_packed_groups(rows), threads_,
                 [&](std::size_t g) { pack_bf16_group(g, rows, cols, w, values); });
  return {WeightType::BF16, values, nullptr};
}

WeightMatrix PackedWeights::add_f32(std::size_t rows, std::size_t cols, const float* w) {
  auto* values = take<float>(f32_packed_rows(rows) * cols);
  parallel_parts(f32_packed_rows(rows) / kF32GroupRows, threads_,
                 [&](std::size_t g) { pack_f32_group(g, rows, cols, w, values); });
  return {WeightType::F32, values, nullptr};
}

}  // namespace aft::kernels
