// The AFT mixer as an op of the graph (aft_mixer_op.cpp).
#pragma once

#include <cstddef>
#include <memory>

#include "engine/runtime/graph.h"

namespace aft {

class PositionBias;

// inputs (q, k, v) -> sigmoid(q) * (weighted average of past v), updating layer `layer`'s state.
// k has key_width channels: d, or one per head (shared by the head's channels).
std::unique_ptr<Op> make_aft_mixer_op(std::size_t layer, std::size_t key_width,
                                      const PositionBias& bias);

}  // namespace aft
