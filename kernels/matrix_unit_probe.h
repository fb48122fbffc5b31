// The peak of the CPU's low-precision matrix products as oneDNN drives them, for aft-bench's limits
// beside the FMA peak: bf16 x bf16 -> f32 on the matrix units (matrix_units(): AMX or AVX512-BF16),
// and u8 x s8 -> s32 (AMX int8, AVX-512 VNNI, or what oneDNN has below them). Each thread runs its
// own single-threaded product of a prompt's shape (M = 512, K = N = 1024) with the weights in
// oneDNN's packed layout, as the engine's blocks run: what the units give a prefill at most.
#pragma once

#include <memory>
#include <string>

namespace aft::kernels {

enum class UnitProduct { Bf16, Int8 };

class MatrixUnitProbe {
 public:
  // Makes one product and its data per thread, for up to max_threads threads. Nothing is made
  // where the product would not run on the units (bf16 without matrix_units()) or runs only as
  // oneDNN's reference loop: implementation() is then "" and every peak 0.
  MatrixUnitProbe(UnitProduct type, int max_threads);
  ~MatrixUnitProbe();
  MatrixUnitProbe(MatrixUnitProbe&&) noexcept;
  MatrixUnitProbe& operator=(MatrixUnitProbe&&) noexcept;

  // oneDNN's implementation of the product ("brg:avx512_core_amx_int8", ...), or "".
  const std::string& implementation() const;
  // 1e9 operations a second (a multiply-add counts 2) of `threads` threads (at most max_threads)
  // each running its product, the fastest of `runs` timed runs of ~0.05 s; 0 without a product.
  double best_gops(int threads, int runs) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aft::kernels
