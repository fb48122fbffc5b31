// How a chat's messages become a prompt. A model file names or describes its template in its
// metadata ("chat_template"); aft-server's --chat-template overrides it; otherwise "plain". The
// Python package reads the same templates (python/aft/chat_template.py); both render a grid of
// cases alike (tests/python/test_chat_template_conformance.py).
//
// A template is a built-in's name ("plain", "rwkv", "chatml") or a JSON object:
//   {"begin": "...", "system": "System: {content}\n", "user": "User: {content}\n",
//    "assistant": "Assistant: {content}\n", "generation": "Assistant:", "stop": ["\nUser:"]}
// Each role's text holds "{content}" once, where the message goes; a role left out is refused in
// a request. "begin" opens the conversation, "generation" opens the assistant's turn, "stop" ends
// it (unless a request gives its own). All but "user", "assistant" and "generation" are optional.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft::server {

struct ChatTemplate {
  std::string name;  // the built-in's, or "custom"
  std::string begin;
  std::map<std::string, std::string> roles;  // role -> its text around "{content}"
  std::string generation;
  std::vector<std::string> stop;

  // The prompt of messages (objects with string "role" and "content"), the assistant's turn open.
  // Throws std::invalid_argument naming a role the template has not.
  std::string render(const nlohmann::json& messages) const;
  // The messages and then the assistant's answer, as a next turn's prompt begins.
  std::string render_answered(const nlohmann::json& messages, const std::string& answer) const;
  // The template as its JSON object (a built-in's written out).
  nlohmann::json to_json() const;

 private:
  std::string render_messages(const nlohmann::json& messages) const;
  std::string render_message(const std::string& role, const std::string& content) const;
};

// A built-in's name or a JSON object's text; throws std::invalid_argument saying what is wrong.
ChatTemplate parse_chat_template(const std::string& text);

// The built-ins' names, for messages.
const char* chat_template_names();

}  // namespace aft::server
