// The decay mixer (docs/aft-math.md, "The decay mixer"): AFT whose position bias is a learned
// per-channel exponential decay, RWKV-4's time mixing. Its state is the streaming accumulator
// (m, a, b) per channel and nothing else: as a token is read, the sums of the earlier ones are
// decayed by lambda = exp(decay), which in the running-max form is m -= lambda, and the token joins
// them; the token's own output sees itself with the bonus u instead. Threads take channel blocks;
// narrow models' prompts also cut the positions into segments, whose partial sums carry to the
// next ones decayed by the distance (run_segments). The cut depends on the chunk only: the same
// bits for any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "aft_state_merge.h"
#include "decay_mixer_op.h"
#include "engine/runtime/parallel.h"
#include "models/aft/channel_blocked_rows.h"
#include "models/aft/session_state.h"
#include "scan_partials.h"

namespace aft {
namespace {

using Blocks = ChannelBlockedRows;

// Per channel and token: two accumulator steps (about 10 units of work each).
constexpr std::size_t kStepCost = 20;

class DecayMixerOp final : public Op {
 public:
  DecayMixerOp(std::size_t layer, std::size_t width, const float* decay, const float* bonus)
      : layer_(layer), bonus_(bonus), lambda_(width) {
    for (std::size_t c = 0; c < width; ++c) lambda_[c] = std::exp(static_cast<double>(decay[c]));
  }

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    const std::size_t blocks = Blocks::blocks_of(out.width);
    if (!ctx.one_sequence()) {
      run_batch(ctx, inputs, out, CallSplit{ctx.n_threads});
      return;
    }
    MixerState& state = layer_state(ctx, 0, layer_);
    if (out.width < kSegmentedBelowWidth && out.rows > kSegmentRows) {
      run_segments(ctx, inputs, out, state);
      return;
    }
    parallel_ranges(blocks, 1, ctx.n_threads, Blocks::kBlock * kStepCost * out.rows,
                    [&](std::size_t begin, std::size_t end) {
                      for (std::size_t block = begin; block < end; ++block) {
                        run_block(ctx.kernels, inputs, out, state, block, 0, out.rows);
                      }
                    });
  }

  // One token, or a batch's (a token per sequence): run()'s split.
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    if (!ctx.one_sequence()) {
      run_batch(ctx, inputs, out, MemberSplit{team});
      return;
    }
    if (out.rows != 1) {
      Op::run_in_team(ctx, inputs, out, team);
      return;
    }
    MixerState& state = layer_state(ctx, 0, layer_);
    team_ranges(Blocks::blocks_of(out.width), 1, team, Blocks::kBlock * kStepCost,
                [&](std::size_t begin, std::size_t end) {
                  for (std::size_t block = begin; block < end; ++block) {
                    run_block(ctx.kernels, inputs, out, state, block, 0, 1);
                  }
                });
  }

 private:
  // A batch decode: row r is the next token of sequence r; threads take (row, block) units.
  template <class Split>
  void run_batch(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                 const Split& split) const {
    const std::size_t blocks = Blocks::blocks_of(out.width);
    split.ranges(
        out.rows * blocks, 1, Blocks::kBlock * kStepCost, [&](std::size_t u0, std::size_t u1) {
          for (std::size_t u = u0; u < u1; ++u) {
            const std::size_t r = u / blocks;
            run_block(ctx.kernels, inputs, out, layer_state(ctx, r, layer_), u % blocks, r, r + 1);
          }
        });
  }

  // Rows [r0, r1) of channel block `block` on the sums (m, a, b) of the block's channels.
  void run_rows(const kernels::KernelTable& k, const std::vector<Tensor>& inputs, const Tensor& out,
                double* m, double* a, double* b, std::size_t block, std::size_t r0,
                std::size_t r1) const {
    const std::size_t c0 = block * Blocks::kBlock;
    const std::size_t n = Blocks::block_width(out.width, block);
    alignas(64) double bm[Blocks::kBlock], ba[Blocks::kBlock], bb[Blocks::kBlock];
    for (std::size_t r = r0; r < r1; ++r) {
      const float* key = inputs[1].row(r) + c0;
      const float* value = inputs[2].row(r) + c0;
      // The token's output: the earlier tokens' sums and itself with the bonus u.
      std::memcpy(bm, m, n * sizeof(double));
      std::memcpy(ba, a, n * sizeof(double));
      std::memcpy(bb, b, n * sizeof(double));
      k.aft_accumulate_biased_f32(n, bm, ba, bb, key, value, bonus_ + c0);
      k.aft_output_f32(n, inputs[0].row(r) + c0, ba, bb, out.row(r) + c0);
      decay_and_add(k, n, c0, m, a, b, key, value);
    }
  }

  // m of sums `distance` tokens later (an infinite lambda forgets everything: -inf, never NaN).
  double decayed(double m, std::size_t distance, std::size_t c) const {
    return distance == 0 ? m : m - static_cast<double>(distance) * lambda_[c];
  }

  // The sums one token later: the earlier tokens decayed by lambda, then the token with bias 0.
  void decay_and_add(const kernels::KernelTable& k, std::size_t n, std::size_t c0, double* m,
                     double* a, double* b, const float* key, const float* value) const {
    for (std::size_t c = 0; c < n; ++c) m[c] -= lambda_[c0 + c];
    k.aft_accumulate_f32(n, m, a, b, key, value, 0.0f);
  }

