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
  std::fill(last_input.begin(), last_input.end(), 0.0f);
  std::fill(ffn_last_input.begin(), ffn_last_input.end(), 0.0f);
  frame_valid = true;
}

std::size_t MixerState::rows_for(int64_t positions) const {
  const std::size_t had = keys.rows();
  const std::size_t needed =
      std::min(capacity, static_cast<std::size_t>(std::max<int64_t>(positions, 0)));
  if (had >= needed) return had;
  // At least kFirstBytes an array: a window's ring (32 rows of 2 KiB in enwik8-local) is then
  // allocated once, not six times over a session's first 32 tokens, each a copy and new pages
  // (a step of 16 fresh sequences took 1.9x as long as one of 16 whose rings were full).
  const std::size_t row_bytes = ChannelBlockedRows::row_bytes(m.size());
  constexpr std::size_t kFirstBytes = std::size_t{256} << 10;
  std::size_t rows = std::max({needed, 2 * had, kFirstBytes / row_bytes});
  // From half a 2 MiB page on, whole pages (ChannelBlockedRows' memory): a page's first touch is
  // one fault, where 4 KiB pages take 512.
  constexpr std::size_t kPage = kernels::kHugePageBytes;
  if (2 * rows * row_bytes >= kPage)
    rows = (rows * row_bytes + kPage - 1) / kPage * kPage / row_bytes;
  return std::min(capacity, rows);
}

}  // namespace aft
