// The neondot kernel table: the neon table with the q8_0 GEMVs on sdot (armv8.2's dot product
// extension). Those are instantiated for xsimd::neon, an architecture no other table uses on
// aarch64, so that this file's dotprod code cannot be merged into the neon table's (see
// README.md); the other entries are the neon table's own, copied at run time.
// Compiled with -march=armv8.2-a+dotprod (see CMakeLists.txt).
#include "kernels/isa_tables.h"
#include "kernels/q8_0.hpp"

#if !XSIMD_WITH_NEON64 || !defined(__ARM_FEATURE_DOTPROD)
#error "isa_neondot.cpp must be compiled for aarch64 with +dotprod"
#endif

namespace aft::kernels {

const KernelTable& neondot_kernels() {
  static const KernelTable kTable = [] {
    KernelTable table = neon_kernels();
    table.isa = "neondot";
    table.gemv_q8_0 = &simd::gemv_q8_0<xsimd::neon>;
    table.gemv_batch_q8_0 = &simd::gemv_batch_q8_0<xsimd::neon>;
    return table;
  }();
  return kTable;
}

}  // namespace aft::kernels
