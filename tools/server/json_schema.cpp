#include "tools/server/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

namespace aft::server {

namespace {

using nlohmann::ordered_json;

// The types of a value whose first byte is byte (0: none begins so).
uint8_t types_beginning_with(unsigned char byte) {
  switch (byte) {
    case '{':
      return JsonSchema::kObject;
    case '[':
      return JsonSchema::kArray;
    case '"':
      return JsonSchema::kString;
    case 't':
    case 'f':
      return JsonSchema::kBoolean;
    case 'n':
      return JsonSchema::kNull;
    default:
      return byte == '-' || (byte >= '0' && byte <= '9')
                 ? JsonSchema::kNumber | JsonSchema::kInteger
                 : 0;
  }
}

bool begins_with(const JsonSchema::Node& node, unsigned char byte) {
  if (!node.literals.texts.empty()) {
    return std::any_of(
        node.literals.texts.begin(), node.literals.texts.end(),
        [byte](const std::string& text) { return static_cast<unsigned char>(text[0]) == byte; });
  }
  return (node.types & types_beginning_with(byte)) != 0;
}

constexpr const char kValueFirstBytes[] = "{[\"tfn-0123456789";

// Keywords that describe without constraining.
bool is_annotation(const std::string& key) {
  static const char* const kAnnotations[] = {"title",       "description", "default",  "examples",
                                             "$schema",     "$id",         "$comment", "$defs",
                                             "definitions", "deprecated",  "readOnly", "writeOnly"};
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), key) != std::end(kAnnotations);
}

JsonSchema::Literals sorted_literals(std::vector<std::pair<std::string, int32_t>> entries) {
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                entries.end());
  JsonSchema::Literals literals;
  for (auto& [text, tag] : entries) {
    literals.texts.push_back(std::move(text));
    literals.tags.push_back(tag);
  }
  return literals;
}

std::invalid_argument refused(const std::string& where, const std::string& what) {
  return std::invalid_argument("the schema's " + where + ": " + what);
}

int64_t count_field(const ordered_json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    throw refused(where, "expected a non-negative integer, found " + value.dump());
  }
  return value.get<int64_t>();
}

// A bound of an integer as an inclusive one: exclusive ones step past, fractions round inwards.
// Clamped to what an integer of the grammar's 18 digits can reach, so that it fits an int64_t.
int64_t integer_bound(const std::string& key, const ordered_json& value, const std::string& where) {
  if (!value.is_number()) throw refused(where, "expected a number, found " + value.dump());
  const double limit = 1e18;
  const double v = std::max(-limit, std::min(limit, value.get<double>()));
  const bool lower = key == "minimum" || key == "exclusiveMinimum";
  const bool exclusive = key.rfind("exclusive", 0) == 0;
  const double rounded = lower ? std::ceil(v) : std::floor(v);
  const double step = exclusive && rounded == v ? (lower ? 1 : -1) : 0;
  return static_cast<int64_t>(rounded + step);
}

}  // namespace

// Compiles subschemas into nodes, $refs once each (so that a schema may refer to itself).
class JsonSchema::Compiler {
 public:
  Compiler(JsonSchema& out, const ordered_json& document) : out_(out), document_(document) {}

  int32_t compile(const ordered_json& schema, const std::string& where) {
    if (schema.is_boolean() && schema.get<bool>()) return kAny;
    if (!schema.is_object())
      throw refused(where, "expected a schema object, found " + schema.dump());
    if (schema.contains("$ref")) return reference(schema, where);
    const int32_t id = new_node(where);
    Node node = compile_node(schema, where, id);
    out_.nodes_[static_cast<size_t>(id)] = std::move(node);
    return id;
  }

  // anyOf's alternatives must begin with distinct bytes: checked once every node is filled in
  // (an alternative may be a $ref still being compiled).
  void check_alternatives() const {
    for (const auto& [id, where] : unions_) {
      const Node& node = out_.node(id);
      for (const char* byte = kValueFirstBytes; *byte != '\0'; ++byte) {
        const auto count = std::count_if(
            node.alternatives.begin(), node.alternatives.end(), [&](int32_t alternative) {
              return out_.branch(alternative, static_cast<unsigned char>(*byte)) >= 0;
            });
        if (count > 1) {
          throw refused(where,
                        "anyOf's or oneOf's alternatives must be told apart by their first byte; "
                        "two may begin with '" +
                            std::string(1, *byte) + "'");
        }
      }
    }
  }

 private:
  static constexpr size_t kMaxNodes = 4096;
  static constexpr size_t kMaxKeyChoices = 1 << 16;

