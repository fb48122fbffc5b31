#include "tools/cli/vocabulary.h"

#include <algorithm>

#include "tools/cli/api_call.h"

namespace aft::cli {

Vocabulary::Vocabulary(const aft_model* model, const std::string& whose) {
  aft_model_info info;
  check(aft_model_get_info(model, &info), "reading " + whose);
  texts_.reserve(static_cast<size_t>(info.vocab_size));
  for (int32_t token = 0; token < info.vocab_size; ++token) {
    std::string text(16, '\0');  // most tokens; a longer one (BPE, World) says its length
    size_t length = 0;
    aft_status status = aft_token_to_text(model, token, text.data(), text.size(), &length);
    if (status == AFT_ERR_BUFFER_TOO_SMALL) {
      text.resize(length);
      status = aft_token_to_text(model, token, text.data(), text.size(), &length);
    }
    check(status, "reading the vocabulary of " + whose);
    text.resize(length);
    texts_.push_back(std::move(text));
  }
}

int64_t code_points_starting(const std::string& bytes) {
  return std::count_if(bytes.begin(), bytes.end(), [](char byte) {
    return (static_cast<unsigned char>(byte) & 0xC0) != 0x80;  // not a continuation byte
  });
}

}  // namespace aft::cli
