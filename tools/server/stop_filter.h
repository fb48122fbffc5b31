// Stop strings over streamed text: text is released only once no stop string can start in it, so
// a stop string split across tokens is still found and cut, and never half-sent.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace aft::server {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds text; returns what may be sent now. *stopped: a stop string was found (the text before
  // it is returned, the rest dropped).
  std::string push(const std::string& text, bool* stopped);
  // The end of the text: whatever was held back.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

inline std::string StopFilter::push(const std::string& text, bool* stopped) {
  held_ += text;
  *stopped = false;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    *stopped = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest end of held_ that begins some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

inline std::string StopFilter::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace aft::server
