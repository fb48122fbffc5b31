// The reference kernels: plain loops that every ISA table is tested against. Reductions accumulate
// in double so that the reference is accurate to about one rounding of the result.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace aft::kernels {
namespace {

// Weight (r, c) of packed f32 or bf16 weights (packed_weights.h).
float weight(const float* w, std::size_t r, std::size_t c, std::size_t cols) {
  return w[f32_packed_index(r, c, cols)];
}
float weight(const uint16_t* w, std::size_t r, std::size_t c, std::size_t cols) {
  return bf16_to_float(w[bf16_packed_index(r, c, cols)]);
}

// W: float (gemv_f32) or bf16 bits (gemv_bf16). The first cols columns of weights packed with
// packed_cols columns.
template <class W>
void gemv_prefix(std::size_t rows, std::size_t cols, std::size_t packed_cols, const W* w,
                 const float* x, const float* bias, float* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = bias ? bias[r] : 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      sum += static_cast<double>(weight(w, r, c, packed_cols)) * x[c];
    }
    y[r] = static_cast<float>(sum);
  }
}

template <class W>
void gemv(std::size_t rows, std::size_t cols, const W* w, const float* x, const float* bias,
          float* y) {
  gemv_prefix(rows, cols, cols, w, x, bias, y);
}

template <class W>
void gemv_batch_prefix(std::size_t rows, std::size_t cols, std::size_t packed_cols, const W* w,
                       std::size_t n_vectors, const float* x, std::size_t x_stride,
                       const float* bias, float* y, std::size_t y_stride) {
  for (std::size_t v = 0; v < n_vectors; ++v) {
    gemv_prefix(rows, cols, packed_cols, w, x + v * x_stride, bias, y + v * y_stride);
  }
}

template <class W>
void gemv_batch(std::size_t rows, std::size_t cols, const W* w, std::size_t n_vectors,
                const float* x, std::size_t x_stride, const float* bias, float* y,
                std::size_t y_stride) {
  gemv_batch_prefix(rows, cols, cols, w, n_vectors, x, x_stride, bias, y, y_stride);
}

void quantize_q8_0(std::size_t n, const float* x, int8_t* q, float* d) {
  for (std::size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    int8_t* qb = q + b * kQ8BlockSize;
    float amax = 0.0f;
    for (std::size_t i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    d[b] = scale;
    for (std::size_t i = 0; i < kQ8BlockSize; ++i) {
      // min first: a NaN quotient becomes 127 rather than an undefined conversion.
      const float v = scale == 0.0f ? 0.0f : std::nearbyint(xb[i] / scale);
      qb[i] = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, v)));
    }
  }
}

// The block products (wd * xd, a float product as in every ISA) times the exact integer sums,
// added in double.
void gemv_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
               const int8_t* xq, const float* xd, const float* bias, float* y) {
  const std::size_t blocks = cols / kQ8BlockSize;
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = bias ? bias[r] : 0.0;
    for (std::size_t b = 0; b < blocks; ++b) {
      int32_t isum = 0;
      for (std::size_t i = b * kQ8BlockSize; i < (b + 1) * kQ8BlockSize; ++i) {
        isum += int32_t{wq[q8_0_packed_quant(r, i, cols)]} * int32_t{xq[i]};
      }
      sum += static_cast<double>(wd[q8_0_packed_scale(r, b, cols)] * xd[b]) * isum;
    }
    y[r] = static_cast<float>(sum);
  }
}

void gemv_batch_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                     std::size_t n_vectors, const int8_t* xq, const float* xd, const float* bias,
                     float* y, std::size_t y_stride) {
  for (std::size_t v = 0; v < n_vectors; ++v) {
    gemv_q8_0(rows, cols, wq, wd, xq + v * cols, xd + v * (cols / kQ8BlockSize), bias,
              y + v * y_stride);
  }
}

void round_bf16(std::size_t cols, const float* x, uint16_t* xb) {
  for (std::size_t c = 0; c < bf16_packed_cols(cols); ++c) xb[c] = c < cols ? f32_to_bf16(x[c]) : 0;
}

