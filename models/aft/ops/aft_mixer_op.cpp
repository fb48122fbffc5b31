// The AFT operator, streaming: each token updates the layer's state and reads its weighted average
// (docs/architecture.md, "The AFT mixer"). Prefill and decode run this same code: threads take
// whole channel blocks (channel_blocked_rows.h), each block runs its tokens in order. Narrow
// models' prefill also cuts the positions into segments (a scan, run_segments); prompts that
// every position of sees whole (AFT-full, an AFT-local prompt's first window) go to the matrix
// products of aft_full_prefill.cpp.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "aft_full_prefill.h"
#include "aft_mixer_op.h"
#include "aft_state_merge.h"
#include "engine/runtime/parallel.h"
#include "exp_nonpositive.h"
#include "models/aft/channel_blocked_rows.h"
#include "models/aft/position_bias.h"
#include "models/aft/session_state.h"
#include "models/aft/state_rollback.h"
#include "scan_partials.h"

namespace aft {
namespace {

using Blocks = ChannelBlockedRows;

StateRollback* rollback_of(const ExecContext& ctx, std::size_t row) {
  return static_cast<StateRollback*>(ctx.rollback_of(row));
}

// For a bias shared by the channels: each chunk row's window weights exp(w - top), oldest entry
// first, and top, the row's largest bias. Computed once per chunk, not once per channel block.
struct SharedWindowWeights {
  std::size_t stride = 0;  // floats per row: the chunk's largest window
  std::vector<float> e;
  std::vector<float> top;
};

// One channel block's state: global sums, frame, and ring rows (block `ring_block` of those rows,
// position p at row p % capacity). The session's own, or a segment's private copy.
struct BlockState {
  double *m, *a, *b;
  float* frame;
  ChannelBlockedRows *keys, *values, *scaled;
  std::size_t ring_block;
  std::size_t capacity;
  // The session's rollback, told before the block's scaled keys are rescaled; null for a copy.
  StateRollback* rollback = nullptr;
};

// A segment's private ring and sums for one channel block (per thread, in the session's scratch).
struct SegmentRing {
  ChannelBlockedRows keys, values, scaled;
  alignas(64) double m[ChannelBlockedRows::kBlock], a[ChannelBlockedRows::kBlock],
      b[ChannelBlockedRows::kBlock];
  alignas(64) float frame[ChannelBlockedRows::kBlock];
};

// The window's entries t' = first..t of one channel block, oldest first, with their weights.
// Per thread, in the session's scratch: the vectors keep their capacity from token to token.
struct Window {
  std::size_t entries = 0;
  int64_t first = 0;
  std::vector<const float*> keys, values;
  std::vector<float*> scaled;
  std::vector<const float*> e_rows;  // per-channel biases: a weight row per entry
};

class AftMixerOp final : public Op {
 public:
  AftMixerOp(std::size_t layer, std::size_t key_width, const PositionBias& bias)
      : layer_(layer), key_width_(key_width), bias_(bias), window_(bias.window()) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    if (!ctx.one_sequence()) {
      prepare(ctx, out.rows);
      run_batch(ctx, inputs, out, CallSplit{ctx.n_threads});
      return;
    }
    MixerState& state = layer_state(ctx, 0, layer_);
    // Several tokens that see every earlier position with a bias shared by the channels (AFT-full,
    // or a local model's first window): matrix products instead of one step per pair.
    if (out.rows > 1 && end_position(ctx, out.rows) <= window_ && !bias_.per_channel(0) &&
        key_width_ == out.width) {
      run_full_prefill(ctx, bias_, inputs[0], inputs[1], inputs[2], state, out);
      state.frame_valid = false;  // it stores keys without the window's frame
      return;
    }
    const SharedWindowWeights* shared = nullptr;
    if (window_ > 0 && !bias_.per_channel_max()) {
      SharedWindowWeights& weights = ctx.scratch.local<SharedWindowWeights>();
      fill_shared_weights(ctx, out.rows, weights);
      shared = &weights;
    }
    // A ring (local, conv) or no window (simple); AFT-full keeps every position instead.
    const bool ring = window_ == 0 || static_cast<int64_t>(state.capacity) == window_;
    if (ring && out.width < kSegmentedBelowWidth && out.rows > kSegmentRows) {
      run_segments(ctx, inputs, out, state, shared);
      return;
    }
    const bool reframe = !state.frame_valid;
    parallel_ranges(Blocks::blocks_of(out.width), 1, ctx.n_threads, block_cost(ctx, out.rows),
                    [&](std::size_t begin, std::size_t end) {
                      for (std::size_t block = begin; block < end; ++block) {
                        const BlockState view = session_block(state, block, rollback_of(ctx, 0));
                        run_block(ctx, inputs, out, view, shared, reframe, block, 0, out.rows);
                      }
                    });
    state.frame_valid = true;
  }

