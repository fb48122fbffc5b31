// y[r] = dot(w[r, :], x) + bias[r]: four rows at a time share each load of x, two column batches
// per step give eight independent FMA chains (enough to hide FMA latency). Single-threaded.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

template <class A>
void gemv_f32(std::size_t rows, std::size_t cols, const float* w, const float* x, const float* bias,
              float* y) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const std::size_t cols2 = cols - cols % (2 * L);
  const std::size_t cols1 = cols - cols % L;
  std::size_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* w0 = w + r * cols;
    const float* w1 = w0 + cols;
    const float* w2 = w1 + cols;
    const float* w3 = w2 + cols;
    B s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f), t0(0.0f), t1(0.0f), t2(0.0f), t3(0.0f);
    std::size_t c = 0;
    for (; c < cols2; c += 2 * L) {
      const B xa = B::load_unaligned(x + c);
      const B xb = B::load_unaligned(x + c + L);
      s0 = xsimd::fma(B::load_unaligned(w0 + c), xa, s0);
      s1 = xsimd::fma(B::load_unaligned(w1 + c), xa, s1);
      s2 = xsimd::fma(B::load_unaligned(w2 + c), xa, s2);
      s3 = xsimd::fma(B::load_unaligned(w3 + c), xa, s3);
      t0 = xsimd::fma(B::load_unaligned(w0 + c + L), xb, t0);
      t1 = xsimd::fma(B::load_unaligned(w1 + c + L), xb, t1);
      t2 = xsimd::fma(B::load_unaligned(w2 + c + L), xb, t2);
      t3 = xsimd::fma(B::load_unaligned(w3 + c + L), xb, t3);
    }
    for (; c < cols1; c += L) {
      const B xa = B::load_unaligned(x + c);
      s0 = xsimd::fma(B::load_unaligned(w0 + c), xa, s0);
      s1 = xsimd::fma(B::load_unaligned(w1 + c), xa, s1);
      s2 = xsimd::fma(B::load_unaligned(w2 + c), xa, s2);
      s3 = xsimd::fma(B::load_unaligned(w3 + c), xa, s3);
    }
    float d0 = xsimd::hadd(s0 + t0);
    float d1 = xsimd::hadd(s1 + t1);
    float d2 = xsimd::hadd(s2 + t2);
    float d3 = xsimd::hadd(s3 + t3);
    for (; c < cols; ++c) {
      d0 += w0[c] * x[c];
      d1 += w1[c] * x[c];
      d2 += w2[c] * x[c];
      d3 += w3[c] * x[c];
    }
    if (bias) {
      d0 += bias[r];
      d1 += bias[r + 1];
      d2 += bias[r + 2];
      d3 += bias[r + 3];
    }
    y[r] = d0;
    y[r + 1] = d1;
    y[r + 2] = d2;
    y[r + 3] = d3;
  }
  for (; r < rows; ++r) {
    const float* w0 = w + r * cols;
    B s0(0.0f), t0(0.0f);
    std::size_t c = 0;
    for (; c < cols2; c += 2 * L) {
      s0 = xsimd::fma(B::load_unaligned(w0 + c), B::load_unaligned(x + c), s0);
      t0 = xsimd::fma(B::load_unaligned(w0 + c + L), B::load_unaligned(x + c + L), t0);
    }
    for (; c < cols1; c += L) {
      s0 = xsimd::fma(B::load_unaligned(w0 + c), B::load_unaligned(x + c), s0);
    }
    float d0 = xsimd::hadd(s0 + t0);
    for (; c < cols; ++c) d0 += w0[c] * x[c];
    y[r] = bias ? d0 + bias[r] : d0;
  }
}

}  // namespace aft::kernels::simd