  void run_block(const kernels::KernelTable& k, const std::vector<Tensor>& inputs,
                 const Tensor& out, MixerState& state, std::size_t block, std::size_t r0,
                 std::size_t r1) const {
    const std::size_t c0 = block * Blocks::kBlock;
    run_rows(k, inputs, out, state.m.data() + c0, state.a.data() + c0, state.b.data() + c0, block,
             r0, r1);
    remember_input(inputs, out.width, state, block, r1 - 1);
  }

  // With token shift, the layer's input of row r (its sequence's last) is the next token's x_{t-1}.
  static void remember_input(const std::vector<Tensor>& inputs, std::size_t width,
                             MixerState& state, std::size_t block, std::size_t r) {
    if (inputs.size() < 4) return;
    const std::size_t c0 = block * Blocks::kBlock;
    std::memcpy(state.last_input.data() + c0, inputs[3].row(r) + c0,
                Blocks::block_width(width, block) * sizeof(float));
  }

  // The chunk as a scan over segments of kSegmentRows positions: (segment, channel block) units.
  // First each segment's partial sums, as of its last token. Then each unit starts from the
  // session's sums and the partials of the segments before it, each decayed by the positions
  // between, and runs its tokens; the last segment's unit leaves the session's new sums.
  void run_segments(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                    MixerState& state) const {
    const kernels::KernelTable& k = ctx.kernels;
    const std::size_t blocks = Blocks::blocks_of(out.width);
    const std::size_t segments = (out.rows + kSegmentRows - 1) / kSegmentRows;
    const std::size_t units = segments * blocks;  // unit u: segment u / blocks, block u % blocks
    const ScanPartials partials(ctx.scratch.local<ScanPartialSums>(), units);
    const auto segment_end = [&](std::size_t segment) {
      return std::min(out.rows, (segment + 1) * kSegmentRows);
    };

    parallel_ranges(units, 1, ctx.n_threads, Blocks::kBlock * kSegmentRows * kStepCost / 2,
                    [&](std::size_t u0, std::size_t u1) {
                      for (std::size_t u = u0; u < u1; ++u) {
                        const std::size_t segment = u / blocks;
                        if (segment + 1 == segments) continue;  // nothing comes after it
                        const std::size_t block = u % blocks;
                        const std::size_t c0 = block * Blocks::kBlock;
                        const std::size_t n = Blocks::block_width(out.width, block);
                        partials.clear(u, n);
                        for (std::size_t r = segment * kSegmentRows; r < segment_end(segment);
                             ++r) {
                          decay_and_add(k, n, c0, partials.m(u), partials.a(u), partials.b(u),
                                        inputs[1].row(r) + c0, inputs[2].row(r) + c0);
                        }
                      }
                    });
    parallel_ranges(units, 1, ctx.n_threads, Blocks::kBlock * kSegmentRows * kStepCost,
                    [&](std::size_t u0, std::size_t u1) {
                      alignas(64) double m[Blocks::kBlock], a[Blocks::kBlock], b[Blocks::kBlock],
                          pm[Blocks::kBlock];
                      for (std::size_t u = u0; u < u1; ++u) {
                        const std::size_t segment = u / blocks;
                        const std::size_t block = u % blocks;
                        const std::size_t c0 = block * Blocks::kBlock;
                        const std::size_t n = Blocks::block_width(out.width, block);
                        const std::size_t r0 = segment * kSegmentRows;
                        // The session's sums, r0 tokens later.
                        for (std::size_t c = 0; c < n; ++c) {
                          m[c] = decayed(state.m[c0 + c], r0, c0 + c);
                        }
                        std::copy(state.a.data() + c0, state.a.data() + c0 + n, a);
                        std::copy(state.b.data() + c0, state.b.data() + c0 + n, b);
                        for (std::size_t before = 0; before < segment; ++before) {
                          const std::size_t unit = before * blocks + block;
                          const std::size_t later = r0 - segment_end(before);
                          for (std::size_t c = 0; c < n; ++c) {
                            pm[c] = decayed(partials.m(unit)[c], later, c0 + c);
                          }
                          merge_states(n, pm, partials.a(unit), partials.b(unit), m, a, b);
                        }
                        run_rows(k, inputs, out, m, a, b, block, r0, segment_end(segment));
                        if (segment + 1 == segments) partials.store(u, n, m, a, b);
                      }
                    });
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t c0 = block * Blocks::kBlock;
      const std::size_t n = Blocks::block_width(out.width, block);
      partials.load((segments - 1) * blocks + block, n, state.m.data() + c0, state.a.data() + c0,
                    state.b.data() + c0);
      remember_input(inputs, out.width, state, block, out.rows - 1);
    }
  }

  std::size_t layer_;
  const float* bonus_;
  std::vector<double> lambda_;
};

}  // namespace

std::unique_ptr<Op> make_decay_mixer_op(std::size_t layer, std::size_t width, const float* decay,
                                        const float* bonus) {
  return std::make_unique<DecayMixerOp>(layer, width, decay, bonus);
}

}  // namespace aft
