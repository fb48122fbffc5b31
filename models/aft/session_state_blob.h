// A session's state as bytes: what aft_session_state_save writes and aft_session_state_load reads
// (docs/format.md, "Session state"). The blob holds the state exactly, so a sequence continued
// after a round trip gives the same bits as one never saved.
#pragma once

#include <cstddef>
#include <cstdint>

#include "session_state.h"

namespace aft {

// The layout version the blob carries (docs/format.md, "Session state").
constexpr uint32_t kStateBlobVersion = 3;

std::size_t state_blob_size(const SessionState& state);

// Writes state_blob_size(state) bytes to out.
void write_state_blob(const SessionState& state, uint32_t model_fingerprint, void* out);

// Replaces `state` (the session's: its layers give the widths and ring capacities) with the one
// in the blob, reusing its arrays. max_position bounds the position (absolute-position models stop
// there). Checks everything before changing anything: throws Error(AFT_ERR_FORMAT) naming what is
// wrong (truncated or too long, not a state, another version, another model, a size or position
// the model cannot have, a checksum mismatch) with state unchanged.
void read_state_blob(const void* data, std::size_t size, uint32_t model_fingerprint,
                     int64_t max_position, SessionState& state);

}  // namespace aft