  void prepare(const ExecContext& ctx, std::size_t rows) const override {
    // Each sequence once: a sequence's rows share its state.
    for (std::size_t r = 0; r < (ctx.one_sequence() ? 1 : rows); ++r) {
      MixerState& state = layer_state(ctx, r, layer_);
      state.reframe_pending = !state.frame_valid;
      state.frame_valid = true;
    }
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
    team_ranges(Blocks::blocks_of(out.width), 1, team, block_cost(ctx, out.rows),
                [&](std::size_t begin, std::size_t end) {
                  const SharedWindowWeights* shared = nullptr;
                  if (window_ > 0 && !bias_.per_channel_max()) {
                    // Each thread with blocks its own copy: one row, an exp per entry.
                    SharedWindowWeights& weights = ctx.scratch.local<SharedWindowWeights>();
                    fill_shared_weights(ctx, out.rows, weights);
                    shared = &weights;
                  }
                  for (std::size_t block = begin; block < end; ++block) {
                    run_block(ctx, inputs, out, session_block(state, block, rollback_of(ctx, 0)),
                              shared, state.reframe_pending, block, 0, out.rows);
                  }
                });
  }

 private:
  // Per channel block and token: one accumulator step (about 10 units) per windowed position.
  std::size_t block_cost(const ExecContext& ctx, std::size_t rows) const {
    return Blocks::kBlock * rows * 10 *
           (1 + static_cast<std::size_t>(std::min<int64_t>(window_, end_position(ctx, rows))));
  }

  // One past the last position of the call's rows.
  static int64_t end_position(const ExecContext& ctx, std::size_t rows) {
    if (ctx.one_sequence()) return ctx.position_of(0) + static_cast<int64_t>(rows);
    int64_t end = 0;
    for (std::size_t r = 0; r < rows; ++r) end = std::max(end, ctx.position_of(r) + 1);
    return end;
  }

  // A batch decode, after prepare(): row r is the next token of sequence r, on its own state;
  // threads take (row, channel block) units, and each runs as that sequence's decode would. In a
  // region each thread weighs the rows' windows itself, as one token's threads do.
  template <class Split>
  void run_batch(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                 const Split& split) const {
    const SharedWindowWeights* shared = nullptr;
    if (window_ > 0 && !bias_.per_channel_max()) {
      SharedWindowWeights& weights = ctx.scratch.local<SharedWindowWeights>();
      fill_shared_weights(ctx, out.rows, weights);
      shared = &weights;
    }
    const std::size_t blocks = Blocks::blocks_of(out.width);
    split.ranges(out.rows * blocks, 1, block_cost(ctx, out.rows) / out.rows,
                 [&](std::size_t u0, std::size_t u1) {
                   for (std::size_t u = u0; u < u1; ++u) {
                     const std::size_t r = u / blocks, block = u % blocks;
                     MixerState& state = layer_state(ctx, r, layer_);
                     run_block(ctx, inputs, out, session_block(state, block, rollback_of(ctx, r)),
                               shared, state.reframe_pending, block, r, r + 1);
                   }
                 });
  }

