// StateRollback (models/aft/state_rollback.h) on a hand-made state: what a call rescales of the
// window's scaled keys is put back exactly, whether the mixer saved a few channels' columns, a
// whole channel block, or first some channels and later, after changing them, the whole block
// (a frame raised by a key, then rebuilt in the same call). Whole calls that fail part-way are
// tested through the C API in rollback_test.cpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/aft/session_state.h"
#include "models/aft/state_rollback.h"

namespace aft {
namespace {

constexpr std::size_t kWidth = 100;  // two channel blocks, the second narrow
constexpr std::size_t kCapacity = 8;

// One layer with a full window of distinct values; position past the ring's first turn.
SessionState make_state() {
  SessionState state;
  state.position = 11;
  MixerState& layer = state.layers.emplace_back();
  layer.capacity = kCapacity;
  layer.m.assign(kWidth, 0.5);
  layer.a.assign(kWidth, 1.5);
  layer.b.assign(kWidth, 2.5);
  layer.frame.assign(kWidth, 3.0f);
  for (ChannelBlockedRows* rows : {&layer.keys, &layer.values, &layer.scaled_keys}) {
    rows->resize(kCapacity, kWidth);
    for (std::size_t i = 0; i < rows->floats(); ++i) {
      rows->data()[i] = static_cast<float>(i) * 0.25f + (rows == &layer.values ? 1000.0f : 0.0f);
    }
  }
  return state;
}

std::vector<float> scaled_of(const SessionState& state) {
  const ChannelBlockedRows& s = state.layers[0].scaled_keys;
  return std::vector<float>(s.data(), s.data() + s.floats());
}

// Scales lanes of block `block` of every row, as a raised frame does.
void rescale(SessionState& state, std::size_t block, uint64_t lanes, float by) {
  ChannelBlockedRows& s = state.layers[0].scaled_keys;
  for (std::size_t row = 0; row < s.rows(); ++row) {
    for (std::size_t lane = 0; lane < ChannelBlockedRows::kBlock; ++lane) {
      if (lanes >> lane & 1u) s.row(row, block)[lane] *= by;
    }
  }
}

TEST(StateRollback, RescaledChannelsAreRestored) {
  SessionState state = make_state();
  const std::vector<float> before = scaled_of(state);
  StateRollback rollback;
  rollback.begin(state, 1);
  const uint64_t lanes = (uint64_t{1} << 3) | (uint64_t{1} << 35);
  rollback.save_scaled_lanes(0, 1, lanes);
  rescale(state, 1, lanes, 0.5f);
  rollback.save_scaled_lanes(0, 1, lanes);  // again in the call: the first save stands
  rescale(state, 1, lanes, 0.5f);
  ASSERT_NE(scaled_of(state), before);
  rollback.restore();
  EXPECT_EQ(scaled_of(state), before);
}

TEST(StateRollback, ChannelsSavedBeforeTheirWholeBlockAreRestoredToTheirOriginals) {
  SessionState state = make_state();
  const std::vector<float> before = scaled_of(state);
  StateRollback rollback;
  rollback.begin(state, 1);
  const uint64_t lanes = (uint64_t{1} << 0) | (uint64_t{1} << 63);
  rollback.save_scaled_lanes(0, 0, lanes);
  rescale(state, 0, lanes, 0.25f);
  rollback.save_scaled(0, 0);  // the frame rebuilt: the whole block, some channels changed
  rescale(state, 0, ~uint64_t{0}, 2.0f);
  rollback.save_scaled_lanes(0, 0, uint64_t{1} << 7);  // after the whole block: nothing more
  rescale(state, 0, uint64_t{1} << 7, 2.0f);
  rollback.restore();
  EXPECT_EQ(scaled_of(state), before);
}

TEST(StateRollback, CommittedChangesStay) {
  SessionState state = make_state();
  StateRollback rollback;
  rollback.begin(state, 1);
  rollback.save_scaled_lanes(0, 1, 1u);
  rescale(state, 1, 1u, 0.5f);
  const std::vector<float> after = scaled_of(state);
  rollback.commit();
  rollback.restore();  // after a commit: nothing to undo
  EXPECT_EQ(scaled_of(state), after);
}

}  // namespace
}  // namespace aft
