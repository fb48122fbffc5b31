// The avx2 kernel table: the generic SIMD kernels instantiated for xsimd::fma3<xsimd::avx2>.
// Compiled with -mavx2 -mfma (see CMakeLists.txt); holds no inline non-template code.
#include "kernels/isa_tables.h"
#include "kernels/simd_table.hpp"

#if !XSIMD_WITH_FMA3_AVX2
#error "isa_avx2.cpp must be compiled with -mavx2 -mfma"
#endif

namespace aft::kernels {

const KernelTable& avx2_kernels() {
  static constexpr KernelTable kTable = simd::make_table<xsimd::fma3<xsimd::avx2>>("avx2");
  return kTable;
}

}  // namespace aft::kernels