  void fill_shared_weights(const ExecContext& ctx, std::size_t rows,
                           SharedWindowWeights& weights) const {
    weights.stride = static_cast<std::size_t>(std::min<int64_t>(window_, end_position(ctx, rows)));
    weights.e.resize(rows * weights.stride);
    weights.top.resize(rows);
    // Per row: a bias and an exp per entry. The row whole (a copy out of a table), and the exp
    // that vectorizes, as the AFT-full prefill's (std::exp, a library call per entry, took about
    // 5% of the AFT-local mixer's time in enwik8-local's pp512).
    parallel_ranges(rows, 1, ctx.n_threads, weights.stride * 8,
                    [&](std::size_t r0, std::size_t r1) {
                      for (std::size_t r = r0; r < r1; ++r) {
                        const int64_t t = ctx.position_of(r);
                        const int64_t first = std::max<int64_t>(0, t - window_ + 1);
                        float* e = weights.e.data() + r * weights.stride;
                        bias_.row(t, first, t + 1, e);
                        weights.top[r] = exp_minus_max(e, static_cast<std::size_t>(t - first + 1));
                      }
                    });
  }

  static BlockState session_block(MixerState& state, std::size_t block, StateRollback* rollback) {
    const std::size_t c0 = block * Blocks::kBlock;
    return BlockState{state.m.data() + c0, state.a.data() + c0,
                      state.b.data() + c0, state.frame.data() + c0,
                      &state.keys,         &state.values,
                      &state.scaled_keys,  block,
                      state.capacity,      rollback};
  }

