// Tails for the generic SIMD kernels: xsimd 8.1 has no masked loads, so a partial batch goes
// through a padded buffer. Templates on the architecture only: an ISA translation unit must not
// emit inline non-template functions (the linker could keep one ISA's copy for all).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

// T as a parameter type that takes no part in deduction: load_partial<A>(p, n, 0.0f) deduces T
// from p alone.
template <class T>
struct Same {
  using type = T;
};

// Lanes [0, count) from p, the others set to fill (a value that keeps the padding lanes harmless).
template <class A, class T>
xsimd::batch<T, A> load_partial(const T* p, std::size_t count, typename Same<T>::type fill) {
  using B = xsimd::batch<T, A>;
  alignas(A::alignment()) T buf[B::size];
  for (std::size_t i = 0; i < B::size; ++i) buf[i] = i < count ? p[i] : fill;
  return B::load_aligned(buf);
}

// Writes lanes [0, count) of v to p.
template <class A, class T>
void store_partial(const xsimd::batch<T, A>& v, T* p, std::size_t count) {
  alignas(A::alignment()) T buf[xsimd::batch<T, A>::size];
  v.store_aligned(buf);
  for (std::size_t i = 0; i < count; ++i) p[i] = buf[i];
}

// Lanes [0, count) of a batch that may be full (count == size: a plain load or store) or a tail.
template <class A, class T>
xsimd::batch<T, A> load_lanes(const T* p, std::size_t count, typename Same<T>::type fill) {
  using B = xsimd::batch<T, A>;
  return count == B::size ? B::load_unaligned(p) : load_partial<A>(p, count, fill);
}

template <class A, class T>
void store_lanes(const xsimd::batch<T, A>& v, T* p, std::size_t count) {
  if (count == xsimd::batch<T, A>::size) {
    v.store_unaligned(p);
  } else {
    store_partial<A>(v, p, count);
  }
}

// GCC's vector type of L lanes of T, for __builtin_convertvector. GCC ignores vector_size with a
// dependent size: one specialization per lane type and count.
template <class T, std::size_t L>
struct GccVector;
#define AFT_GCC_VECTOR(T, L)                                    \
  template <>                                                   \
  struct GccVector<T, L> {                                      \
    typedef T type __attribute__((vector_size(sizeof(T) * L))); \
  }
AFT_GCC_VECTOR(float, 2);
AFT_GCC_VECTOR(float, 4);
AFT_GCC_VECTOR(float, 8);
AFT_GCC_VECTOR(float, 16);
AFT_GCC_VECTOR(double, 2);
AFT_GCC_VECTOR(double, 4);
AFT_GCC_VECTOR(double, 8);
AFT_GCC_VECTOR(double, 16);
AFT_GCC_VECTOR(uint16_t, 4);
AFT_GCC_VECTOR(uint16_t, 8);
AFT_GCC_VECTOR(uint16_t, 16);
AFT_GCC_VECTOR(uint32_t, 4);
AFT_GCC_VECTOR(uint32_t, 8);
AFT_GCC_VECTOR(uint32_t, 16);
#undef AFT_GCC_VECTOR

// Values of one lane type converted to a batch of another: floats widened to double lanes, doubles
// narrowed to float lanes (rounded to nearest). xsimd 8.1 has no such conversion (its converting
// loads go element by element through a buffer, and a vector load of scalar stores stalls on
// store forwarding: the accumulator ran at a third of its speed); a whole batch goes through GCC's
// (and Clang's) vector conversion, a tail through a padded buffer.
template <class A, class To, class From>
xsimd::batch<To, A> load_converted(const From* p, std::size_t count, To fill) {
  constexpr std::size_t L = xsimd::batch<To, A>::size;
  using Source = typename GccVector<From, L>::type;
  using Target = typename GccVector<To, L>::type;
  alignas(A::alignment()) Target buf;
  if (count == L) {
    Source values;
    std::memcpy(&values, p, sizeof(values));
    buf = __builtin_convertvector(values, Target);
  } else {
    for (std::size_t i = 0; i < L; ++i) buf[i] = i < count ? static_cast<To>(p[i]) : fill;
  }
  return xsimd::batch<To, A>::load_aligned(reinterpret_cast<const To*>(&buf));
}

template <class A>
xsimd::batch<double, A> load_widened(const float* p, std::size_t count, double fill) {
  return load_converted<A, double>(p, count, fill);
}

// The AFT sums, float64, where the read-out takes them in float32.
template <class A>
xsimd::batch<float, A> load_narrowed(const double* p, std::size_t count, float fill) {
  return load_converted<A, float>(p, count, fill);
}

template <class A>
void store_narrowed(const xsimd::batch<double, A>& v, float* p, std::size_t count) {
  constexpr std::size_t L = xsimd::batch<double, A>::size;
  using Floats = typename GccVector<float, L>::type;
  using Doubles = typename GccVector<double, L>::type;
  alignas(A::alignment()) Doubles buf;
  v.store_aligned(reinterpret_cast<double*>(&buf));
  const Floats f = __builtin_convertvector(buf, Floats);
  if (count == L) {
    std::memcpy(p, &f, sizeof(f));
  } else {
    for (std::size_t i = 0; i < count; ++i) p[i] = f[i];
  }
}

// The low 16 bits of each lane, a whole batch (xsimd 8.1 has no narrowing): one instruction or two
// on AVX-512 and NEON, a few packs elsewhere.
template <class A>
void store_low_halves(const xsimd::batch<uint32_t, A>& v, uint16_t* p) {
  constexpr std::size_t L = xsimd::batch<uint32_t, A>::size;
  typename GccVector<uint32_t, L>::type wide;
  std::memcpy(&wide, &v.data, sizeof(wide));
  const auto narrow = __builtin_convertvector(wide, typename GccVector<uint16_t, L>::type);
  std::memcpy(p, &narrow, sizeof(narrow));
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
