// The FMA-peak probe of aft-bench: twelve independent batches of chains x = fma(x, a, b) held in
// registers. Twelve covers the FMA latency times the number of FMA units of current x86 and ARM
// cores (4-5 cycles x 2 units), and leaves registers free for a and b even with 16 of them (AVX2).
// The chains are defined in kernels.h (KernelTable::fma_probe_f32), independent of the ISA.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"

namespace aft::kernels::simd {

template <class A>
std::size_t fma_probe_f32(std::size_t iterations, float* sink) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  constexpr std::size_t kBatches = 12;
  static_assert(kBatches * L <= kFmaProbeMaxChains, "sink too small for this ISA");

  alignas(A::alignment()) float start[kBatches * L];
  // Chain c starts at 1 + (c + 1) / 1024 (kernels.h); written out here, not as a shared inline
  // helper, which an ISA file must not emit (kernels/README.md).
  for (std::size_t c = 0; c < kBatches * L; ++c)
    start[c] = 1.0f + static_cast<float>(c + 1) / 1024.0f;
  B x0 = B::load_aligned(start), x1 = B::load_aligned(start + L),
    x2 = B::load_aligned(start + 2 * L), x3 = B::load_aligned(start + 3 * L),
    x4 = B::load_aligned(start + 4 * L), x5 = B::load_aligned(start + 5 * L),
    x6 = B::load_aligned(start + 6 * L), x7 = B::load_aligned(start + 7 * L),
    x8 = B::load_aligned(start + 8 * L), x9 = B::load_aligned(start + 9 * L),
    x10 = B::load_aligned(start + 10 * L), x11 = B::load_aligned(start + 11 * L);
  const B a(kFmaProbeMultiplier), b(kFmaProbeAddend);
  for (std::size_t i = 0; i < iterations; ++i) {
    x0 = xsimd::fma(x0, a, b);
    x1 = xsimd::fma(x1, a, b);
    x2 = xsimd::fma(x2, a, b);
    x3 = xsimd::fma(x3, a, b);
    x4 = xsimd::fma(x4, a, b);
    x5 = xsimd::fma(x5, a, b);
    x6 = xsimd::fma(x6, a, b);
    x7 = xsimd::fma(x7, a, b);
    x8 = xsimd::fma(x8, a, b);
    x9 = xsimd::fma(x9, a, b);
    x10 = xsimd::fma(x10, a, b);
    x11 = xsimd::fma(x11, a, b);
  }
  x0.store_unaligned(sink);
  x1.store_unaligned(sink + L);
  x2.store_unaligned(sink + 2 * L);
  x3.store_unaligned(sink + 3 * L);
  x4.store_unaligned(sink + 4 * L);
  x5.store_unaligned(sink + 5 * L);
  x6.store_unaligned(sink + 6 * L);
  x7.store_unaligned(sink + 7 * L);
  x8.store_unaligned(sink + 8 * L);
  x9.store_unaligned(sink + 9 * L);
  x10.store_unaligned(sink + 10 * L);
  x11.store_unaligned(sink + 11 * L);
  return 2 * kBatches * L * iterations;
}

}  // namespace aft::kernels::simd