  // The chunk as a scan over segments of kSegmentRows positions: (segment, channel block) units.
  // First each segment's partial sums of the positions that leave the window during it (for
  // AFT-simple: its own positions). Then each unit starts from the session's sums merged with the
  // partials of the segments before it, in order, and from a private ring filled with the window
  // before its first token, and runs its tokens. The cut depends on the chunk only: results are
  // the same for any thread count. The session's ring gets the chunk's last positions after.
  void run_segments(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                    MixerState& state, const SharedWindowWeights* shared) const {
    const kernels::KernelTable& k = ctx.kernels;
    const std::size_t d = out.width;
    const std::size_t blocks = Blocks::blocks_of(d);
    const std::size_t segments = (out.rows + kSegmentRows - 1) / kSegmentRows;
    const std::size_t units = segments * blocks;  // unit u: segment u / blocks, block u % blocks
    // Per unit: its segment's partial (m, a, b); the last segment's holds the final state.
    const ScanPartials partials(ctx.scratch.local<ScanPartialSums>(), units);
    const int64_t first_position = ctx.position_of(0);
    const auto segment_rows = [&](std::size_t segment) {
      const std::size_t r0 = segment * kSegmentRows;
      return std::make_pair(r0, std::min(out.rows, r0 + kSegmentRows));
    };
    // The key and value of channel block `block` at position p: a chunk row, or the ring's.
    const auto position_rows = [&](int64_t p, std::size_t block, float* key_buffer,
                                   const float** key, const float** value) {
      const std::size_t c0 = block * Blocks::kBlock;
      if (p >= first_position) {
        const auto r = static_cast<std::size_t>(p - first_position);
        store_key(inputs[1].row(r), key_buffer, c0, Blocks::block_width(d, block), d);
        *key = key_buffer;
        *value = inputs[2].row(r) + c0;
      } else {
        const std::size_t slot = static_cast<std::size_t>(p) % state.capacity;
        *key = state.keys.row(slot, block);
        *value = state.values.row(slot, block);
      }
    };

    // Per unit: an accumulator step (about 10 units of work) per position and channel.
    const std::size_t cost = Blocks::kBlock * kSegmentRows * 10;
    parallel_ranges(units, 1, ctx.n_threads, cost, [&](std::size_t u0, std::size_t u1) {
      alignas(64) float key_buffer[Blocks::kBlock];
      for (std::size_t u = u0; u < u1; ++u) {
        const std::size_t segment = u / blocks;
        if (segment + 1 == segments) continue;  // nothing comes after it
        const std::size_t block = u % blocks;
        const std::size_t n = Blocks::block_width(d, block);
        partials.clear(u, n);
        const auto [r0, r1] = segment_rows(segment);
        for (std::size_t r = r0; r < r1; ++r) {
          const int64_t leaving = first_position + static_cast<int64_t>(r) - window_;
          if (leaving < 0) continue;
          const float *key, *value;
          position_rows(leaving, block, key_buffer, &key, &value);
          k.aft_accumulate_f32(n, partials.m(u), partials.a(u), partials.b(u), key, value, 0.0f);
        }
      }
    });
    // Per unit: a window step per position and channel (the window's length, about 4 units each).
    const std::size_t window_cost =
        Blocks::kBlock * kSegmentRows * (10 + 4 * static_cast<std::size_t>(window_));
    parallel_ranges(units, 1, ctx.n_threads, window_cost, [&](std::size_t u0, std::size_t u1) {
      SegmentRing& ring = ctx.scratch.local<SegmentRing>();
      alignas(64) float key_buffer[Blocks::kBlock];
      // All three checked: a resize that ran out of memory may have left one of them behind.
      if (window_ > 0 &&
          (ring.keys.rows() != state.capacity || ring.values.rows() != state.capacity ||
           ring.scaled.rows() != state.capacity)) {
        ring.keys.resize(state.capacity, Blocks::kBlock);
        ring.values.resize(state.capacity, Blocks::kBlock);
        ring.scaled.resize(state.capacity, Blocks::kBlock);
      }
      for (std::size_t u = u0; u < u1; ++u) {
        const std::size_t segment = u / blocks;
        const std::size_t block = u % blocks;
        const std::size_t c0 = block * Blocks::kBlock;
        const std::size_t n = Blocks::block_width(d, block);
        std::copy(state.m.data() + c0, state.m.data() + c0 + n, ring.m);
        std::copy(state.a.data() + c0, state.a.data() + c0 + n, ring.a);
        std::copy(state.b.data() + c0, state.b.data() + c0 + n, ring.b);
        // The same block's units of the segments before, in order.
        for (std::size_t earlier = block; earlier < u; earlier += blocks) {
          merge_states(n, partials.m(earlier), partials.a(earlier), partials.b(earlier), ring.m,
                       ring.a, ring.b);
        }
        const auto [r0, r1] = segment_rows(segment);
        // The ring before the segment's first token: its window and the position leaving at it.
        const int64_t t0 = first_position + static_cast<int64_t>(r0);
        for (int64_t p = std::max<int64_t>(0, t0 - window_); p < t0; ++p) {
          const float *key, *value;
          position_rows(p, block, key_buffer, &key, &value);
          const std::size_t slot = static_cast<std::size_t>(p) % state.capacity;
          std::copy(key, key + n, ring.keys.row(slot, 0));
          std::copy(value, value + n, ring.values.row(slot, 0));
        }
        BlockState view{ring.m,       ring.a,       ring.b, ring.frame,    &ring.keys,
                        &ring.values, &ring.scaled, 0,      state.capacity};
        run_block(ctx, inputs, out, view, shared, true, block, r0, r1);
        if (segment + 1 == segments) partials.store(u, n, ring.m, ring.a, ring.b);
      }
    });
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t c0 = block * Blocks::kBlock;
      const std::size_t n = Blocks::block_width(d, block);
      partials.load((segments - 1) * blocks + block, n, state.m.data() + c0, state.a.data() + c0,
                    state.b.data() + c0);
      if (window_ == 0) continue;
      // The chunk's last positions into the session's ring; its frame is rebuilt on the next call.
      const int64_t end = first_position + static_cast<int64_t>(out.rows);
      for (int64_t p = std::max(first_position, end - window_); p < end; ++p) {
        const auto r = static_cast<std::size_t>(p - first_position);
        const std::size_t slot = static_cast<std::size_t>(p) % state.capacity;
        store_key(inputs[1].row(r), state.keys.row(slot, block), c0, n, d);
        std::memcpy(state.values.row(slot, block), inputs[2].row(r) + c0, n * sizeof(float));
      }
    }
    state.frame_valid = window_ == 0;
  }

