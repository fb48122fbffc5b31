// Short renderings of JSON values and strings for error messages ("found string \"12\"").
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace aft {

// A string as a JSON literal: quoted, control characters escaped, invalid UTF-8 replaced (never
// throws).
inline std::string json_quote(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What a value is, for "expected X, found <describe(v)>"; long strings are cut.
inline std::string describe(const nlohmann::json& value) {
  constexpr std::size_t kMaxChars = 40;
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (s.size() <= kMaxChars) return "string " + json_quote(s);
      return "string " + json_quote(s.substr(0, kMaxChars)) + "...";
    }
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::binary:
      return "binary data";
    case nlohmann::json::value_t::discarded:
      return "nothing";
    default:
      return value.dump();  // numbers
  }
}

}  // namespace aft
