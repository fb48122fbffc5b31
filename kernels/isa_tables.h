// The per-ISA tables, each defined in its own isa_*.cpp (built only for the matching target).
// Calling one on a CPU without that ISA is an illegal instruction: go through dispatch.cpp.
#pragma once

#include "kernels/kernels.h"

namespace aft::kernels {

const KernelTable& avx512bf16_kernels();
const KernelTable& avx512vnni_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx2_kernels();
const KernelTable& sse2_kernels();
const KernelTable& neon_kernels();

}  // namespace aft::kernels
