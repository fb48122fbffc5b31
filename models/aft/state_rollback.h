// What an eval call can change of a session's state, saved before the call so that a failure
// part-way (out of memory, a kernel library's error) leaves the session as it was (aft.h: on any
// error the session is unchanged).
//
// Not a copy of the whole state, which would cost a decoded token as much as its mixers read (an
// AFT-full or wide-window state is megabytes): per layer, the sums (m, a, b), the last input (token
// shift), the frame and its flags, and the rows the call's positions are written to; rows that grow
// (AFT-full) keep their old arrays. The one change that reaches further, a frame raised by a new
// key, which rescales the window's scaled keys of the channels it raises, is saved by the mixer as
// it happens: those channels' columns of the window, once per call and channel (save_scaled_lanes),
// or a channel block's whole window where the frame is rebuilt (save_scaled). A decoded token of a
// d = 512, 12-layer model saves about 240 KB, and a few KB per raised channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "channel_blocked_rows.h"
#include "engine/format/aligned_buffer.h"
#include "session_state.h"

namespace aft {

class StateRollback : public SequenceRollback {
 public:
  // Before a call of n tokens from state.position: gives every layer the rows the call's positions
  // need (MixerState::rows_for) and saves what the call will overwrite. On an exception (out
  // of memory) the state is as it was.
  void begin(SessionState& state, std::size_t n);
  // Before the call first changes the scaled keys of channel block `block` of layer `layer` (in
  // the state given to begin): all of them, or only the channels (lanes of the block) set in
  // `lanes`. Calls for one (layer, block) come from one thread at a time.
  void save_scaled(std::size_t layer, std::size_t block);
  void save_scaled_lanes(std::size_t layer, std::size_t block, uint64_t lanes);
  // Puts the state given to begin back as it was (once; later calls do nothing).
  void restore() noexcept;
  // The call succeeded: drops what only a restore would need (grown arrays' old copies).
  void commit() noexcept;

 private:
  struct Layer {
    AlignedDoubles m, a, b;
    AlignedFloats frame, last_input, ffn_last_input;
    bool frame_valid = true;
    bool reframe_pending = false;
    // Rows grew: the old arrays, whole (nothing else of keys, values or scaled keys is saved).
    bool grown = false;
    ChannelBlockedRows keys, values, scaled_keys;
    // Otherwise: the rows the call writes (each: keys, values, scaled keys, block by block) ...
    std::vector<std::size_t> rows;
    AlignedFloats row_values;
    // ... and the scaled keys the call rescaled, of each block's first rows_in_use rows (the rows
    // the call's positions can read; AFT-full has more): whole blocks where the frame was rebuilt
    // (scaled_saved), else the columns of the channels it raised (lanes_saved; lane c's rows at
    // scaled_lanes[block] + c * rows_in_use).
    std::size_t rows_in_use = 0;
    std::vector<char> scaled_saved;
    std::vector<AlignedFloats> scaled_blocks;
    std::vector<uint64_t> lanes_saved;
    std::vector<AlignedFloats> scaled_lanes;
  };
  void save_layer(MixerState& state, Layer& saved, int64_t position, std::size_t n);
  static void restore_layer(MixerState& state, Layer& saved) noexcept;

  SessionState* state_ = nullptr;
  int64_t position_ = 0;
  std::size_t layers_begun_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace aft
