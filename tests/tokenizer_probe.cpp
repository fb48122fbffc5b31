// The engine's tokenizer for the Python tests (tests/python/test_tokenizer_reference.py,
// test_tokenizer_conformance.py):
//   tokenizer_probe DESCRIPTION.json            prints "ok <size>" or "error <message>"
//   tokenizer_probe DESCRIPTION.json TEXTS.json  TEXTS a JSON array of hex strings (the texts'
//     bytes); prints a JSON array with, for each text, its ids or {"error": message}, then
//     "pieces": every token's bytes as hex.
//   tokenizer_probe --nfc TEXTS.json  TEXTS a JSON array of arrays of code points; prints their
//     NFC, and each one's classes (L, N, S for white space, or -), as JSON.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/format/error.h"
#include "engine/format/tokenizer.h"
#include "engine/format/unicode.h"

namespace {

nlohmann::json read_json(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (const char c : bytes) {
    hex.push_back(digits[static_cast<unsigned char>(c) >> 4]);
    hex.push_back(digits[static_cast<unsigned char>(c) & 15]);
  }
  return hex;
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_probe DESCRIPTION.json [TEXTS.json]\n");
    return 2;
  }
  if (std::string(argv[1]) == "--nfc" && argc == 3) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& text : read_json(argv[2])) {
      out["nfc"].push_back(aft::unicode::nfc(text.get<std::vector<uint32_t>>()));
    }
    std::string classes;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      classes.push_back(aft::unicode::is_letter(cp)       ? 'L'
                        : aft::unicode::is_number(cp)     ? 'N'
                        : aft::unicode::is_whitespace(cp) ? 'S'
                                                          : '-');
    }
    out["classes"] = classes;
    std::cout << out.dump() << "\n";
    return 0;
  }
  const nlohmann::json description = read_json(argv[1]);
  try {
    const aft::Tokenizer tok = aft::Tokenizer::from_json(description, "probe");
    if (argc == 2) {
      std::cout << "ok " << tok.vocab_size() << "\n";
      return 0;
    }
    nlohmann::json out = nlohmann::json::object();
    nlohmann::json& results = out["ids"] = nlohmann::json::array();
    for (const auto& text : read_json(argv[2])) {
      try {
        results.push_back(tok.encode(from_hex(text.get<std::string>())));
      } catch (const aft::Error& e) {
        results.push_back({{"error", e.what()}});
      }
    }
    nlohmann::json& pieces = out["pieces"] = nlohmann::json::array();
    for (std::size_t i = 0; i < tok.vocab_size(); ++i) {
      pieces.push_back(to_hex(tok.piece(static_cast<int32_t>(i))));
    }
    std::cout << out.dump() << "\n";
  } catch (const aft::Error& e) {
    std::cout << "error " << e.what() << "\n";
  }
  return 0;
}
