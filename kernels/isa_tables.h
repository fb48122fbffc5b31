// The per-ISA tables, each defined in its own isa_*.cpp (built only for the matching target).
// Calling one on a CPU without that ISA is an illegal instruction: go through dispatch.cpp.
#pragma once

#include "kernels/kernels.h"

namespace aft::kernels {

const KernelTable& avx512amx_kernels();
const KernelTable& avx512bf16_kernels();
const KernelTable& avx512vnni_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx2_kernels();
const KernelTable& sse2_kernels();
const KernelTable& neondot_kernels();
const KernelTable& neon_kernels();

#if defined(__x86_64__)
// The avx512amx table's gemv_batch_q8_0, gemv_batch_bf16_bf16 and gemv_prompt_q8_0_bf16 with AMX's
// tile instructions
// emulated (emulated_tiles.h): the tile kernels' tests on CPUs without AMX. Need the CPU of the
// avx512bf16 table and AVX512CD.
void gemv_batch_q8_0_emulated_tiles(std::size_t rows, std::size_t cols, const int8_t* wq,
                                    const float* wd, std::size_t n_vectors, const int8_t* xq,
                                    const float* xd, const float* bias, float* y,
                                    std::size_t y_stride);
void gemv_batch_bf16_bf16_emulated_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                                         std::size_t n_vectors, const uint16_t* xb,
                                         std::size_t x_stride, const float* bias, float* y,
                                         std::size_t y_stride);
void gemv_prompt_q8_0_bf16_emulated_tiles(std::size_t rows, std::size_t cols, const int8_t* wq,
                                          const float* wd, std::size_t n_vectors,
                                          const uint16_t* xb, std::size_t x_stride,
                                          const float* bias, float* y, std::size_t y_stride);
#endif

}  // namespace aft::kernels
