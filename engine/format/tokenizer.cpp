#include "tokenizer.h"

#include <cstdio>

#include "describe.h"
#include "error.h"
#include "utf8.h"
#include "vocab_limit.h"

namespace aft {
namespace {

using nlohmann::json;

// Token ids are int32 and models stay far below this; it also bounds memory for absurd inputs.

std::string code_point_label(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

// Conservative: controls, format characters and separators would be invisible or garble the line.
bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if ((cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E)) return false;
  if ((cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFF))
    return false;
  return true;
}

// "'x' (U+0078)", or just "U+000A" for a character that does not print.
std::string char_label(uint32_t cp, std::string_view bytes) {
  if (!printable(cp)) return code_point_label(cp);
  return "'" + std::string(bytes) + "' (" + code_point_label(cp) + ")";
}

}  // namespace

Tokenizer Tokenizer::from_json(const json& description, const std::string& where) {
  Tokenizer tok = read_vocabulary(description, where);
  tok.read_end_of_text(description, where);
  return tok;
}

void Tokenizer::read_end_of_text(const json& description, const std::string& where) {
  const auto found = description.find("end_of_text");
  if (kind_ == Kind::kWorld) {  // entry 0 is null: the end of text, stated or not
    if (found != description.end() && !(found->is_number_integer() && *found == 0)) {
      throw Error(AFT_ERR_FORMAT, where +
                                      ": tokenizer.end_of_text: expected 0 (a World vocabulary's "
                                      "end of text is token 0), found " +
                                      describe(*found));
    }
    end_of_text_ = 0;
    return;
  }
  if (found == description.end()) return;
  const std::size_t size = vocab_size();
  if (!found->is_number_integer() || *found < 0 || *found >= size) {
    throw Error(AFT_ERR_FORMAT, where + ": tokenizer.end_of_text: expected a token id in [0, " +
                                    std::to_string(size) + "), found " + describe(*found));
  }
  end_of_text_ = found->get<int32_t>();
}

Tokenizer Tokenizer::read_vocabulary(const json& description, const std::string& where) {
  const auto fail = [&](const std::string& what) {
    throw Error(AFT_ERR_FORMAT, where + ": tokenizer" + what);
  };
  if (!description.is_object()) fail(": expected an object, found " + describe(description));
  const auto type = description.find("type");
  if (type == description.end()) fail(": missing key \"type\"");
  Tokenizer tok;
  if (*type == "bpe") {
    tok.kind_ = Kind::kBpe;
    tok.bpe_ = std::make_shared<const BpeTokenizer>(BpeTokenizer::from_json(description, where));
    return tok;
  }
  if (*type == "world") {
    tok.kind_ = Kind::kWorld;
    tok.world_ =
        std::make_shared<const WorldTokenizer>(WorldTokenizer::from_json(description, where));
    return tok;
  }
  const bool is_byte = *type == "byte";
  if (!is_byte && *type != "char") {
    fail(".type: expected \"byte\", \"char\", \"bpe\" or \"world\", found " + describe(*type));
  }

  if (is_byte) {
    tok.byte_level_ = true;
    for (int b = 0; b < 256; ++b) tok.pieces_.emplace_back(1, static_cast<char>(b));
    return tok;
  }

  tok.kind_ = Kind::kChar;
  tok.byte_level_ = false;
  const auto vocab = description.find("vocab");
  if (vocab == description.end()) fail(": missing key \"vocab\" (a \"char\" tokenizer needs one)");
  if (!vocab->is_array()) fail(".vocab: expected an array of strings, found " + describe(*vocab));
  if (vocab->empty()) fail(".vocab: is empty");
  check_vocab_size(vocab->size(), fail);
  for (std::size_t i = 0; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    const std::string slot = ".vocab[" + std::to_string(i) + "]";
    if (!entry.is_string()) fail(slot + ": expected a string, found " + describe(entry));
    const std::string& piece = entry.get_ref<const std::string&>();
    const DecodedChar c = piece.empty() ? DecodedChar{0, 0} : decode_utf8(piece, 0);
    if (c.length == 0 || c.length != piece.size()) {
      fail(slot +
           ": expected exactly one Unicode character (one code point of valid UTF-8), found " +
           describe(entry));
    }
    const auto id = static_cast<int32_t>(i);
    const auto [it, inserted] = tok.code_point_to_token_.emplace(c.code_point, id);
    if (!inserted) {
      fail(slot + ": duplicate of tokenizer.vocab[" + std::to_string(it->second) + "] (" +
           char_label(c.code_point, piece) + ")");
    }
    tok.pieces_.push_back(piece);
  }
  return tok;
}

std::size_t Tokenizer::vocab_size() const {
  if (bpe_) return bpe_->vocab_size();
  if (world_) return world_->vocab_size();
  return pieces_.size();
}

const char* Tokenizer::kind() const {
  switch (kind_) {
    case Kind::kByte:
      return "byte";
    case Kind::kChar:
      return "char";
    case Kind::kBpe:
      return "bpe";
    case Kind::kWorld:
      return "world";
  }
  return "byte";
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (bpe_) return bpe_->encode(text);
  if (world_) return world_->encode(text);
  std::vector<int32_t> tokens;
  if (byte_level_) {
    tokens.reserve(text.size());
    for (const char ch : text) tokens.push_back(static_cast<uint8_t>(ch));
    return tokens;
  }
  for (std::size_t pos = 0; pos < text.size();) {
    const DecodedChar c = decode_utf8(text, pos);
    if (c.length == 0) throw Error(AFT_ERR_TOKENIZE, invalid_utf8_message(text, pos));
    const auto it = code_point_to_token_.find(c.code_point);
    if (it == code_point_to_token_.end()) {
      throw Error(AFT_ERR_TOKENIZE,
                  "character " + char_label(c.code_point, text.substr(pos, c.length)) +
                      " at byte " + std::to_string(pos) + " is not in the model's vocabulary");
    }
    tokens.push_back(it->second);
    pos += c.length;
  }
  return tokens;
}

const std::string& Tokenizer::piece(int32_t token) const {
  const std::size_t size = vocab_size();
  if (token < 0 || static_cast<std::size_t>(token) >= size) {
    throw Error(AFT_ERR_OUT_OF_RANGE, "token " + std::to_string(token) +
                                          " is outside the vocabulary (size " +
                                          std::to_string(size) + ")");
  }
  if (bpe_) return bpe_->piece(token);
  if (world_) return world_->piece(token);
  return pieces_[static_cast<std::size_t>(token)];
}

}  // namespace aft
