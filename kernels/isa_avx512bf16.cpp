// The avx512bf16 kernel table: the avx512vnni table with the bf16 x bf16 GEMVs on vdpbf16ps, and
// activations rounded to bf16 by vcvtne2ps2bf16.
// Those are instantiated for xsimd::avx512dq, an architecture no other table uses, so that this
// file's -mavx512bf16 code cannot be merged into another table's (see README.md); the other
// entries are the avx512vnni table's own, copied at run time.
// Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vnni -mavx512bf16 -mfma (see
// CMakeLists.txt).
#include "kernels/bf16_gemv.hpp"
#include "kernels/isa_tables.h"

#if !XSIMD_WITH_AVX512DQ || !defined(__AVX512BF16__)
#error "isa_avx512bf16.cpp must be compiled with -mavx512dq -mavx512bf16"
#endif

namespace aft::kernels {

const KernelTable& avx512bf16_kernels() {
  static const KernelTable kTable = [] {
    KernelTable table = avx512vnni_kernels();
    table.isa = "avx512bf16";
    using Pairs = simd::Bf16PairColumns<xsimd::avx512dq>;
    // One vector asks L1 for its lines ahead on Intel's cores, as the avx512 table's bf16 GEMVs do.
    __builtin_cpu_init();
    table.gemv_bf16_bf16 = __builtin_cpu_is("intel")
                               ? &simd::gemv_groups<xsimd::avx512dq, Pairs, true>
                               : &simd::gemv_groups<xsimd::avx512dq, Pairs>;
    table.gemv_batch_bf16_bf16 = &simd::gemv_batch_groups<xsimd::avx512dq, Pairs>;
    table.round_bf16 = &simd::round_bf16<xsimd::avx512dq>;
    return table;
  }();
  return kTable;
}

}  // namespace aft::kernels
