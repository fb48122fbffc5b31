// The sse2 kernel table: the generic SIMD kernels instantiated for xsimd::sse2.
// Compiled for the x86-64 baseline, with -mno-avx (see CMakeLists.txt); holds no inline
// non-template code.
#include "kernels/isa_tables.h"
#include "kernels/simd_table.hpp"

#if !XSIMD_WITH_SSE2
#error "isa_sse2.cpp is for x86-64 targets"
#endif

namespace aft::kernels {

const KernelTable& sse2_kernels() {
  static constexpr KernelTable kTable = simd::make_table<xsimd::sse2>("sse2");
  return kTable;
}

}  // namespace aft::kernels
