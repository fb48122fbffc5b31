// Fuzz target: the tokenizers of a byte model and a character model (fixtures). The input as text:
// it tokenizes (a byte model: always) or is refused with AFT_ERR_TOKENIZE, and the tokens' pieces
// give the text back byte for byte. The input as int32 token ids: an id in the vocabulary has a
// piece that tokenizes to that id alone, any other id is AFT_ERR_OUT_OF_RANGE.
// Then the byte-level BPE and World tokenizers of tests/fixtures/tokenizers/ (their descriptions,
// loaded by the engine's Tokenizer): World text always tokenizes and its pieces give it back; BPE
// text tokenizes exactly when it is valid UTF-8, the pieces are valid UTF-8 (the text normalized),
// and tokenizing them again gives the same tokens. Both streamed through Utf8Stream in pieces give
// valid UTF-8, the pieces themselves when they are.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/format/error.h"
#include "engine/format/tokenizer.h"
#include "engine/format/utf8.h"
#include "engine/format/utf8_stream.h"
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

aft::Tokenizer load_description(const char* name) {
  const std::string path = std::string(AFT_FIXTURES_DIR) + "/tokenizers/" + name;
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  check(in.good() || in.eof(), "the tokenizer description reads");
  return aft::Tokenizer::from_json(nlohmann::json::parse(text.str()), path);
}

bool valid_utf8(const std::string& text) { return aft::invalid_utf8_at(text) == text.size(); }

std::string decode(const aft::Tokenizer& t, const std::vector<int32_t>& tokens) {
  std::string text;
  for (const int32_t token : tokens) text += t.piece(token);
  return text;
}

// The pieces through a Utf8Stream: valid UTF-8 always, and the text itself when it is valid.
void stream(const aft::Tokenizer& t, const std::vector<int32_t>& tokens, const std::string& text) {
  aft::Utf8Stream s;
  std::string out;
  for (const int32_t token : tokens) out += s.push(t.piece(token));
  out += s.flush();
  check(valid_utf8(out), "the stream gives valid UTF-8");
  check(!valid_utf8(text) || out == text, "the stream gives valid text back unchanged");
}

void bpe_and_world(const uint8_t* data, size_t size) {
  static const aft::Tokenizer bpe = load_description("gpt_neox_like.description.json");
  static const aft::Tokenizer world = load_description("world.description.json");
  const std::string text(reinterpret_cast<const char*>(data), size);

  const std::vector<int32_t> w = world.encode(text);  // every byte has a token
  check(decode(world, w) == text, "World pieces give the text back");
  stream(world, w, text);

  std::vector<int32_t> b;
  try {
    b = bpe.encode(text);
  } catch (const aft::Error& e) {
    check(e.status() == AFT_ERR_TOKENIZE && !valid_utf8(text), "BPE refuses only invalid UTF-8");
    return;
  }
  check(valid_utf8(text), "BPE refuses invalid UTF-8");
  const std::string normalized = decode(bpe, b);
  check(valid_utf8(normalized), "BPE pieces give valid UTF-8");
  check(bpe.encode(normalized) == b, "BPE tokens of the normalized text are the same");
  stream(bpe, b, normalized);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer tokenizers[] = {load("simple.aft"), load("local_learned_char.aft")};
  for (const Tokenizer& t : tokenizers) {
    round_trip_text(t, reinterpret_cast<const char*>(data), size);
    round_trip_ids(t, data, size);
  }
  bpe_and_world(data, size);
  return 0;
}
