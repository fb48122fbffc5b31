// What a session remembers between calls: the position and, per layer, the AFT mixer's streaming
// state (docs/architecture.md). Self-contained: copying it copies the sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "channel_blocked_rows.h"
#include "engine/format/aligned_buffer.h"
#include "engine/runtime/graph.h"
#include "engine/runtime/sequence.h"

namespace aft {

struct MixerState {
  // Global accumulators over the positions outside the window (bias 0), per channel:
  // m the running max of the keys, a = sum exp(k - m) v, b = sum exp(k - m). float64: they sum
  // every position that ever left the window, without end for AFT-simple and AFT-conv
  // (kernels.h, aft_accumulate_f32).
  AlignedDoubles m, a, b;
  // The last `capacity` keys (expanded to d channels) and values, position p at row p % capacity.
  // Full-bias models keep every position: their rows grow with the sequence.
  ChannelBlockedRows keys, values;
  // The window's frame (kernels.h, "AFT window"): per channel a reference >= every windowed key,
  // and each key row again as exp(key - frame), in the same rows as keys. frame_valid is false
  // when keys were stored without updating it (the matrix-product prefill of AFT-full).
  AlignedFloats frame;
  ChannelBlockedRows scaled_keys;
  bool frame_valid = true;
  // For a token decoded in one parallel region: frame_valid as it was before the token
  // (Op::prepare takes it, so that no thread of the region writes the flag).
  bool reframe_pending = false;
  std::size_t capacity = 0;
  // With token shift (the decay mixer): the layer's input of the sequence's last token, x_{t-1} of
  // the next (d floats, zero at the start; empty otherwise).
  AlignedFloats last_input;
  // With RWKV-4's channel mixing: the feed-forward's input of the last token, likewise.
  AlignedFloats ffn_last_input;

  void reset();
  // The rows of keys, values and scaled keys that positions [0, positions) need: a ring's
  // capacity once full. They grow with the sequence, up to the capacity: at least 256 KiB an
  // array, doubling, and from 1 MiB an array on to whole 2 MiB pages. Never fewer than it has.
  // The session grows them before a call (StateRollback::begin): ops find the rows they need.
  std::size_t rows_for(int64_t positions) const;
};

// The runtime's SequenceState (its position) and each layer's mixer state.
struct SessionState : SequenceState {
  std::vector<MixerState> layers;
};

// A layer's state of row's sequence in a call of an AFT graph: its sequences are AFT sessions'
// (engine/api/session.cpp).
inline MixerState& layer_state(const ExecContext& ctx, std::size_t row, std::size_t layer) {
  return static_cast<SessionState&>(ctx.state_of(row)).layers[layer];
}

}  // namespace aft
