// Tails for the generic SIMD kernels: xsimd 8.1 has no masked loads, so a partial batch goes
// through a padded buffer. Templates on the architecture only: an ISA translation unit must not
// emit inline non-template functions (the linker could keep one ISA's copy for all).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

// Lanes [0, count) from p, the others set to fill (a value that keeps the padding lanes harmless).
template <class A>
xsimd::batch<float, A> load_partial(const float* p, std::size_t count, float fill) {
  using B = xsimd::batch<float, A>;
  alignas(A::alignment()) float buf[B::size];
  for (std::size_t i = 0; i < B::size; ++i) buf[i] = i < count ? p[i] : fill;
  return B::load_aligned(buf);
}

// Writes lanes [0, count) of v to p.
template <class A>
void store_partial(const xsimd::batch<float, A>& v, float* p, std::size_t count) {
  alignas(A::alignment()) float buf[xsimd::batch<float, A>::size];
  v.store_aligned(buf);
  for (std::size_t i = 0; i < count; ++i) p[i] = buf[i];
}

// Lanes [0, count) of a batch that may be full (count == size: a plain load or store) or a tail.
template <class A>
xsimd::batch<float, A> load_lanes(const float* p, std::size_t count, float fill) {
  using B = xsimd::batch<float, A>;
  return count == B::size ? B::load_unaligned(p) : load_partial<A>(p, count, fill);
}

template <class A>
void store_lanes(const xsimd::batch<float, A>& v, float* p, std::size_t count) {
  if (count == xsimd::batch<float, A>::size) {
    v.store_unaligned(p);
  } else {
    store_partial<A>(v, p, count);
  }
}

// True in lanes [0, count).
template <class A>
xsimd::batch_bool<float, A> first_lanes(std::size_t count) {
  using B = xsimd::batch<float, A>;
  alignas(A::alignment()) float buf[B::size];
  for (std::size_t i = 0; i < B::size; ++i) buf[i] = i < count ? 1.0f : 0.0f;
  return B::load_aligned(buf) != B(0.0f);
}

}  // namespace aft::kernels::simd
