#include "state_rollback.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace aft {
namespace {

using Blocks = ChannelBlockedRows;

}  // namespace

void StateRollback::begin(SessionState& state, std::size_t n) {
  state_ = &state;
  position_ = state.position;
  layers_.resize(state.layers.size());
  layers_begun_ = 0;
  try {
    for (; layers_begun_ < state.layers.size(); ++layers_begun_) {
      save_layer(state.layers[layers_begun_], layers_[layers_begun_], state.position, n);
    }
  } catch (...) {
    restore();
    throw;
  }
}

void StateRollback::save_layer(MixerState& state, Layer& saved, int64_t position, std::size_t n) {
  saved.m.assign(state.m.begin(), state.m.end());
  saved.a.assign(state.a.begin(), state.a.end());
  saved.b.assign(state.b.begin(), state.b.end());
  saved.frame.assign(state.frame.begin(), state.frame.end());
  saved.last_input.assign(state.last_input.begin(), state.last_input.end());
  saved.ffn_last_input.assign(state.ffn_last_input.begin(), state.ffn_last_input.end());
  saved.frame_valid = state.frame_valid;
  saved.reframe_pending = state.reframe_pending;
  saved.rows.clear();
  saved.scaled_saved.assign(Blocks::blocks_of(state.m.size()), 0);
  saved.scaled_blocks.resize(saved.scaled_saved.size());
  saved.lanes_saved.assign(saved.scaled_saved.size(), 0);
  saved.scaled_lanes.resize(saved.scaled_saved.size());

  const std::size_t rows = state.rows_for(position + static_cast<int64_t>(n));
  saved.rows_in_use = std::min<std::size_t>(rows, static_cast<std::size_t>(position) + n);
  saved.grown = rows != state.keys.rows();
  if (saved.grown) {
    // The old arrays move here, the state gets grown copies: one copy, as a plain resize.
    const std::size_t d = state.m.size();
    ChannelBlockedRows keys = state.keys.resized(rows, d);
    ChannelBlockedRows values = state.values.resized(rows, d);
    ChannelBlockedRows scaled_keys = state.scaled_keys.resized(rows, d);
    saved.keys = std::exchange(state.keys, std::move(keys));
    saved.values = std::exchange(state.values, std::move(values));
    saved.scaled_keys = std::exchange(state.scaled_keys, std::move(scaled_keys));
    return;
  }
  // The rows of positions [position, position + n): each once (a ring reuses them).
  if (state.capacity == 0) return;
  const std::size_t written = std::min<std::size_t>(n, state.capacity);
  for (std::size_t i = 0; i < written; ++i) {
    const std::size_t row =
        static_cast<std::size_t>(position + static_cast<int64_t>(i)) % state.capacity;
    if (row < rows) saved.rows.push_back(row);
  }
  const std::size_t blocks = state.keys.blocks();
  saved.row_values.resize(saved.rows.size() * 3 * blocks * Blocks::kBlock);
  float* to = saved.row_values.data();
  for (std::size_t row : saved.rows) {
    for (const Blocks* array : {&state.keys, &state.values, &state.scaled_keys}) {
      for (std::size_t block = 0; block < blocks; ++block, to += Blocks::kBlock) {
        std::memcpy(to, array->row(row, block), Blocks::kBlock * sizeof(float));
      }
    }
  }
}

void StateRollback::save_scaled(std::size_t layer, std::size_t block) {
  Layer& saved = layers_[layer];
  if (saved.grown || saved.scaled_saved[block]) return;
  const Blocks& scaled = state_->layers[layer].scaled_keys;
  const float* from = scaled.row(0, block);
  AlignedFloats& copy = saved.scaled_blocks[block];
  copy.assign(from, from + saved.rows_in_use * Blocks::kBlock);
  // Channels saved earlier in the call have changed since: their saved columns are the originals.
  const float* columns = saved.scaled_lanes[block].data();
  for (std::size_t row = 0; row < saved.rows_in_use; ++row) {
    for (uint64_t rest = saved.lanes_saved[block]; rest != 0; rest &= rest - 1) {
      const auto lane = static_cast<std::size_t>(__builtin_ctzll(rest));
      copy[row * Blocks::kBlock + lane] = columns[lane * saved.rows_in_use + row];
    }
  }
  saved.scaled_saved[block] = 1;
}