void gemv_bf16_bf16(std::size_t rows, std::size_t cols, const uint16_t* w, const uint16_t* xb,
                    const float* bias, float* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = bias ? bias[r] : 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      sum += static_cast<double>(weight(w, r, c, cols)) * bf16_to_float(xb[c]);
    }
    y[r] = static_cast<float>(sum);
  }
}

void gemv_batch_bf16_bf16(std::size_t rows, std::size_t cols, const uint16_t* w,
                          std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                          const float* bias, float* y, std::size_t y_stride) {
  for (std::size_t v = 0; v < n_vectors; ++v) {
    gemv_bf16_bf16(rows, cols, w, xb + v * x_stride, bias, y + v * y_stride);
  }
}

// Two passes (mean, then squared deviations): no cancellation for inputs with a large offset.
void layer_norm_f32(std::size_t n, const float* x, const float* gamma, const float* beta, float eps,
                    float* y) {
  if (n == 0) return;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    squares += d * d;
  }
  const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((x[i] - mean) * rstd * gamma[i] + beta[i]);
  }
}

// One exp per channel: exp(-|x - m|) is either the rescale of the old sums (new maximum) or the
// weight of the new entry. From m = -inf the first entry gives exp(-inf) = 0, so a = v, b = 1.
void aft_add(double& m, double& a, double& b, double x, double v) {
  if (x > m) {
    const double scale = std::exp(m - x);
    a = a * scale + v;
    b = b * scale + 1.0;
    m = x;
  } else {
    const double e = std::exp(x - m);
    a += e * v;
    b += e;
  }
}

void aft_accumulate_f32(std::size_t n, double* m, double* a, double* b, const float* k,
                        const float* v, float w) {
  for (std::size_t c = 0; c < n; ++c) aft_add(m[c], a[c], b[c], double(k[c]) + w, v[c]);
}

void aft_accumulate_biased_f32(std::size_t n, double* m, double* a, double* b, const float* k,
                               const float* v, const float* w) {
  for (std::size_t c = 0; c < n; ++c) aft_add(m[c], a[c], b[c], double(k[c]) + w[c], v[c]);
}

// sigmoid from exp(-|q|) <= 1: never overflows, and keeps relative accuracy for very negative q.
// In float32, the float64 sums narrowed (f32_aft_output.hpp).
float aft_output(float q, float a, float b) {
  const float e = std::exp(-std::fabs(q));
  return (q >= 0.0f ? a : e * a) / ((1.0f + e) * b);
}

void aft_output_f32(std::size_t n, const float* q, const double* a, const double* b, float* y) {
  for (std::size_t c = 0; c < n; ++c) {
    y[c] = aft_output(q[c], static_cast<float>(a[c]), static_cast<float>(b[c]));
  }
}

void aft_window_push_f32(std::size_t n, std::size_t entries, float* const* u_rows, float* r,
                         const float* k, float* u_new) {
  for (std::size_t c = 0; c < n; ++c) {
    if (k[c] > r[c]) {
      const float raised = k[c] + kAftWindowHeadroom;
      const float scale = std::exp(r[c] - raised);
      for (std::size_t j = 0; j < entries; ++j) u_rows[j][c] *= scale;
      r[c] = raised;
    }
    u_new[c] = std::exp(k[c] - r[c]);
  }
}

void aft_window_reframe_f32(std::size_t n, std::size_t entries, const float* const* k_rows,
                            float* const* u_rows, float* r) {
  for (std::size_t c = 0; c < n; ++c) {
    float ref = k_rows[0][c];
    for (std::size_t j = 1; j < entries; ++j) ref = std::max(ref, k_rows[j][c]);
    for (std::size_t j = 0; j < entries; ++j) u_rows[j][c] = std::exp(k_rows[j][c] - ref);
    r[c] = ref;
  }
}

// weight(j, c): entry j's weight for channel c.
template <class Weight>
bool aft_window_sums(std::size_t n, std::size_t entries, const Weight& weight,
                     const float* const* u_rows, const float* const* v_rows, float* sa, float* sb) {
  bool stable = true;
  for (std::size_t c = 0; c < n; ++c) {
    double a = 0.0, b = 0.0;
    for (std::size_t j = 0; j < entries; ++j) {
      const double p = static_cast<double>(weight(j, c)) * u_rows[j][c];
      b += p;
      a += p * v_rows[j][c];
    }
    sa[c] = static_cast<float>(a);
    sb[c] = static_cast<float>(b);
    stable = stable && sb[c] >= kAftWindowMinSum;
  }
  return stable;
}

