// The avx512 kernel table: the generic SIMD kernels instantiated for xsimd::avx512f.
// Compiled with -mavx512f -mavx512dq -mavx512bw -mfma (see CMakeLists.txt); holds no inline
// non-template code.
#include "kernels/isa_tables.h"
#include "kernels/simd_table.hpp"

#if !XSIMD_WITH_AVX512F || !XSIMD_WITH_AVX512BW
#error "isa_avx512.cpp must be compiled with -mavx512f -mavx512dq -mavx512bw -mfma"
#endif

namespace aft::kernels {

const KernelTable& avx512_kernels() {
  static constexpr KernelTable kTable = simd::make_table<xsimd::avx512f>("avx512");
  return kTable;
}

}  // namespace aft::kernels
