// The one dispatch point for vector kernels. Each kernel is single-threaded and works on the range
// it is given; ops split work across threads. Every ISA provides the same table; the scalar table
// is the reference the others are tested against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "q8_0_block.h"

namespace aft::kernels {

struct KernelTable {
  const char* isa;  // "avx512amx", "avx512bf16", "avx512vnni", "avx512", "avx2", "sse2", "neon",
                    // "scalar"

  // y[r] = dot(w[r, 0:cols], x) + (bias ? bias[r] : 0) for r in [0, rows); w packed f32
  // (packed_weights.h), at the start of a group of kF32GroupRows rows. SIMD tables sum each row
  // column after column, one fma each, then add the bias: the same bits on every table with FMA.
  void (*gemv_f32)(std::size_t rows, std::size_t cols, const float* w, const float* x,
                   const float* bias, float* y);
  // gemv_f32 of n_vectors vectors, reading each weight once for all of them: vector v at
  // x + v * x_stride, its result at y + v * y_stride. Each result has the bits gemv_f32 of the
  // same table gives (a batch of sequences decodes as each would alone).
  void (*gemv_batch_f32)(std::size_t rows, std::size_t cols, const float* w, std::size_t n_vectors,
                         const float* x, std::size_t x_stride, const float* bias, float* y,
                         std::size_t y_stride);
  // gemv_batch_f32 over the first cols columns of weights packed with packed_cols >= cols columns
  // (a group's start packed_cols * kF32GroupRows floats from the next): products over growing
  // prefixes of one packing, as the AFT-full prefill's row blocks over a block of keys. The bits
  // of gemv_batch_f32 over the same columns packed alone.
  void (*gemv_batch_f32_prefix)(std::size_t rows, std::size_t cols, std::size_t packed_cols,
                                const float* w, std::size_t n_vectors, const float* x,
                                std::size_t x_stride, const float* bias, float* y,
                                std::size_t y_stride);
  // Whether a prompt's products of f32 weights take gemv_batch_f32, its rows as a batch's: where
  // that kernel multiplies them at least as fast as oneDNN's sgemm over an unpacked copy of the
  // weights (AVX-512 and AVX2; docs/benchmarks.md), and each row then gets the bits it gets
  // decoded alone. Elsewhere prompts take oneDNN (kernels::Matmul).
  bool f32_prompts_on_batch_gemv;

  // y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over n values (biased variance, as
  // PyTorch).
  void (*layer_norm_f32)(std::size_t n, const float* x, const float* gamma, const float* beta,
                         float eps, float* y);

  // Streaming AFT accumulator, per channel c in [0, n): adds one entry with logit k[c] + w and
  // value v[c] to the state (m, a, b), where a = sum exp(logit - m) v and b = sum exp(logit - m), m
  // the running max. The state and the logit are float64, so that a / b keeps float32 precision
  // over 2^30 entries and more (kernels/README.md). An empty state has m = -inf, a = b = 0.
  // Stable for any finite logits (no overflow, no NaN).
  void (*aft_accumulate_f32)(std::size_t n, double* m, double* a, double* b, const float* k,
                             const float* v, float w);
  // The same with a per-channel bias w[c] (AFT-conv's per-head bias, expanded to channels).
  void (*aft_accumulate_biased_f32)(std::size_t n, double* m, double* a, double* b, const float* k,
                                    const float* v, const float* w);

  // y[c] = sigmoid(q[c]) * a[c] / b[c], computed in float64.
  void (*aft_output_f32)(std::size_t n, const float* q, const double* a, const double* b, float* y);

  // ---- AFT window (the mixer's positions t - s < t' <= t, or every position for AFT-full) ----
  // Per channel, a frame reference r >= every windowed key, and each entry kept as
  // u = exp(k - r) <= 1: reading the window is then two multiply-adds per entry and token, and
  // an exp only where a new key raises r. Entry rows are given as arrays of row pointers, oldest
  // first; lanes [0, n) of each row are used.

