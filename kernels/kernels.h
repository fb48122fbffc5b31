// The one dispatch point for vector kernels. Each kernel is single-threaded and works on the range
// it is given; ops split work across threads. Every ISA provides the same table; the scalar table
// is the reference the others are tested against.
#pragma once

#include <cstddef>

namespace aft::kernels {

struct KernelTable {
  const char* isa;  // "avx512", "avx2", "sse2", "neon", "scalar"

  // y[r] = dot(w[r, 0:cols], x) + (bias ? bias[r] : 0) for r in [0, rows); w row-major, row stride
  // cols.
  void (*gemv_f32)(std::size_t rows, std::size_t cols, const float* w, const float* x,
                   const float* bias, float* y);

  // y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over n values (biased variance, as
  // PyTorch).
  void (*layer_norm_f32)(std::size_t n, const float* x, const float* gamma, const float* beta,
                         float eps, float* y);

  // Streaming AFT accumulator, per channel c in [0, n): adds one entry with logit k[c] + w and
  // value v[c] to the state (m, a, b), where a = sum exp(logit - m) v and b = sum exp(logit - m), m
  // the running max. An empty state has m = -inf, a = b = 0. Stable for any finite logits (no
  // overflow, no NaN).
  void (*aft_accumulate_f32)(std::size_t n, float* m, float* a, float* b, const float* k,
                             const float* v, float w);
  // The same with a per-channel bias w[c] (AFT-conv's per-head bias, expanded to channels).
  void (*aft_accumulate_biased_f32)(std::size_t n, float* m, float* a, float* b, const float* k,
                                    const float* v, const float* w);

  // y[c] = sigmoid(q[c]) * a[c] / b[c].
  void (*aft_output_f32)(std::size_t n, const float* q, const float* a, const float* b, float* y);

  // In place: x = max(x, 0); x = x * Phi(x) (exact erf GELU, as PyTorch's default).
  void (*relu_f32)(std::size_t n, float* x);
  void (*gelu_f32)(std::size_t n, float* x);

  // y += x.
  void (*add_f32)(std::size_t n, const float* x, float* y);

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

constexpr float kFmaProbeMultiplier = 0.999f;  // chains converge to b / (1 - a) = 1: never denormal
constexpr float kFmaProbeAddend = 0.001f;
constexpr std::size_t kFmaProbeMaxChains = 256;

// The reference implementation: plain loops, no intrinsics.
const KernelTable& scalar_kernels();

// The table for one ISA by name ("scalar", "sse2", "avx2", "avx512", "neon"), or null when the name
// is unknown, the ISA is not built for this target, or this CPU (and OS) cannot run it.
const KernelTable* kernels_for_isa(const char* isa);

// The rule active_kernels() applies to the value of AFT_ISA (null or empty: the best table);
// exposed so that tests can check it without depending on the environment of the process.
const KernelTable& choose_kernels(const char* requested);

// The best table for this CPU, chosen once. The environment variable AFT_ISA forces one
// ("scalar", "sse2", "avx2", "avx512", "neon"); forcing an ISA the CPU lacks falls back to the best
// one it has, with a warning on stderr.
const KernelTable& active_kernels();

}  // namespace aft::kernels