void StateRollback::save_scaled_lanes(std::size_t layer, std::size_t block, uint64_t lanes) {
  Layer& saved = layers_[layer];
  if (saved.grown || saved.scaled_saved[block]) return;
  const uint64_t fresh = lanes & ~saved.lanes_saved[block];
  if (fresh == 0) return;
  AlignedFloats& columns = saved.scaled_lanes[block];
  if (columns.size() < Blocks::kBlock * saved.rows_in_use) {
    columns.resize(Blocks::kBlock * saved.rows_in_use);
  }
  // Row by row: each row's lines are read once for all its lanes.
  const Blocks& scaled = state_->layers[layer].scaled_keys;
  for (std::size_t row = 0; row < saved.rows_in_use; ++row) {
    const float* from = scaled.row(row, block);
    for (uint64_t rest = fresh; rest != 0; rest &= rest - 1) {
      const auto lane = static_cast<std::size_t>(__builtin_ctzll(rest));
      columns[lane * saved.rows_in_use + row] = from[lane];
    }
  }
  saved.lanes_saved[block] |= fresh;
}

void StateRollback::restore() noexcept {
  if (!state_) return;
  for (std::size_t i = 0; i < layers_begun_; ++i) restore_layer(state_->layers[i], layers_[i]);
  state_->position = position_;
  state_ = nullptr;  // once: a second swap would undo the first
}

void StateRollback::restore_layer(MixerState& state, Layer& saved) noexcept {
  std::copy(saved.m.begin(), saved.m.end(), state.m.begin());
  std::copy(saved.a.begin(), saved.a.end(), state.a.begin());
  std::copy(saved.b.begin(), saved.b.end(), state.b.begin());
  std::copy(saved.frame.begin(), saved.frame.end(), state.frame.begin());
  std::copy(saved.last_input.begin(), saved.last_input.end(), state.last_input.begin());
  std::copy(saved.ffn_last_input.begin(), saved.ffn_last_input.end(), state.ffn_last_input.begin());
  state.frame_valid = saved.frame_valid;
  state.reframe_pending = saved.reframe_pending;
  if (saved.grown) {
    std::swap(state.keys, saved.keys);
    std::swap(state.values, saved.values);
    std::swap(state.scaled_keys, saved.scaled_keys);
    return;
  }
  // Scaled keys first: a row the call wrote before raising the frame is older in the rows.
  for (std::size_t block = 0; block < saved.scaled_saved.size(); ++block) {
    if (saved.scaled_saved[block]) {
      const AlignedFloats& from = saved.scaled_blocks[block];
      std::copy(from.begin(), from.end(), state.scaled_keys.row(0, block));
      continue;
    }
    const float* columns = saved.scaled_lanes[block].data();
    for (std::size_t row = 0; row < saved.rows_in_use; ++row) {
      float* to = state.scaled_keys.row(row, block);
      for (uint64_t rest = saved.lanes_saved[block]; rest != 0; rest &= rest - 1) {
        const auto lane = static_cast<std::size_t>(__builtin_ctzll(rest));
        to[lane] = columns[lane * saved.rows_in_use + row];
      }
    }
  }
  const std::size_t blocks = state.keys.blocks();
  const float* from = saved.row_values.data();
  for (std::size_t row : saved.rows) {
    for (Blocks* array : {&state.keys, &state.values, &state.scaled_keys}) {
      for (std::size_t block = 0; block < blocks; ++block, from += Blocks::kBlock) {
        std::memcpy(array->row(row, block), from, Blocks::kBlock * sizeof(float));
      }
    }
  }
}

void StateRollback::commit() noexcept {
  for (Layer& saved : layers_) {
    if (!saved.grown) continue;
    saved.keys = ChannelBlockedRows();
    saved.values = ChannelBlockedRows();
    saved.scaled_keys = ChannelBlockedRows();
    saved.grown = false;
  }
  state_ = nullptr;
}

}  // namespace aft
