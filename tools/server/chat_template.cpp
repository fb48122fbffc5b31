#include "tools/server/chat_template.h"

#include <stdexcept>

namespace aft::server {

using nlohmann::json;

namespace {

constexpr char kContent[] = "{content}";
const char* const kRoles[] = {"system", "user", "assistant"};

ChatTemplate builtin(const std::string& name, const std::string& system, const std::string& user,
                     const std::string& assistant, const std::string& generation,
                     const std::string& stop) {
  ChatTemplate t;
  t.name = name;
  t.roles = {{"system", system}, {"user", user}, {"assistant", assistant}};
  t.generation = generation;
  t.stop = {stop};
  return t;
}

// "plain" is a transcript, which any model trained on text can continue; "rwkv" is the RWKV World
// models' chat form (turns apart by a blank line); "chatml" marks turns with <|im_start|> and
// <|im_end|>, as models trained on it expect.
ChatTemplate builtin_named(const std::string& name) {
  if (name == "plain") {
    return builtin(name, "System: {content}\n", "User: {content}\n", "Assistant: {content}\n",
                   "Assistant:", "\nUser:");
  }
  if (name == "rwkv") {
    return builtin(name, "System: {content}\n\n", "User: {content}\n\n", "Assistant: {content}\n\n",
                   "Assistant:", "\n\nUser:");
  }
  if (name == "chatml") {
    return builtin(name, "<|im_start|>system\n{content}<|im_end|>\n",
                   "<|im_start|>user\n{content}<|im_end|>\n",
                   "<|im_start|>assistant\n{content}<|im_end|>\n", "<|im_start|>assistant\n",
                   "<|im_end|>");
  }
  throw std::invalid_argument("unknown chat template \"" + name +
                              "\" (built-ins: " + chat_template_names() + ", or a JSON object)");
}

std::string string_field(const json& object, const char* key, bool required) {
  if (!object.contains(key)) {
    if (required) throw std::invalid_argument(std::string("\"") + key + "\" is missing");
    return "";
  }
  if (!object[key].is_string()) {
    throw std::invalid_argument(std::string("\"") + key + "\": expected a string");
  }
  return object[key].get<std::string>();
}

ChatTemplate from_object(const json& object) {
  for (const auto& [key, value] : object.items()) {
    static const char* const kKeys[] = {"begin",     "system",     "user",
                                        "assistant", "generation", "stop"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      throw std::invalid_argument("unknown key \"" + key +
                                  "\" (begin, system, user, assistant, generation, stop)");
    }
  }
  ChatTemplate t;
  t.name = "custom";
  t.begin = string_field(object, "begin", false);
  for (const char* role : kRoles) {
    const bool required = std::string(role) != "system";
    if (!required && !object.contains(role)) continue;
    std::string text = string_field(object, role, required);
    const size_t at = text.find(kContent);
    if (at == std::string::npos || text.find(kContent, at + 1) != std::string::npos) {
      throw std::invalid_argument(std::string("\"") + role + "\": expected \"{content}\" once");
    }
    t.roles[role] = std::move(text);
  }
  t.generation = string_field(object, "generation", true);
  if (object.contains("stop")) {
    const json& stop = object["stop"];
    if (!stop.is_array()) throw std::invalid_argument("\"stop\": expected a list of strings");
    for (const json& s : stop) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        throw std::invalid_argument("\"stop\": expected non-empty strings");
      }
      t.stop.push_back(s.get<std::string>());
    }
  }
  return t;
}

}  // namespace

const char* chat_template_names() { return "plain, rwkv, chatml"; }

ChatTemplate parse_chat_template(const std::string& text) {
  const json parsed = json::parse(text, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object()) return from_object(parsed);
  return builtin_named(text);
}

std::string ChatTemplate::render(const json& messages) const {
  return render_messages(messages) + generation;
}

std::string ChatTemplate::render_answered(const json& messages, const std::string& answer) const {
  return render_messages(messages) + render_message("assistant", answer);
}

std::string ChatTemplate::render_messages(const json& messages) const {
  std::string prompt = begin;
  for (const json& message : messages) {
    prompt += render_message(message.at("role").get<std::string>(),
                             message.at("content").get<std::string>());
  }
  return prompt;
}

std::string ChatTemplate::render_message(const std::string& role,
                                         const std::string& content) const {
  const auto found = roles.find(role);
  if (found == roles.end()) {
    throw std::invalid_argument("the chat template (" + name + ") has no role \"" + role + "\"");
  }
  const std::string& text = found->second;
  const size_t at = text.find(kContent);
  return text.substr(0, at) + content + text.substr(at + sizeof kContent - 1);
}

json ChatTemplate::to_json() const {
  json object = {{"generation", generation}, {"stop", stop}};
  if (!begin.empty()) object["begin"] = begin;
  for (const auto& [role, text] : roles) object[role] = text;
  return object;
}

}  // namespace aft::server
