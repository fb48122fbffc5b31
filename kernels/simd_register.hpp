// Pinning a value to a vector register where GCC would otherwise fold its load into every
// instruction that uses it (a load per use). A template on the architecture, like every function
// of the ISA files (README.md).
#pragma once

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

// Keeps v in a vector register at this point: an empty asm that takes and gives it there.
template <class T, class A>
[[gnu::always_inline]] inline void keep_in_register(xsimd::batch<T, A>& v) {
#if defined(__aarch64__)
  asm("" : "+w"(v.data));
#else
  asm("" : "+x"(v.data));
#endif
}

}  // namespace aft::kernels::simd
