// The server's chat templates for tests/python/test_chat_template_conformance.py: one JSON object
// per line in ({"template": TEXT, "messages": [...]}), one verdict per line out: {"name", "prompt",
// "stop"} or {"error"}.
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/server/chat_template.h"

int main() {
  using nlohmann::json;
  std::string line;
  while (std::getline(std::cin, line)) {
    const json in = json::parse(line);
    json out;
    try {
      const aft::server::ChatTemplate t =
          aft::server::parse_chat_template(in.at("template").get<std::string>());
      out = {{"name", t.name}, {"prompt", t.render(in.at("messages"))}, {"stop", t.stop}};
    } catch (const std::invalid_argument& error) {
      out = {{"error", error.what()}};
    }
    std::cout << out.dump() << "\n";
  }
  return 0;
}
