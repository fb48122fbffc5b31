#include "session_state.h"

#include <algorithm>
#include <limits>

namespace aft {

void MixerState::reset() {
  // Keys and values need no clearing: only positions of the current sequence are read.
  std::fill(m.begin(), m.end(), -std::numeric_limits<double>::infinity());
  std::fill(a.begin(), a.end(), 0.0);
  std::fill(b.begin(), b.end(), 0.0);
  std::fill(frame.begin(), frame.end(), -std::numeric_limits<float>::infinity());
  frame_valid = true;
}

}  // namespace aft
