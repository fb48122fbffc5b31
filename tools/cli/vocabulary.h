// The bytes of every token of a model, read once: what aft-eval counts characters with and what
// aft-server names tokens with in log-probabilities. A token's bytes may be part of a character.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aft.h"

namespace aft::cli {

class Vocabulary {
 public:
  // Throws ApiError naming `whose` (the model's path, say) if the model refuses a token.
  Vocabulary(const aft_model* model, const std::string& whose);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& text(int32_t token) const { return texts_[static_cast<size_t>(token)]; }
  const std::vector<std::string>& texts() const { return texts_; }

 private:
  std::vector<std::string> texts_;
};

// The code points that start in bytes: over a text cut into tokens, each is counted once.
int64_t code_points_starting(const std::string& bytes);

}  // namespace aft::cli