  // Makes key k (one row) the newest entry: where k > r, r rises to k + kAftWindowHeadroom and
  // the older entries u_rows[0, entries) are rescaled by exp(r_old - r); then u_new = exp(k - r).
  // From r = -inf (an empty window) this gives r = k + kAftWindowHeadroom.
  void (*aft_window_push_f32)(std::size_t n, std::size_t entries, float* const* u_rows, float* r,
                              const float* k, float* u_new);
  // Rebuilds the frame from the keys: r = max_j k_rows[j], u_rows[j] = exp(k_rows[j] - r).
  // entries >= 1.
  void (*aft_window_reframe_f32)(std::size_t n, std::size_t entries, const float* const* k_rows,
                                 float* const* u_rows, float* r);
  // sa = sum_j e[j] u_j v_j and sb = sum_j e[j] u_j, summed in entry order, with weights e[j]
  // shared by every channel (exp of the bias minus its largest value). Returns false if sb <
  // kAftWindowMinSum (or is NaN) in any lane: the frame lost accuracy and the caller recomputes.
  bool (*aft_window_sums_f32)(std::size_t n, std::size_t entries, const float* e,
                              const float* const* u_rows, const float* const* v_rows, float* sa,
                              float* sb);
  // The same with a weight row per entry (AFT-conv: one per distance and channel).
  bool (*aft_window_sums_biased_f32)(std::size_t n, std::size_t entries, const float* const* e_rows,
                                     const float* const* u_rows, const float* const* v_rows,
                                     float* sa, float* sb);
  // y = sigmoid(q) (a g + sa h) / (b g + sb h): the global sums (m, a, b) and the window sums in
  // frame r + w (w: the largest bias of the window), with g = exp(m - M), h = exp(r + w - M) and
  // M = max(m, r + w), computed in float64.
  void (*aft_window_output_f32)(std::size_t n, const float* q, const double* m, const double* a,
                                const double* b, const float* r, const float* w, const float* sa,
                                const float* sb, float* y);

  // In place: x = max(x, 0); x = x * Phi(x) (exact erf GELU, as PyTorch's default);
  // x = max(x, 0)^2 (RWKV-4's channel mixing). Bit-identical on every ISA, but GELU.
  void (*relu_f32)(std::size_t n, float* x);
  void (*gelu_f32)(std::size_t n, float* x);
  void (*relu_squared_f32)(std::size_t n, float* x);
  // y[c] += sigmoid(g[c]) * x[c], computed in float64 and rounded once.
  void (*gated_add_f32)(std::size_t n, const float* g, const float* x, float* y);

  // y += x.
  void (*add_f32)(std::size_t n, const float* x, float* y);

  // ---- bf16 and q8_0 weights (docs/format.md) ----

  // The q8_0 quantization of n values (n % 32 == 0) into n quants q and n / 32 scales d: per block
  // of 32, d = max |x| / 127 and q = nearbyint(x / d) clamped to [-127, 127] (all 0 when d == 0),
  // binary32 divisions. Bit-identical on every ISA. For finite x (other values give defined but
  // unspecified quants).
  void (*quantize_q8_0)(std::size_t n, const float* x, int8_t* q, float* d);
  // The q8_0 weights below are packed (kernels/packed_weights.h): wq and wd point at the start of a
  // group of kQ8GroupRows rows, and hold whole groups (the last padded) covering rows [0, rows).
  //
  // y[r] = sum over blocks b < cols / 32 of (wd(r, b) * xd[b]) * isum(r, b) (+ bias[r]) for r in
  // [0, rows), where isum is the exact int32 dot product of block b's 32 weight quants of row r
  // and the activation quants xq[32 b ...]. cols % 32 == 0. SIMD tables add the blocks in order
  // with one fma each (q8_0.hpp); the result matches the scalar reference within float rounding.
  void (*gemv_q8_0)(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                    const int8_t* xq, const float* xd, const float* bias, float* y);
  // gemv_q8_0 of n_vectors activation vectors (vector v: xq + v * cols, xd + v * cols / 32; its
  // result at y + v * y_stride), reading each weight once for all of them; each result has the
  // bits gemv_q8_0 of the same table gives.
  void (*gemv_batch_q8_0)(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                          std::size_t n_vectors, const int8_t* xq, const float* xd,
                          const float* bias, float* y, std::size_t y_stride);
  // gemv_f32 / gemv_batch_f32 with packed bf16 weights (kernels/packed_weights.h; w at the start of
  // a group of kBf16GroupRows rows), widened exactly to f32: rows in lanes, each row's sum the
  // sequential one over its columns (group_gemv.hpp), so each vector of a batch gets the bits
  // gemv_bf16 gives it, and every table with FMA the bits gemv_f32 gives the widened weights.
  void (*gemv_bf16)(std::size_t rows, std::size_t cols, const uint16_t* w, const float* x,
                    const float* bias, float* y);
  void (*gemv_batch_bf16)(std::size_t rows, std::size_t cols, const uint16_t* w,
                          std::size_t n_vectors, const float* x, std::size_t x_stride,
                          const float* bias, float* y, std::size_t y_stride);

