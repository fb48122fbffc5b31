// bf16 (the upper 16 bits of an IEEE binary32) from float, for the tools that write bf16 weights,
// for tests, and for the activations of bf16 products on matrix units (matmul.cpp); the SIMD
// kernels round with their own template (KernelTable::round_bf16).
#pragma once

#include <cstdint>
#include <cstring>

namespace aft::kernels {

// Rounds to nearest, ties to even, on the 16 dropped bits (overflow gives infinity, as IEEE
// rounding does); a NaN stays a (quiet) NaN instead of rounding into infinity.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The float a bf16 stands for (exact: its bits shifted up). For scalar code only: the SIMD kernels
// keep their own template (kernels/README.md, why ISA files share no inline functions).
inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace aft::kernels