  // Chunk rows [r_begin, r_end) for channel block `block`, on the state v. reframe: rebuild the
  // window's frame before the first token.
  void run_block(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                 const BlockState& v, const SharedWindowWeights* shared, bool reframe,
                 std::size_t block, std::size_t r_begin, std::size_t r_end) const {
    const kernels::KernelTable& k = ctx.kernels;
    const Tensor& q = inputs[0];
    const Tensor& key = inputs[1];
    const Tensor& value = inputs[2];
    const std::size_t c0 = block * Blocks::kBlock;
    const std::size_t n = Blocks::block_width(out.width, block);
    double* const m = v.m;
    double* const a = v.a;
    double* const b = v.b;
    // Per token: the window sums, and the largest bias of the window per channel.
    alignas(64) float sa[Blocks::kBlock], sb[Blocks::kBlock], top_row[Blocks::kBlock];
    Window& w = ctx.scratch.local<Window>();

    for (std::size_t r = r_begin; r < r_end; ++r) {
      const int64_t t = ctx.position_of(r);
      if (window_ == 0) {
        k.aft_accumulate_f32(n, m, a, b, key.row(r) + c0, value.row(r) + c0, 0.0f);
        k.aft_output_f32(n, q.row(r) + c0, a, b, out.row(r) + c0);
        continue;
      }
      // The position leaving the window joins the global sums with bias 0; its row is reused.
      const std::size_t slot = static_cast<std::size_t>(t) % v.capacity;
      float* key_slot = v.keys->row(slot, v.ring_block);
      float* value_slot = v.values->row(slot, v.ring_block);
      if (t >= window_) k.aft_accumulate_f32(n, m, a, b, key_slot, value_slot, 0.0f);
      store_key(key.row(r), key_slot, c0, n, out.width);
      copy_block_row(value.row(r) + c0, value_slot, n);

      window_rows(v, t, w);
      if (reframe) {
        save_scaled(v, block);
        k.aft_window_reframe_f32(n, w.entries, w.keys.data(), w.scaled.data(), v.frame);
        reframe = false;
      } else {
        const uint64_t raised = raised_lanes(n, key_slot, v.frame);
        if (raised != 0 && v.rollback) v.rollback->save_scaled_lanes(layer_, block, raised);
        k.aft_window_push_f32(n, w.entries - 1, w.scaled.data(), v.frame, w.keys[w.entries - 1],
                              w.scaled[w.entries - 1]);
      }
      const float* e = nullptr;
      const float* max_row = nullptr;
      if (shared) {
        e = shared->e.data() + r * shared->stride;
        std::fill(top_row, top_row + n, shared->top[r]);
        max_row = top_row;
      } else {
        w.e_rows.resize(w.entries);
        for (std::size_t j = 0; j < w.entries; ++j) {
          w.e_rows[j] = bias_.per_channel_exp(t - (w.first + static_cast<int64_t>(j))) + c0;
        }
        max_row = bias_.per_channel_max() + c0;
      }
      bool stable = window_sums(k, w, e, n, sa, sb);
      if (!stable) {
        // Keys far below a stale reference: rebuild the frame from the window's own maximum.
        save_scaled(v, block);
        k.aft_window_reframe_f32(n, w.entries, w.keys.data(), w.scaled.data(), v.frame);
        stable = window_sums(k, w, e, n, sa, sb);
      }
      if (stable) {
        k.aft_window_output_f32(n, q.row(r) + c0, m, a, b, v.frame, max_row, sa, sb,
                                out.row(r) + c0);
      } else {
        exact_window_output(k, w, v, t, q.row(r) + c0, n, c0, out.row(r) + c0);
      }
    }
  }

  // Before the block's scaled keys are rescaled: the session's rollback keeps them.
  void save_scaled(const BlockState& v, std::size_t block) const {
    if (v.rollback) v.rollback->save_scaled(layer_, block);
  }

  // The lanes whose window pushing key k rescales: above the frame r (or NaN).
  static uint64_t raised_lanes(std::size_t n, const float* k, const float* r) {
    static_assert(Blocks::kBlock <= 64, "a block's lanes are the bits of a uint64_t");
    // Seldom any (the frame has headroom): first a test the compiler vectorizes, the loop of
    // branches over the lanes was a third of run_block's own time in enwik8-local's prompts.
    int any = 0;
    for (std::size_t c = 0; c < n; ++c) any |= !(k[c] <= r[c]);
    if (any == 0) return 0;
    uint64_t lanes = 0;
    for (std::size_t c = 0; c < n; ++c) {
      if (!(k[c] <= r[c])) lanes |= uint64_t{1} << c;
    }
    return lanes;
  }

