// The AFT operator for a chunk of several tokens as matrix products (AFT-full prefill), instead of
// one streaming accumulator step per pair of positions (aft_mixer_op.cpp).
#pragma once

#include "engine/runtime/graph.h"
#include "engine/runtime/tensor.h"
#include "models/aft/position_bias.h"
#include "models/aft/session_state.h"

namespace aft {

// out[r] = sigmoid(q[r]) * N / D for the token at position t = ctx.position + r, with
//   N[c] = sum_{t' <= t} exp(w[t, t'] + K[t', c]) V[t', c],  D likewise without V,
// over the keys and values of earlier calls (state rows 0 .. ctx.position - 1) and of this chunk,
// whose rows it stores (state rows ctx.position + r) for the calls after it.
// Requires what AFT-full guarantees: every position so far is in the window, at its own state row
// (reserved), with a bias shared by all channels; keys have out.width channels.
void run_full_prefill(const ExecContext& ctx, const PositionBias& bias, const Tensor& q,
                      const Tensor& key, const Tensor& value, MixerState& state, const Tensor& out);

}  // namespace aft
