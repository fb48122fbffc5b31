// The decay mixer and its token shift as ops of the graph (decay_mixer_op.cpp,
// token_shift_op.cpp; docs/aft-math.md, "The decay mixer").
#pragma once

#include <cstddef>
#include <memory>

#include "engine/runtime/graph.h"

namespace aft {

// inputs (q, k, v[, x]) -> sigmoid(q) * (the decayed average of past v, the token's own with the
// bonus), updating layer `layer`'s sums. decay, bonus: the layer's [width] tensors (lambda =
// exp(decay)). x, given when the layer shifts tokens: the mixer's input, whose last row per
// sequence the state keeps for the next call's token_shift op.
std::unique_ptr<Op> make_decay_mixer_op(std::size_t layer, std::size_t width, const float* decay,
                                        const float* bonus);

// Which of a layer's inputs a token shift mixes: the mixer's (the decay mixer op remembers its
// last row) or the channel mixing feed-forward's (the last token shift op of the feed-forward
// remembers it: `remembers`).
enum class ShiftedInput { Mixer, FeedForward };

// x -> mu x_t + (1 - mu) x_{t-1} per channel, x_{t-1} of a call's first token (of each sequence in
// a batch) being the layer's remembered input (zero at the start of a sequence). With
// `remembers`, the op then keeps the last row of x (per sequence) as the remembered input.
std::unique_ptr<Op> make_token_shift_op(std::size_t layer, ShiftedInput input, const float* mu,
                                        bool remembers = false);

}  // namespace aft
