// Matrix products of two activations, shaped per call, on the calling thread only.
//
// For ops that split a product into blocks of fixed shape themselves and run each block on one
// thread (as Matmul does, matmul.h): a block's result then never depends on the number of threads.
// oneDNN's own threading is never used, because its split of one product over threads is not
// deterministic (e.g. its AVX2 gemm).
#pragma once

#include <cstddef>

namespace aft::kernels {

// c[m, n] = a[m, k] b[k, n]: row-major, rows lda, ldb, ldc floats apart (at least k, n and n).
// Safe to call from several threads at once, inside or outside a parallel region. Throws
// std::runtime_error if oneDNN fails (e.g. a dimension too large for it).
void gemm_f32_single_thread(std::size_t m, std::size_t n, std::size_t k, const float* a,
                            std::size_t lda, const float* b, std::size_t ldb, float* c,
                            std::size_t ldc);

}  // namespace aft::kernels
