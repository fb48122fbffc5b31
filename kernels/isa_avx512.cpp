// The avx512 kernel table: the generic SIMD kernels instantiated for xsimd::avx512f, with one bf16
// vector reading ahead on Intel's cores.
// Compiled with -mavx512f -mavx512dq -mavx512bw -mfma (see CMakeLists.txt); holds no inline
// non-template code.
#include "kernels/isa_tables.h"
#include "kernels/simd_table.hpp"

#if !XSIMD_WITH_AVX512F || !XSIMD_WITH_AVX512BW
#error "isa_avx512.cpp must be compiled with -mavx512f -mavx512dq -mavx512bw -mfma"
#endif

namespace aft::kernels {

const KernelTable& avx512_kernels() {
  static const KernelTable kTable = [] {
    KernelTable table = simd::make_table<xsimd::avx512f>("avx512");
    // One vector of bf16 weights asks L1 for its lines ahead on Intel's cores (group_gemv.hpp's
    // kReadAheadLines): on an Emerald Rapids the RWKV-4 430M shape in bf16 (weights from memory)
    // then decoded 1.10-1.14x faster at 1 thread (86-89% of the read against 73-79%), enwik8 in
    // bf16 (from L3) 1.1-2x. Not measured on AMD's cores, where a prefetch for one q8_0 vector had
    // cost a Zen 4 (docs/benchmarks.md).
    using A = xsimd::avx512f;
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) {
      table.gemv_bf16 = &simd::gemv_groups<A, simd::Bf16Columns<A>, true>;
      table.gemv_bf16_bf16 = &simd::gemv_groups<A, simd::Bf16PairColumns<A>, true>;
    }
    return table;
  }();
  return kTable;
}

}  // namespace aft::kernels
