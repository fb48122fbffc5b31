// response_format's JSON schema, compiled into what JsonGrammar needs at each byte: which types a
// value may take, which keys an object may write next, what an array holds. The subset of JSON
// Schema that OpenAI's structured outputs take, enforced rather than hinted: a keyword that would
// constrain values in a way the grammar cannot follow is refused, never ignored.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft::server {

class JsonSchema {
 public:
  // JSON's types, a bit each.
  enum Type : uint8_t {
    kObject = 1,
    kArray = 2,
    kString = 4,
    kNumber = 8,
    kInteger = 16,  // a number without fraction or exponent
    kBoolean = 32,
    kNull = 64,
    kAnyType = 127,
  };

  // Sorted texts of which a value (or a key) is one, matched a byte at a time: those that agree
  // with the bytes so far are a range of them.
  struct Literals {
    std::vector<std::string> texts;  // sorted, unique
    std::vector<int32_t> tags;       // keys: the property of each text
  };

  struct Property {
    std::string key;  // as JSON writes it between its quotes
    int32_t node = 0;
    bool required = false;
  };

  struct Node {
    uint8_t types = kAnyType;
    Literals literals;  // enum or const, as compact JSON; none: any value of the types
    // Values that begin with distinct bytes (anyOf, oneOf; allOf of one schema): the node of
    // each.
    std::vector<int32_t> alternatives;
    // Objects. closed: only the properties, in their order (any of them may be left out unless
    // required); otherwise any key, each value of node `values`.
    bool closed = false;
    std::vector<Property> properties;
    std::vector<Literals> keys_from;  // [i]: the keys that may come once properties < i are done
    int32_t values = kAny;
    // Arrays.
    int32_t items = kAny;
    int64_t min_items = 0;
    int64_t max_items = std::numeric_limits<int64_t>::max();
    // Integers (minimum, maximum and their exclusive forms, as inclusive integer bounds).
    int64_t minimum = std::numeric_limits<int64_t>::min();
    int64_t maximum = std::numeric_limits<int64_t>::max();
    // Strings, in characters (code points; an escape is one).
    int64_t min_length = 0;
    int64_t max_length = std::numeric_limits<int64_t>::max();
  };

  static constexpr int32_t kAny = 0;  // the node of any JSON value

  // Any JSON object: response_format json_object.
  static std::shared_ptr<const JsonSchema> any_object();
  // A schema whose root is an object (OpenAI's rule, and what ends a completion unambiguously).
  // Throws std::invalid_argument naming the keyword and where it is.
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::ordered_json& schema);

  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  int32_t root() const { return root_; }
  // The node of a value of node id that begins with byte (id's, or that of its anyOf alternative
  // that begins so), or -1 if none may.
  int32_t branch(int32_t id, unsigned char byte, int depth = 0) const;

 private:
  static constexpr int kMaxBranchDepth = 16;
  JsonSchema();
  class Compiler;
  std::vector<Node> nodes_;
  int32_t root_ = kAny;
};

}  // namespace aft::server
