// The neon kernel table: the generic SIMD kernels instantiated for xsimd::neon64.
// Built for aarch64 targets only, where NEON is baseline (see CMakeLists.txt); holds no inline
// non-template code.
#include "kernels/isa_tables.h"
#include "kernels/simd_table.hpp"

#if !XSIMD_WITH_NEON64
#error "isa_neon.cpp is for aarch64 targets"
#endif

namespace aft::kernels {

const KernelTable& neon_kernels() {
  static constexpr KernelTable kTable = simd::make_table<xsimd::neon64>("neon");
  return kTable;
}

}  // namespace aft::kernels
