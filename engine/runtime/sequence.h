// A sequence as the runtime sees it: a position. What else a sequence remembers between calls, and
// how a failed call undoes its changes, belong to the model family, whose types derive from these
// (models/aft/session_state.h, models/aft/state_rollback.h) and whose ops, the only ones that read
// them, cast back to them.
#pragma once

#include <cstdint>

namespace aft {

struct SequenceState {
  int64_t position = 0;
};

// Where a call saves what it changes of a sequence's state, so that a failure can restore it.
class SequenceRollback {
 protected:
  ~SequenceRollback() = default;
};

// One sequence of a call: its state, and where the ops save what they change beyond what the
// session saved before the call.
struct Sequence {
  SequenceState* state;
  SequenceRollback* rollback;
};

}  // namespace aft