  int32_t new_node(const std::string& where) {
    if (out_.nodes_.size() >= kMaxNodes) {
      throw refused(where, "more than " + std::to_string(kMaxNodes) + " subschemas");
    }
    out_.nodes_.emplace_back();
    return static_cast<int32_t>(out_.nodes_.size() - 1);
  }

  int32_t reference(const ordered_json& schema, const std::string& where) {
    for (const auto& [key, value] : schema.items()) {
      if (key != "$ref" && !is_annotation(key)) {
        throw refused(where, "\"" + key + "\" beside \"$ref\" is not supported");
      }
    }
    const ordered_json& ref = schema["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0) {
      throw refused(where, "\"$ref\" must point into the schema itself (\"#/$defs/Name\")");
    }
    const std::string pointer = ref.get<std::string>();
    if (const auto found = refs_.find(pointer); found != refs_.end()) return found->second;
    const ordered_json* target = nullptr;
    try {
      target = &document_.at(ordered_json::json_pointer(pointer.substr(1)));
    } catch (const ordered_json::exception&) {
      throw refused(where, "\"$ref\": " + pointer + " names nothing in the schema");
    }
    if (target->is_object() && target->contains("$ref")) {
      throw refused(pointer, "a \"$ref\" to a \"$ref\" is not supported");
    }
    const int32_t id = new_node(where);
    refs_[pointer] = id;
    Node node = compile_node(*target, pointer, id);
    out_.nodes_[static_cast<size_t>(id)] = std::move(node);
    return id;
  }

  // The node of schema, which will be node id.
  Node compile_node(const ordered_json& schema, const std::string& where, int32_t id) {
    if (schema.is_boolean() && schema.get<bool>()) return out_.node(kAny);
    if (!schema.is_object())
      throw refused(where, "expected a schema object, found " + schema.dump());
    for (const char* combined : {"anyOf", "oneOf", "allOf"}) {
      if (!schema.contains(combined)) continue;
      for (const auto& [key, value] : schema.items()) {
        if (key != combined && !is_annotation(key)) {
          throw refused(where, "\"" + key + "\" beside \"" + combined + "\" is not supported");
        }
      }
    }
    Node node;
    for (const auto& [key, value] : schema.items()) {
      const std::string at = where + "." + key;
      if (is_annotation(key)) continue;
      if (key == "type") {
        node.types = types(value, at);
      } else if (key == "enum" || key == "const") {
        if (key == "enum" && (!value.is_array() || value.empty())) {
          throw refused(at, "expected a non-empty array");
        }
        std::vector<std::pair<std::string, int32_t>> texts;
        for (const ordered_json& choice : key == "enum" ? value : ordered_json::array({value})) {
          texts.emplace_back(choice.dump(-1, ' ', false, ordered_json::error_handler_t::strict), 0);
        }
        node.literals = sorted_literals(std::move(texts));
      } else if (key == "anyOf" || key == "oneOf" || key == "allOf") {
        // Alternatives told apart by their first byte exclude each other: oneOf is anyOf. allOf
        // of one schema (Pydantic's {"allOf": [{"$ref": ...}], "description": ...}) is it.
        if (!value.is_array() || value.empty()) throw refused(at, "expected a non-empty array");
        if (key == "allOf" && value.size() > 1) {
          throw refused(at, "allOf of more than one schema is not supported");
        }
        for (size_t i = 0; i < value.size(); ++i) {
          node.alternatives.push_back(compile(value[i], at + "[" + std::to_string(i) + "]"));
        }
      } else if (key == "properties") {
        if (!value.is_object()) throw refused(at, "expected an object of schemas");
        for (const auto& [name, property] : value.items()) {
          const std::string quoted = ordered_json(name).dump();
          node.properties.push_back(
              {quoted.substr(1, quoted.size() - 2), compile(property, at + "." + name), false});
        }
        node.closed = true;
      } else if (key == "required") {
        // Marked below, once the properties are known whatever the keywords' order.
        if (!value.is_array()) throw refused(at, "expected an array of property names");
      } else if (key == "additionalProperties") {
        if (value.is_boolean()) {
          node.closed = node.closed || !value.get<bool>();
        } else {
          node.values = compile(value, at);
        }
      } else if (key == "items") {
        node.items = compile(value, at);
      } else if (key == "minItems") {
        node.min_items = count_field(value, at);
      } else if (key == "maxItems") {
        node.max_items = count_field(value, at);
      } else if (key == "minimum" || key == "exclusiveMinimum") {
        node.minimum = std::max(node.minimum, integer_bound(key, value, at));
      } else if (key == "maximum" || key == "exclusiveMaximum") {
        node.maximum = std::min(node.maximum, integer_bound(key, value, at));
      } else if (key == "minLength") {
        node.min_length = count_field(value, at);
      } else if (key == "maxLength") {
        node.max_length = count_field(value, at);
      } else {
        throw refused(at, "\"" + key + "\" is not supported by aft-server (docs/server.md)");
      }
    }
    if (node.min_items > node.max_items) throw refused(where, "minItems exceeds maxItems");
    if (node.min_length > node.max_length) throw refused(where, "minLength exceeds maxLength");
    const bool bounded = node.minimum != std::numeric_limits<int64_t>::min() ||
                         node.maximum != std::numeric_limits<int64_t>::max();
    if (bounded && node.types != kInteger) {
      throw refused(where, "minimum and maximum are supported on {\"type\": \"integer\"} only");
    }
    if (node.minimum > node.maximum) throw refused(where, "no integer lies within the bounds");
    if (schema.contains("required")) mark_required(node, schema["required"], where + ".required");
    // With properties, only they are written (a subset of what additionalProperties allows).
    if (!node.properties.empty()) node.closed = true;
    for (size_t i = 0; i <= node.properties.size(); ++i) {
      std::vector<std::pair<std::string, int32_t>> keys;
      for (size_t j = i; j < node.properties.size(); ++j) {
        keys.emplace_back(node.properties[j].key, static_cast<int32_t>(j));
        if (node.properties[j].required) break;
      }
      key_choices_ += keys.size();  // optional properties in a row: their square
      if (key_choices_ > kMaxKeyChoices) {
        throw refused(where, "too many optional properties in a row (make some required)");
      }
      node.keys_from.push_back(sorted_literals(std::move(keys)));
    }
    if (!node.alternatives.empty()) unions_.emplace_back(id, where);
    return node;
  }