  // ---- bf16 weights by bf16 activations: the matrix units' arithmetic (bf16_gemv.hpp) ----

  // x[0, cols) rounded to bf16 (as f32_to_bf16: to nearest, ties to even) into
  // xb[0, bf16_packed_cols(cols)), zeros past cols. Bit-identical on every ISA.
  void (*round_bf16)(std::size_t cols, const float* x, uint16_t* xb);
  // y[r] = sum over c of w(r, c) xb[c] (+ bias[r]): packed bf16 weights by activations from
  // round_bf16, each product exact in f32 and summed in f32, pair of columns (2p, 2p + 1) after
  // pair: as AVX512-BF16's vdpbf16ps, column 2p + 1 first (the avx512bf16 table runs it; the
  // tables without it compute the same sums with FMAs), or as AMX's tdpbf16ps, column 2p first
  // (the avx512amx table). Matches the scalar reference within float rounding.
  void (*gemv_bf16_bf16)(std::size_t rows, std::size_t cols, const uint16_t* w, const uint16_t* xb,
                         const float* bias, float* y);
  // gemv_bf16_bf16 of n_vectors vectors (vector v at xb + v * x_stride), each result the bits
  // gemv_bf16_bf16 of the same table gives.
  void (*gemv_batch_bf16_bf16)(std::size_t rows, std::size_t cols, const uint16_t* w,
                               std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                               const float* bias, float* y, std::size_t y_stride);
  // Whether gemv_batch_bf16_bf16 runs on matrix tiles (the avx512amx table): there it multiplies a
  // prompt's rows faster than oneDNN's product (docs/benchmarks.md), so prompts take it, and each
  // row gets the bits it gets decoded alone.
  bool bf16_batch_on_tiles;
  // A prompt's rows (n_vectors of them, each rounded by round_bf16, vector v at xb + v * x_stride)
  // by packed q8_0 weights (as gemv_q8_0's) on the bf16 tiles: every weight dequantized to
  // bf16(wd * q) (rounded to nearest, ties to even; a zero or subnormal product a zero of its
  // sign), a slab at a time, then the products of gemv_batch_bf16_bf16 of the same table, whose
  // bits each result has. cols % 32 == 0. Only the avx512amx table has it (q8_0_bf16_tiles.hpp):
  // there it multiplies prompts faster than gemv_batch_q8_0 (docs/benchmarks.md); null elsewhere.
  void (*gemv_prompt_q8_0_bf16)(std::size_t rows, std::size_t cols, const int8_t* wq,
                                const float* wd, std::size_t n_vectors, const uint16_t* xb,
                                std::size_t x_stride, const float* bias, float* y,
                                std::size_t y_stride);

  // ---- machine probes (aft-bench) ----

  // sum of x[0, n), in any order: the streaming-read probe (bandwidth limit of decode).
  float (*sum_f32)(std::size_t n, const float* x);

