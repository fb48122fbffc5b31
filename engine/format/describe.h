// Short renderings of values for error messages ("found string \"12\"", "shape [3, 4]").
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// "[3, 4]".
inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace aft
