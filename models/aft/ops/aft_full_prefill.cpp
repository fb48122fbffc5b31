// AFT-full prefill as matrix products. Positions are cut into key blocks of kKeyBlock (at absolute
// positions), channels into blocks of kChannelBlock. For key block j, query position t and channel
// c:
//   E[t, t'] = exp(w[t, t'] - rho_j(t))     rho_j(t): row t's largest bias in the block (t' <= t)
//   F[t', c] = exp(K[t', c] - kappa_j(c))   kappa_j(c): channel c's largest key in the block
//   N_j | D_j = E @ (F * V | F)             one product per key block and channel block
// give the partial state (m, a, b) = (rho_j(t) + kappa_j(c), N_j, D_j), merged over the key blocks
// as the streaming accumulator's states merge (docs/aft-math.md, "Prefill"). E and F are at most
// 1: nothing overflows. Entries of E past the diagonal (t' > t) are 0.
//
// Threads: each channel block is computed by one thread, its products by the single-threaded batch
// GEMV (or oneDNN's sgemm, see multiply()), in the same shapes whatever the number of threads:
// results are bit-identical for any count.
#include "aft_full_prefill.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "aft_state_merge.h"
#include "engine/format/aligned_buffer.h"
#include "engine/runtime/parallel.h"
#include "exp_nonpositive.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "kernels/single_thread_gemm.h"
#include "models/aft/channel_blocked_rows.h"