  // The register-resident FMA probe (compute limit of prefill): runs independent chains, enough to
  // keep every FMA unit busy (their number is fixed per table, at most kFmaProbeMaxChains); chain c
  // starts at 1 + (c + 1) / 1024 and repeats x = fma(x, kFmaProbeMultiplier, kFmaProbeAddend)
  // `iterations` times. Writes chain c's final value to sink[c] (sink holds kFmaProbeMaxChains
  // floats) and returns the floating-point operations done, 2 x chains x iterations. The
  // multiply-add is fused on every ISA with FMA instructions (all but sse2, which multiplies, then
  // adds).
  std::size_t (*fma_probe_f32)(std::size_t iterations, float* sink);
};

// Window sums below this are recomputed. Every term of sb is at most 1 and those that lose
// precision are below 2^-126 (subnormal); with sb >= 2^-90 the largest term is at least
// 2^-90 / entries, so for up to 2^10 entries all lost terms together are below 2^-26 of sb.
constexpr float kAftWindowMinSum = 0x1p-90f;
// How far above a key that raises the frame the reference goes: later keys up to 8 above that key
// enter without rescaling the window (a pass over every entry, and a save of the old values for a
// failing call's rollback), so a raise is rare once a window has seen its keys' range. It costs
// the window sums 8 of their float range's 87 below 1 (the largest u is e^-8).
constexpr float kAftWindowHeadroom = 8.0f;

// Rows per group of packed q8_0 weights (kernels/packed_weights.h).
constexpr std::size_t kQ8GroupRows = 16;
// Rows per group of packed f32 weights: a group's column is one AVX-512 register (2 AVX2, 4 SSE2
// or NEON).
constexpr std::size_t kF32GroupRows = 16;
// Packed bf16 weights: groups of 16 rows (a pair of columns of a group is one AVX-512 register),
// columns padded to whole chunks of 32 (a chunk of a group is one AMX tile).
constexpr std::size_t kBf16GroupRows = 16;
constexpr std::size_t kBf16ChunkCols = 32;
constexpr std::size_t bf16_packed_cols(std::size_t cols) {
  return (cols + kBf16ChunkCols - 1) / kBf16ChunkCols * kBf16ChunkCols;
}

constexpr float kFmaProbeMultiplier = 0.999f;  // chains converge to b / (1 - a) = 1: never denormal
constexpr float kFmaProbeAddend = 0.001f;
constexpr std::size_t kFmaProbeMaxChains = 256;

// The reference implementation: plain loops, no intrinsics.
const KernelTable& scalar_kernels();

// The table for one ISA by name ("scalar", "sse2", "avx2", "avx512", "avx512vnni", "avx512bf16",
// "avx512amx", "neon"), or null when the name is unknown, the ISA is not built for this target, or
// this CPU (and OS) cannot run it.
const KernelTable* kernels_for_isa(const char* isa);

// The avx512amx table's gemv_batch_q8_0, gemv_batch_bf16_bf16 and gemv_prompt_q8_0_bf16 with AMX's
// tile instructions emulated in plain C++ (emulated_tiles.h): the tile kernels' tests where the CPU
// has no AMX. Null where the CPU cannot run the table's other instructions (the avx512bf16 table's
// and AVX512CD) or the build has no x86 kernels.
using GemvBatchQ8 = decltype(KernelTable::gemv_batch_q8_0);
GemvBatchQ8 emulated_tiles_gemv_batch_q8_0();
using GemvBatchBf16Bf16 = decltype(KernelTable::gemv_batch_bf16_bf16);
GemvBatchBf16Bf16 emulated_tiles_gemv_batch_bf16_bf16();
using GemvPromptQ8Bf16 = decltype(KernelTable::gemv_prompt_q8_0_bf16);
GemvPromptQ8Bf16 emulated_tiles_gemv_prompt_q8_0_bf16();

// Whether AVX512-BF16's vdpbf16ps multiplies faster than FMAs on weights widened to f32: on AMD's
// cores (Zen 4, Zen 5) it runs at twice the FMA peak, on Intel's at half of it (oneDNN's bf16
// product 86 against 174 GFLOP/s a thread on an Emerald Rapids whose AMX was hidden;
// docs/benchmarks.md). False where the CPU has no AVX512-BF16.
bool bf16_dot_outpaces_fma();

// The table for an AFT_ISA value, and why it is not the one asked for, if it is not.
struct KernelChoice {
  const KernelTable* table;
  std::string warning;  // empty when the request was honoured (or there was none)
};

// The rule active_kernel_choice() applies to the value of AFT_ISA (null or empty: the best
// table); exposed so that tests can check it without depending on the environment of the process.
KernelChoice choose_kernels(const char* requested);

// The choice for this CPU and the environment variable AFT_ISA ("scalar", "sse2", "avx2",
// "avx512", "avx512vnni", "avx512bf16", "avx512amx", "neon"), made once; forcing an ISA the CPU
// lacks falls back to the best one it has, with a warning the engine logs.
const KernelChoice& active_kernel_choice();
inline const KernelTable& active_kernels() { return *active_kernel_choice().table; }

}  // namespace aft::kernels
