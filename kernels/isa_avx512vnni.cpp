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
    // One vector asks for the next pass's weights on Intel's cores. On an Emerald Rapids the RWKV-4
    // 430M shape in q8_0 (weights from memory) then decoded 1.10-1.24x faster at 1 thread and
    // 1.16-1.35x at 2, enwik8 (from L3) level; on a Zen 4 the prefetch had cost enwik8-local a
    // quarter of its speed (docs/benchmarks.md).
    using A = xsimd::avx512bw;
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) {
      table.gemv_q8_0 = &simd::gemv_q8_0<A, true>;
      table.gemv_batch_q8_0 = &simd::gemv_batch_q8_0<A, true>;
    } else {
      table.gemv_q8_0 = &simd::gemv_q8_0<A>;
      table.gemv_batch_q8_0 = &simd::gemv_batch_q8_0<A>;
    }
    return table;
  }();
  return kTable;
}

}  // namespace aft::kernels
