// The avx512vnni kernel table: the avx512 table with the q8_0 GEMVs on vpdpbusd. Those are
// instantiated for xsimd::avx512bw, an architecture no other table uses, so that this file's
// -mavx512vnni code cannot be merged into the avx512 table's (see README.md); the other entries
// are the avx512 table's own, copied at run time.
// Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vnni -mfma (see CMakeLists.txt).
#include "kernels/isa_tables.h"
#include "kernels/q8_0.hpp"

#if !XSIMD_WITH_AVX512BW || !defined(__AVX512VNNI__)
#error "isa_avx512vnni.cpp must be compiled with -mavx512bw -mavx512vnni"
#endif

namespace aft::kernels {

const KernelTable& avx512vnni_kernels() {
  static const KernelTable kTable = [] {
    KernelTable table = avx512_kernels();
    table.isa = "avx512vnni";
    table.gemv_q8_0 = &simd::gemv_q8_0<xsimd::avx512bw>;
    table.gemv_batch_q8_0 = &simd::gemv_batch_q8_0<xsimd::avx512bw>;
    return table;
  }();
  return kTable;
}

}  // namespace aft::kernels