namespace aft {
namespace {

// Work units. A merge of partial states costs about as much as a key block row's share of the
// product: long key blocks keep merges few (measured on enwik8-full shapes: 256 takes 0.6x the time
// of 64; 512 took enwik8-full's pp512 merges from 35 to 7 ms at 1 thread on AVX2, the mixer's whole
// prefill from 135 to 104 ms). Row blocks skip most of the diagonal block's masked half.
constexpr std::size_t kKeyBlock = 512;
constexpr std::size_t kRowBlock = 64;
// The state's channel blocks (channel_blocked_rows.h): a block's keys are contiguous rows.
constexpr std::size_t kChannelBlock = ChannelBlockedRows::kBlock;
// F * V | F of a key block's position, and N_j | D_j of a chunk row: each half of a channel block
// padded to whole groups of the batch GEMV's weights (kernels::f32_packed_rows; zeros past the
// block's channels).
constexpr std::size_t kFactorStride = 2 * kChannelBlock;
static_assert(kChannelBlock % kernels::kF32GroupRows == 0, "a channel block's halves are groups");

// Below this, a block's D is recomputed with the exact streaming accumulator. Why 2^-88: exp()
// results and products below 2^-126 may be subnormal or flushed to 0, an absolute error of at most
// 2^-126 each (E and F are at most 1). A block sums kKeyBlock = 2^9 terms, each with up to three
// such errors (E, F, their product): at most 3 * 2^9 * 2^-126 < 2^-115 in D, and the same times
// max |V| in N. With D >= 2^-88 that is below 2^-27 relative, under float's own rounding (2^-24).
// A smaller D means that underflow may have eaten the block's sum (keys and biases spread by more
// than about 61 with their maxima at different positions): that block is summed exactly instead.
constexpr float kMinDenominator = 0x1p-88f;
static_assert(kKeyBlock <= 512, "the bound above assumes at most 2^9 terms per block");

// Merges a key block's partial states (row_max + key_max[c], n[c], d[c]) into a row's (m, a, b)
// over width channels. The arrays do not overlap (which lets the loop vectorize).
void merge_row(std::size_t width, float row_max, const float* __restrict key_max,
               const float* __restrict n, const float* __restrict d, double* __restrict m,
               double* __restrict a, double* __restrict b) {
  for (std::size_t c = 0; c < width; ++c) {
    const AftState merged = merge(m[c], a[c], b[c], double(row_max) + key_max[c], n[c], d[c]);
    m[c] = merged.m;
    a[c] = merged.a;
    b[c] = merged.b;
  }
}

// merge_row for the first key block, into the empty state (m = -inf, a = b = 0) that every row has
// before it: there merge's exp(m - pm) is exp(-inf) = 0 for a partial with pm > -inf, and the
// merged state is (pm, 0 + n, 0 + d), which this writes without the exp; other partials go through
// merge. The same bits as merge_row.
void start_row(std::size_t width, float row_max, const float* __restrict key_max,
               const float* __restrict n, const float* __restrict d, double* __restrict m,
               double* __restrict a, double* __restrict b) {
  constexpr double kEmpty = -std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < width; ++c) {
    const double pm = double(row_max) + key_max[c];
    if (pm > kEmpty) {
      m[c] = pm;
      a[c] = 0.0 + n[c];
      b[c] = 0.0 + d[c];
    } else {
      const AftState merged = merge(kEmpty, 0.0, 0.0, pm, n[c], d[c]);
      m[c] = merged.m;
      a[c] = merged.a;
      b[c] = merged.b;
    }
  }
}

// Grows buffer to at least n floats. Scratch (the session's, per thread) is kept from call to call:
// a prefill would otherwise spend much of its time on fresh pages.
float* at_least(AlignedBuffer& buffer, std::size_t n) {
  if (buffer.size() < n) buffer = AlignedBuffer(n);
  return buffer.data();
}
double* at_least(AlignedDoubles& buffer, std::size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The chunk's bias weights, shared by the threads: exp(w - rho) per row and key block, and rho.
struct BiasRows {
  AlignedBuffer exp_bias, bias_max;
};

// A thread's working memory for one channel block at a time.
struct ChannelBlockScratch {
  // state_rows: the rows whose merged state is kept (FullPrefill::state_row).
  void reserve(std::size_t state_rows) {
    panels = at_least(panels_buffer, kKeyBlock * kFactorStride);
    sums = at_least(sums_buffer, kRowBlock * kFactorStride);
    key_max = at_least(key_max_buffer, kChannelBlock);
    key_rows.resize(kKeyBlock);
    factor_rows.resize(kKeyBlock);
    m = at_least(m_buffer, state_rows * kChannelBlock);
    a = at_least(a_buffer, state_rows * kChannelBlock);
    b = at_least(b_buffer, state_rows * kChannelBlock);
  }
  float* panels;                       // a key block's F * V | F, by groups of 16 channels
  float* sums;                         // a row block's N_j | D_j, kFactorStride apart
  float* key_max;                      // kappa_j
  std::vector<const float*> key_rows;  // a key block's rows of keys and of F, for the kernel
  std::vector<float*> factor_rows;
  double *m, *a, *b;  // the rows' merged state (as the accumulator's), kChannelBlock apart
  AlignedBuffer panels_buffer, sums_buffer, key_max_buffer;
  AlignedDoubles m_buffer, a_buffer, b_buffer;
};

class FullPrefill {
 public:
  FullPrefill(const ExecContext& ctx, const PositionBias& bias, const Tensor& q, const Tensor& key,
              const Tensor& value, MixerState& state, const Tensor& out)
      : ctx_(ctx),
        bias_(bias),
        q_(q),
        key_(key),
        value_(value),
        state_(state),
        out_(out),
        rows_(out.rows),
        d_(out.width),
        first_(static_cast<std::size_t>(ctx.position_of(0))),
        positions_(first_ + rows_),
        key_blocks_((positions_ + kKeyBlock - 1) / kKeyBlock),
        bias_stride_(key_blocks_ * kKeyBlock) {}

  void run() {
    BiasRows& bias_rows = ctx_.scratch.local<BiasRows>();
    exp_bias_ = at_least(bias_rows.exp_bias, rows_ * bias_stride_);
    bias_max_ = at_least(bias_rows.bias_max, rows_ * key_blocks_);
    // Per row: a bias and an exp per earlier position. A row's work grows with its position: an
    // item is row r with row rows_ - 1 - r, so that equal counts of items are equal work.
    parallel_ranges((rows_ + 1) / 2, 1, ctx_.n_threads, positions_ * 32,
                    [&](std::size_t p0, std::size_t p1) {
                      for (std::size_t p = p0; p < p1; ++p) {
                        fill_bias_row(p);
                        if (rows_ - 1 - p != p) fill_bias_row(rows_ - 1 - p);
                      }
                    });
    // Per channel: two multiply-adds per pair of positions.
    parallel_ranges(d_, kChannelBlock, ctx_.n_threads, rows_ * positions_,
                    [&](std::size_t c0, std::size_t c1) {
                      ChannelBlockScratch& scratch = ctx_.scratch.local<ChannelBlockScratch>();
                      scratch.reserve(key_blocks_ == 1 ? 1 : rows_);
                      for (std::size_t c = c0; c < c1; c += kChannelBlock) {
                        store_rows(c / kChannelBlock);
                        run_channel_block(c, std::min(kChannelBlock, c1 - c), scratch);
                      }
                    });
  }

 private:
  // Channels [c, c + kChannelBlock) of a position's key or value; c a multiple of kChannelBlock.
  const float* key_row(std::size_t position, std::size_t c) const {
    return state_.keys.row(position, c / kChannelBlock);
  }
  const float* value_row(std::size_t position, std::size_t c) const {
    return state_.values.row(position, c / kChannelBlock);
  }

  // The chunk's keys and values of one channel block into the state, by the thread that computes
  // the block: the rows were the other thread's output too, and a copy of whole rows by one thread
  // left the others waiting.
  void store_rows(std::size_t block) {
    for (std::size_t r = 0; r < rows_; ++r) {
      state_.keys.store(first_ + r, block, key_.row(r));
      state_.values.store(first_ + r, block, value_.row(r));
    }
  }

  // E of chunk row r, for every key block the row sees, and rho_j.
  void fill_bias_row(std::size_t r) {
    const std::size_t t = first_ + r;
    float* e = exp_bias_ + r * bias_stride_;
    for (std::size_t j = 0; j <= t / kKeyBlock; ++j) {
      const std::size_t begin = j * kKeyBlock;
      const std::size_t end = std::min(begin + kKeyBlock, positions_);
      const std::size_t visible = std::min(end, t + 1);
      bias_.row(static_cast<int64_t>(t), static_cast<int64_t>(begin), static_cast<int64_t>(visible),
                e + begin);
      bias_max_[r * key_blocks_ + j] = exp_minus_max(e + begin, visible - begin);
      std::fill(e + visible, e + end, 0.0f);
    }
  }

  void run_channel_block(std::size_t c0, std::size_t width, ChannelBlockScratch& s) const {
    const auto read_out = [&](std::size_t r) {
      ctx_.kernels.aft_output_f32(width, q_.row(r) + c0, s.a + state_row(r), s.b + state_row(r),
                                  out_.row(r) + c0);
    };
    for (std::size_t j = 0; j < key_blocks_; ++j) {
      const std::size_t begin = j * kKeyBlock;
      const std::size_t length = std::min(kKeyBlock, positions_ - begin);
      // Chunk rows from r0 on are at positions >= begin: they see this block. The others saw their
      // last block before it.
      const std::size_t r0 = begin > first_ ? begin - first_ : 0;
      const bool last = j + 1 == key_blocks_;
      if (last) {
        for (std::size_t r = 0; r < r0; ++r) read_out(r);
      }
      key_block_factors(begin, length, c0, width, s);
      // By row blocks: each multiplies only the positions its last row sees (E is 0 past them),
      // then its rows take the block's partial states, and after the last key block they are read
      // out while in cache.
      for (std::size_t ra = r0; ra < rows_; ra += kRowBlock) {
        const std::size_t rb = std::min(ra + kRowBlock, rows_);
        const std::size_t seen = std::min(length, first_ + rb - begin);
        multiply(ra, rb - ra, begin, length, seen, kernels::f32_packed_rows(width), s);
        for (std::size_t r = ra; r < rb; ++r) {
          merge_key_block(j, r, s.sums + (r - ra) * kFactorStride, c0, width, s);
          if (last) read_out(r);
        }
      }
    }
  }

  // Where chunk row r's merged state starts in s.m, s.a, s.b. With one key block a row's state
  // lives from its only merge to its read-out, right after: one row's place serves every row.
  std::size_t state_row(std::size_t r) const { return key_blocks_ == 1 ? 0 : r * kChannelBlock; }

  // Group g of a channel block's F * V | F (its padded channels [16 g, 16 g + 16), F * V's groups
  // first) in s.panels: the positions of the key block (length) as the packed weights' columns
  // (packed_weights.h), a row of 16 channels per position.
  static float* panel(ChannelBlockScratch& s, std::size_t g, std::size_t length) {
    return s.panels + g * length * kernels::kF32GroupRows;
  }

  // N_j | D_j of chunk rows [r, r + rows) into s.sums: E's rows by the first seen positions of the
  // key block (at begin, length positions). On a table whose batch GEMV takes prompts (kernels.h),
  // that kernel over a prefix of the panels: blocks of 8 rows by 2 groups of 16 channels keep their
  // sums in registers, where oneDNN's sgemm ran at a fifth of the FMA peak on these shapes
  // (enwik8-full's mixer took a quarter of pp512 at 2 threads). Elsewhere oneDNN's sgemm, a group
  // at a time. Either way each sum's order depends on the shapes only.
  void multiply(std::size_t r, std::size_t rows, std::size_t begin, std::size_t length,
                std::size_t seen, std::size_t padded, ChannelBlockScratch& s) const {
    float* sums = s.sums;
    const float* e = exp_bias_ + r * bias_stride_ + begin;
    if (ctx_.kernels.f32_prompts_on_batch_gemv) {
      ctx_.kernels.gemv_batch_f32_prefix(2 * padded, seen, length, s.panels, rows, e, bias_stride_,
                                         nullptr, sums, kFactorStride);
      return;
    }
    constexpr std::size_t kGroup = kernels::kF32GroupRows;
    for (std::size_t g = 0; g < 2 * padded / kGroup; ++g) {
      kernels::gemm_f32_single_thread(rows, kGroup, seen, e, bias_stride_, panel(s, g, length),
                                      kGroup, sums + g * kGroup, kFactorStride);
    }
  }

  // kappa_j and the panels of positions [begin, begin + length), channels [c0, c0 + width).
  // kappa_j and F are what the window kernel's reframe computes (kernels.h): the keys' maximum per
  // channel, and each key's exp(k - max). Channels past width are 0.
  void key_block_factors(std::size_t begin, std::size_t length, std::size_t c0, std::size_t width,
                         ChannelBlockScratch& s) const {
    constexpr std::size_t kGroup = kernels::kF32GroupRows;
    const std::size_t groups = kernels::f32_packed_rows(width) / kGroup;
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t first = g * kGroup, n = std::min(kGroup, width - first);
      float* weighted = panel(s, g, length);
      float* f = panel(s, groups + g, length);
      for (std::size_t i = 0; i < length; ++i) {
        s.key_rows[i] = key_row(begin + i, c0) + first;
        s.factor_rows[i] = f + i * kGroup;
      }
      ctx_.kernels.aft_window_reframe_f32(n, length, s.key_rows.data(), s.factor_rows.data(),
                                          s.key_max + first);
      for (std::size_t i = 0; i < length; ++i) {
        const float* v = value_row(begin + i, c0) + first;
        float* fv = weighted + i * kGroup;
        float* fi = f + i * kGroup;
        for (std::size_t c = 0; c < n; ++c) fv[c] = fi[c] * v[c];
        std::fill(fv + n, fv + kGroup, 0.0f);
        std::fill(fi + n, fi + kGroup, 0.0f);
      }
    }
  }

  // Merges key block j's partial states (N_j | D_j at n) into chunk row r's. Every row sees key
  // block 0: its state starts there, empty.
  void merge_key_block(std::size_t j, std::size_t r, const float* n, std::size_t c0,
                       std::size_t width, ChannelBlockScratch& s) const {
    constexpr double kEmpty = -std::numeric_limits<double>::infinity();
    const bool first = j == 0;
    const float row_max = bias_max_[r * key_blocks_ + j];
    const float* d = n + kernels::f32_packed_rows(width);
    double* m = s.m + state_row(r);
    double* a = s.a + state_row(r);
    double* b = s.b + state_row(r);
    std::size_t inexact = 0;
    for (std::size_t c = 0; c < width; ++c) inexact += !(d[c] >= kMinDenominator);  // NaN too
    if (inexact == 0) {
      (first ? start_row : merge_row)(width, row_max, s.key_max, n, d, m, a, b);
      return;
    }
    for (std::size_t c = 0; c < width; ++c) {
      const AftState partial = d[c] >= kMinDenominator
                                   ? AftState{double(row_max) + s.key_max[c], n[c], d[c]}
                                   : exact_partial(first_ + r, j * kKeyBlock, c0 + c);
      const AftState merged = first ? merge(kEmpty, 0.0, 0.0, partial.m, partial.a, partial.b)
                                    : merge(m[c], a[c], b[c], partial.m, partial.a, partial.b);
      m[c] = merged.m;
      a[c] = merged.a;
      b[c] = merged.b;
    }
  }

  // The partial state of key block [begin, ...) for position t and channel c, summed by the
  // streaming accumulator.
  AftState exact_partial(std::size_t t, std::size_t begin, std::size_t c) const {
    AftState p{-std::numeric_limits<double>::infinity(), 0.0, 0.0};
    const std::size_t end = std::min(begin + kKeyBlock, t + 1);
    for (std::size_t tp = begin; tp < end; ++tp) {
      ctx_.kernels.aft_accumulate_f32(
          1, &p.m, &p.a, &p.b, key_row(tp, c - c % kChannelBlock) + c % kChannelBlock,
          value_row(tp, c - c % kChannelBlock) + c % kChannelBlock,
          bias_.scalar(static_cast<int64_t>(t), static_cast<int64_t>(tp)));
    }
    return p;
  }

  const ExecContext& ctx_;
  const PositionBias& bias_;
  const Tensor& q_;
  const Tensor& key_;
  const Tensor& value_;
  MixerState& state_;
  const Tensor& out_;
  const std::size_t rows_, d_;
  const std::size_t first_;      // position of chunk row 0
  const std::size_t positions_;  // every position so far, this chunk's included
  const std::size_t key_blocks_;
  const std::size_t bias_stride_;
  float* exp_bias_ = nullptr;  // E: chunk rows, bias_stride_ apart, indexed by position
  float* bias_max_ = nullptr;  // rho_j(t): chunk rows, key_blocks_ apart
};

}  // namespace

void run_full_prefill(const ExecContext& ctx, const PositionBias& bias, const Tensor& q,
                      const Tensor& key, const Tensor& value, MixerState& state,
                      const Tensor& out) {
  FullPrefill(ctx, bias, q, key, value, state, out).run();
}

}  // namespace aft
