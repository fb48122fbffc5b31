// Fuzz target: the tokenizers of a byte model and a character model (fixtures). The input as text:
// it tokenizes (a byte model: always) or is refused with AFT_ERR_TOKENIZE, and the tokens' pieces
// give the text back byte for byte. The input as int32 token ids: an id in the vocabulary has a
// piece that tokenizes to that id alone, any other id is AFT_ERR_OUT_OF_RANGE.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"

using aft::fuzz::check;
using aft::fuzz::check_refusal;

namespace {

struct Tokenizer {
  aft_model* model;
  int32_t vocab_size;
  bool byte_level;
};

Tokenizer load(const char* name) {
  aft_model* model = nullptr;
  const std::string path = std::string(AFT_FIXTURES_DIR) + "/" + name;
  check(aft_model_load(path.c_str(), nullptr, &model) == AFT_OK, "the fixture loads");
  aft_model_info info{};
  check(aft_model_get_info(model, &info) == AFT_OK, "the fixture has info");
  return {model, info.vocab_size, std::strcmp(info.tokenizer, "byte") == 0};
}

std::string piece_of(const Tokenizer& t, int32_t token) {
  char piece[8];
  size_t length = 0;
  const aft_status status = aft_token_to_text(t.model, token, piece, sizeof piece, &length);
  if (token < 0 || token >= t.vocab_size) {
    check(status == AFT_ERR_OUT_OF_RANGE, "an id outside the vocabulary is out of range");
    return {};
  }
  check(status == AFT_OK && length >= 1 && length <= 4, "a token's piece is 1 to 4 bytes");
  return std::string(piece, length);
}

void round_trip_text(const Tokenizer& t, const char* text, size_t size) {
  size_t n = 0;
  const aft_status counted = aft_tokenize(t.model, text, size, nullptr, 0, &n);
  if (counted == AFT_ERR_TOKENIZE) {
    check(!t.byte_level, "a byte tokenizer takes any bytes");
    check_refusal(counted, "untokenizable text is refused with a message");
    return;
  }
  check(counted == (n == 0 ? AFT_OK : AFT_ERR_BUFFER_TOO_SMALL), "the count comes first");
  check(n <= size && (!t.byte_level || n == size), "at most one token per byte, one for bytes");
  std::vector<int32_t> tokens(n);
  size_t written = 0;
  check(aft_tokenize(t.model, text, size, tokens.data(), n, &written) == AFT_OK && written == n,
        "text that counts tokenizes");
  std::string back;
  for (const int32_t token : tokens) back += piece_of(t, token);
  check(back == std::string(text, size), "the pieces give the text back");
}

// The first 16 ids only: an id outside the vocabulary costs an exception (most random ids are),
// and thousands of them per input made the target ten times slower for no new coverage.
void round_trip_ids(const Tokenizer& t, const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 4 <= std::min<size_t>(size, 64); i += 4) {
    int32_t token;
    std::memcpy(&token, data + i, 4);
    const std::string piece = piece_of(t, token);
    if (piece.empty()) continue;
    int32_t again = -1;
    size_t n = 0;
    check(aft_tokenize(t.model, piece.data(), piece.size(), &again, 1, &n) == AFT_OK && n == 1 &&
              again == token,
          "a token's piece tokenizes to that token");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer tokenizers[] = {load("simple.aft"), load("local_learned_char.aft")};
  for (const Tokenizer& t : tokenizers) {
    round_trip_text(t, reinterpret_cast<const char*>(data), size);
    round_trip_ids(t, data, size);
  }
  return 0;
}