  static uint8_t types(const ordered_json& value, const std::string& where) {
    static const std::map<std::string, uint8_t> kNames = {
        {"object", kObject},   {"array", kArray},     {"string", kString}, {"number", kNumber},
        {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull}};
    uint8_t types = 0;
    for (const ordered_json& name : value.is_array() ? value : ordered_json::array({value})) {
      const auto found = name.is_string() ? kNames.find(name.get<std::string>()) : kNames.end();
      if (found == kNames.end()) throw refused(where, "unknown type " + name.dump());
      types |= found->second;
    }
    if (types == 0) throw refused(where, "no type");
    return types;
  }

  static void mark_required(Node& node, const ordered_json& names, const std::string& where) {
    for (const ordered_json& name : names) {
      const std::string quoted = name.is_string() ? name.dump() : "";
      const auto property =
          std::find_if(node.properties.begin(), node.properties.end(), [&](const Property& p) {
            return !quoted.empty() && p.key == quoted.substr(1, quoted.size() - 2);
          });
      if (property == node.properties.end()) {
        throw refused(where, name.dump() + " is not among the properties");
      }
      property->required = true;
    }
  }

  JsonSchema& out_;
  const ordered_json& document_;
  std::map<std::string, int32_t> refs_;
  std::vector<std::pair<int32_t, std::string>> unions_;
  size_t key_choices_ = 0;  // of every object's keys_from
};

JsonSchema::JsonSchema() : nodes_(1) {}

std::shared_ptr<const JsonSchema> JsonSchema::any_object() {
  static const std::shared_ptr<const JsonSchema> schema = [] {
    std::shared_ptr<JsonSchema> any(new JsonSchema());
    Node object;
    object.types = kObject;
    any->nodes_.push_back(object);
    any->root_ = 1;
    return any;
  }();
  return schema;
}

std::shared_ptr<const JsonSchema> JsonSchema::compile(const ordered_json& schema) {
  std::shared_ptr<JsonSchema> compiled(new JsonSchema());
  Compiler compiler(*compiled, schema);
  compiled->root_ = compiler.compile(schema, "root");
  compiler.check_alternatives();
  const Node& root = compiled->node(compiled->root_);
  if (root.types != kObject || !root.literals.texts.empty() || !root.alternatives.empty()) {
    throw refused("root", "must be {\"type\": \"object\", ...}");
  }
  return compiled;
}

int32_t JsonSchema::branch(int32_t id, unsigned char byte, int depth) const {
  const Node& n = node(id);
  if (n.alternatives.empty()) return begins_with(n, byte) ? id : -1;
  if (depth >= kMaxBranchDepth) return -1;  // an anyOf that holds itself
  for (int32_t alternative : n.alternatives) {
    const int32_t found = branch(alternative, byte, depth + 1);
    if (found >= 0) return found;
  }
  return -1;
}

}  // namespace aft::server
