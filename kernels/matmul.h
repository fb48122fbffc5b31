// Matrix products for prefill, through oneDNN: y[M, N] = post(x[M, K] W^T + bias) (+ residual),
// W in PyTorch's nn.Linear layout [N, K], packed for the GEMV kernels (packed_weights.h). M is
// chosen per call. Packed f32 and bf16 weights are unpacked (widened) exactly to row-major f32 one
// column block at a time, into the scratch of the block's thread, just before its product. (q8_0
// weights are multiplied in integers by the GEMV kernels, a prompt's rows as a batch's:
// KernelTable::gemv_batch_q8_0.) Where the CPU has matrix units for bf16 (matrix_units()), bf16
// weights go there instead, with the activations rounded to bf16; so do f32 weights, rounded to
// bf16 too, when the Matmul's precision is MatmulPrecision::BF16 (an opt-in: f32 products are exact
// by default).
//
// The work split is ours, not oneDNN's: the N output columns are cut into fixed blocks of
// kMatmulBlockColumns; the M rows of narrow products (fewer than kNarrowBelowColumnBlocks column
// blocks) into blocks of kMatmulBlockRows, and those of wider products with fewer column blocks
// than the machine has CPUs into blocks of whole 2 x kMatmulBlockRows, enough for a block per CPU
// where M allows (matmul_block_rows). Each block is computed by one thread running a
// single-threaded oneDNN primitive. A block's shape, and so its summation order, depends on M, N
// and the machine, never on the thread count: results are bit-identical for any number of threads
// (oneDNN's own split of one product over threads is not, e.g. its AVX2 gemm).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/matmul_scratch.h"
#include "kernels/weight_matrix.h"

namespace aft::kernels {

enum class PostOp { None, Relu, Gelu, ReluSquared };

// How products of f32 weights with more than a few rows (prompts) are computed: F32, exactly
// (the default); BF16, on the matrix units where the CPU has them, from a copy of W rounded to
// bf16 (to nearest, ties to even, as aft-quantize's bf16), the activations rounded too and every
// product summed in f32: the bits of the same model stored in bf16. Elsewhere BF16 is F32. It
// changes nothing for bf16 weights (on the units wherever they exist).
enum class MatmulPrecision { F32, BF16 };

// Products of up to this many rows run one f32 primitive for any M (bf16 weights widened), never
// on the matrix units: a fixed-M primitive per row count would be built for them.
constexpr std::size_t kMatmulRuntimeRows = 8;

// Output columns per unit of parallel work.
constexpr std::size_t kMatmulBlockColumns = 128;
// Row blocks of narrow products; wider products' row blocks are whole multiples of twice this.
constexpr std::size_t kMatmulBlockRows = 64;
constexpr std::size_t kNarrowBelowColumnBlocks = 4;

// The blocks a product is cut into where its rows allow: the CPUs this machine has (at least 1,
// at most 256). A 512-wide layer is 4 column blocks: on 16 cores, cut by columns alone, it kept 12
// threads idle. Cut for 16 everywhere, its 128-row calls cost 3% at 1 and 2 threads on AVX-512
// (each call prepares its slab of W anew), which small machines do not pay.
std::size_t matmul_machine_blocks();

// The matrix units aft takes, and why not the ones asked for (AFT_MATRIX_UNITS), if not.
struct MatrixUnitChoice {
  std::string units;        // oneDNN's implementation of bf16 x bf16 -> f32 products, or ""
  std::string warning;      // empty when the setting was honoured (or there was none)
  std::string passed_over;  // AVX512-BF16's implementation, not taken by default: slower than FMAs
};

// The rule matrix_units() applies: `setting` is AFT_MATRIX_UNITS (null, "" or "auto": the default;
// "off" or "0": none; "on" or "1": wherever oneDNN has them), `onednn_bf16` oneDNN's implementation
// of a bf16 product on this CPU. It counts as matrix units when it is AMX's, or AVX512-BF16's
// ("avx512_core_bf16") and not a reference loop; by default AVX512-BF16's only where
// `bf16_outpaces_fma` (bf16_dot_outpaces_fma()): on Intel's cores without AMX the weights widened
// to f32 run 1.3-1.7x faster. Exposed so that tests can check it without the environment.
MatrixUnitChoice choose_matrix_units(const char* setting, const std::string& onednn_bf16,
                                     bool bf16_outpaces_fma);

// The choice for this CPU and AFT_MATRIX_UNITS, made once.
const MatrixUnitChoice& active_matrix_unit_choice();

// The units of active_matrix_unit_choice(): oneDNN's implementation of bf16 x bf16 -> f32
// products where aft takes matrix units for them (AMX, or AVX512-BF16 where it outpaces FMAs),
// else "". Matmuls of bf16 weights run their products of more than 8 rows there, the rows of x
// rounded to bf16: faster, and as exact as the bf16 rounding of x allows (each product summed in
// f32).
const std::string& matrix_units();

// What aft runs on the matrix units, for reports: "" without them; on a table whose kernels take
// AMX's tiles themselves (KernelTable::bf16_batch_on_tiles), "aft's AMX tile kernels (amx_bf16,
// amx_int8)"; elsewhere oneDNN's implementation, e.g. "brg:avx512_core_bf16 (oneDNN)".
const std::string& matrix_unit_kernels();

// The rows of each block of an [M, N] product cut for `blocks` threads (the last row block may have
// fewer rows): M itself when N gives that many column blocks, else the fewest whole row units that
// give that many blocks (at least one unit); narrow products always kMatmulBlockRows.
std::size_t matmul_block_rows(std::size_t m, std::size_t n, std::size_t blocks);

class Matmul {
 public:
  // w's data and bias (bias may be null) must outlive the Matmul. W is f32 or bf16. blocks:
  // how many threads the work is cut for (matmul_block_rows), whatever the number that runs it.
  Matmul(std::size_t k, std::size_t n, WeightMatrix w, const float* bias, PostOp post,
         std::size_t blocks = matmul_machine_blocks(),
         MatmulPrecision precision = MatmulPrecision::F32);
  ~Matmul();
  Matmul(Matmul&&) noexcept;
  Matmul& operator=(Matmul&&) noexcept;

  // Runs the column blocks on up to n_threads OpenMP threads. Thread-safe; call from serial code
  // (it opens its own parallel region; oneDNN never starts threads of its own). residual: null,
  // or [M, N] added to the result as each block is written (a transformer's skip connection,
  // without a pass of its own over y). scratch: the threads' working memory, the caller's (one
  // call at a time on it).
  void run(std::size_t m, const float* x, float* y, int n_threads, const float* residual,
           MatmulScratch& scratch) const;
  // The same with working memory of this call's own (allocated and freed by the call).
  void run(std::size_t m, const float* x, float* y, int n_threads,
           const float* residual = nullptr) const;

  // oneDNN's implementation names, for diagnostics: small M runs one primitive, larger M another,
  // e.g. "gemm:jit (M <= 8), brg:avx512_core (M > 8)". Starts with "ref" if either is the slow
  // reference fallback.
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The library and what it runs for the products of a d = 512 model, and which weights take it, e.g.
// "oneDNN 2.6.3, 128-column blocks, one thread each: gemm:jit (M <= 8), brg:avx512_core (M > 8);
// f32 weights on aft's batch GEMV instead; bf16 weights widened to f32". For reports.
std::string matmul_description();

}  // namespace aft::kernels