  // Points w at the ring rows of the window of query position t.
  void window_rows(const BlockState& v, int64_t t, Window& w) const {
    w.first = std::max<int64_t>(0, t - window_ + 1);
    w.entries = static_cast<std::size_t>(t - w.first + 1);
    w.keys.resize(w.entries);
    w.values.resize(w.entries);
    w.scaled.resize(w.entries);
    // The block's rows are consecutive (channel_blocked_rows.h): its first row of each array, and
    // the window's pointers written through locals, which the compiler keeps in registers.
    const float* const keys = v.keys->row(0, v.ring_block);
    const float* const values = v.values->row(0, v.ring_block);
    float* const scaled = v.scaled->row(0, v.ring_block);
    const float** const key_rows = w.keys.data();
    const float** const value_rows = w.values.data();
    float** const scaled_rows = w.scaled.data();
    std::size_t slot = static_cast<std::size_t>(w.first) % v.capacity;
    for (std::size_t j = 0; j < w.entries; ++j) {
      const std::size_t offset = slot * Blocks::kBlock;
      key_rows[j] = keys + offset;
      value_rows[j] = values + offset;
      scaled_rows[j] = scaled + offset;
      if (++slot == v.capacity) slot = 0;
    }
  }

  // e: the shared weights of the window's entries; null for per-channel biases (w.e_rows).
  static bool window_sums(const kernels::KernelTable& k, const Window& w, const float* e,
                          std::size_t n, float* sa, float* sb) {
    if (e == nullptr) {
      return k.aft_window_sums_biased_f32(n, w.entries, w.e_rows.data(), w.scaled.data(),
                                          w.values.data(), sa, sb);
    }
    return k.aft_window_sums_f32(n, w.entries, e, w.scaled.data(), w.values.data(), sa, sb);
  }

  // The reference form, for windows whose frame cannot represent them (keys and biases spread by
  // more than the float range): a copy of (m, a, b) absorbs each entry with an exp of its own.
  void exact_window_output(const kernels::KernelTable& k, const Window& w, const BlockState& v,
                           int64_t t, const float* q, std::size_t n, std::size_t c0,
                           float* y) const {
    alignas(64) double wm[Blocks::kBlock], wa[Blocks::kBlock], wb[Blocks::kBlock];
    std::memcpy(wm, v.m, n * sizeof(double));
    std::memcpy(wa, v.a, n * sizeof(double));
    std::memcpy(wb, v.b, n * sizeof(double));
    for (std::size_t j = 0; j < w.entries; ++j) {
      const int64_t tp = w.first + static_cast<int64_t>(j);
      if (const float* row = bias_.per_channel(t - tp)) {
        k.aft_accumulate_biased_f32(n, wm, wa, wb, w.keys[j], w.values[j], row + c0);
      } else {
        k.aft_accumulate_f32(n, wm, wa, wb, w.keys[j], w.values[j], bias_.scalar(t, tp));
      }
    }
    k.aft_output_f32(n, q, wa, wb, y);
  }

  // n floats of a channel block's row. A whole block as a copy of fixed size, which the compiler
  // makes vector moves: a copy of n floats became `rep movsq`, whose start-up was half of
  // run_block's own time in enwik8-local's prompts.
  static void copy_block_row(const float* from, float* to, std::size_t n) {
    if (n == Blocks::kBlock) {
      std::memcpy(to, from, Blocks::kBlock * sizeof(float));
    } else {
      std::memcpy(to, from, n * sizeof(float));
    }
  }

  // Keys with one channel per head are expanded to the head's channels once, when stored.
  void store_key(const float* key, float* slot, std::size_t c0, std::size_t n,
                 std::size_t d) const {
    if (key_width_ == d) {
      copy_block_row(key + c0, slot, n);
      return;
    }
    const std::size_t channels_per_head = d / key_width_;
    for (std::size_t c = 0; c < n; ++c) slot[c] = key[(c0 + c) / channels_per_head];
  }

  std::size_t layer_;
  std::size_t key_width_;
  const PositionBias& bias_;
  int64_t window_;
};

}  // namespace

std::unique_ptr<Op> make_aft_mixer_op(std::size_t layer, std::size_t key_width,
                                      const PositionBias& bias) {
  return std::make_unique<AftMixerOp>(layer, key_width, bias);
}

}  // namespace aft