bool aft_window_sums_f32(std::size_t n, std::size_t entries, const float* e,
                         const float* const* u_rows, const float* const* v_rows, float* sa,
                         float* sb) {
  return aft_window_sums(
      n, entries, [e](std::size_t j, std::size_t) { return e[j]; }, u_rows, v_rows, sa, sb);
}

bool aft_window_sums_biased_f32(std::size_t n, std::size_t entries, const float* const* e_rows,
                                const float* const* u_rows, const float* const* v_rows, float* sa,
                                float* sb) {
  return aft_window_sums(
      n, entries, [e_rows](std::size_t j, std::size_t c) { return e_rows[j][c]; }, u_rows, v_rows,
      sa, sb);
}

void aft_window_output_f32(std::size_t n, const float* q, const double* m, const double* a,
                           const double* b, const float* r, const float* w, const float* sa,
                           const float* sb, float* y) {
  for (std::size_t c = 0; c < n; ++c) {
    const float global_max = static_cast<float>(m[c]);
    const float frame = r[c] + w[c];
    // One exp, the smaller side's rescale; the larger side's is exp(0) = 1.
    const float e = std::exp(std::min(global_max, frame) - std::max(global_max, frame));
    const float global = global_max >= frame ? 1.0f : e;
    const float window = global_max >= frame ? e : 1.0f;
    y[c] = aft_output(q[c], static_cast<float>(a[c]) * global + sa[c] * window,
                      static_cast<float>(b[c]) * global + sb[c] * window);
  }
}

void relu_f32(std::size_t n, float* x) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2); the erfc form avoids the
// cancellation 1 + erf(..) suffers for negative x.
void gelu_f32(std::size_t n, float* x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (std::size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * std::erfc(-x[i] * kInvSqrt2);
}

void relu_squared_f32(std::size_t n, float* x) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
}

void gated_add_f32(std::size_t n, const float* g, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const double sigmoid = 1.0 / (1.0 + std::exp(-double(g[i])));
    y[i] = static_cast<float>(std::fma(sigmoid, double(x[i]), double(y[i])));
  }
}

void add_f32(std::size_t n, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
}

float sum_f32(std::size_t n, const float* x) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  return static_cast<float>(sum);
}

// Sixteen chains: the definition in kernels.h, one std::fma (correctly rounded) per step.
std::size_t fma_probe_f32(std::size_t iterations, float* sink) {
  constexpr std::size_t kChains = 16;
  float x[kChains];
  for (std::size_t c = 0; c < kChains; ++c) x[c] = 1.0f + static_cast<float>(c + 1) / 1024.0f;
  for (std::size_t i = 0; i < iterations; ++i) {
    for (float& v : x) v = std::fma(v, kFmaProbeMultiplier, kFmaProbeAddend);
  }
  for (std::size_t c = 0; c < kChains; ++c) sink[c] = x[c];
  return 2 * kChains * iterations;
}

constexpr KernelTable kScalar{
    "scalar",
    gemv<float>,
    gemv_batch<float>,
    gemv_batch_prefix<float>,
    false,
    layer_norm_f32,
    aft_accumulate_f32,
    aft_accumulate_biased_f32,
    aft_output_f32,
    aft_window_push_f32,
    aft_window_reframe_f32,
    aft_window_sums_f32,
    aft_window_sums_biased_f32,
    aft_window_output_f32,
    relu_f32,
    gelu_f32,
    relu_squared_f32,
    gated_add_f32,
    add_f32,
    quantize_q8_0,
    gemv_q8_0,
    gemv_batch_q8_0,
    gemv<uint16_t>,
    gemv_batch<uint16_t>,
    round_bf16,
    gemv_bf16_bf16,
    gemv_batch_bf16_bf16,
    false,
    nullptr,
    sum_f32,
    fma_probe_f32,
};

}  // namespace

const KernelTable& scalar_kernels() { return kScalar; }

}  // namespace aft::kernels
