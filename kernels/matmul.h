// Matrix products for prefill, through oneDNN: y[M, N] = post(x[M, K] W^T + bias), W in PyTorch's
// nn.Linear layout [N, K] row-major, read in place (not copied). M is chosen per call.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace aft::kernels {

enum class PostOp { None, Relu, Gelu };

class Matmul {
 public:
  // w and bias (bias may be null) must outlive the Matmul.
  Matmul(std::size_t k, std::size_t n, const float* w, const float* bias, PostOp post);
  ~Matmul();
  Matmul(Matmul&&) noexcept;
  Matmul& operator=(Matmul&&) noexcept;

  // Thread-safe; call from serial code (oneDNN runs its own OpenMP threads, as many as
  // omp_get_max_threads() of the calling thread).
  void run(std::size_t m, const float* x, float* y) const;

  // oneDNN's implementation names, for diagnostics: small M runs one primitive, larger M another,
  // e.g. "gemm:jit (M <= 8), brg:avx512_core (M > 8)". Starts with "ref" if either is the slow
  // reference fallback.
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aft::kernels
