#include "tools/server/request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>

namespace aft::server {

using nlohmann::json;

namespace {

// A value as a message shows it: its JSON, cut short.
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

RequestError invalid(const std::string& param, const std::string& message) {
  return RequestError(400, "'" + param + "': " + message, param);
}

double number_field(const json& body, const char* name, double min, double max) {
  const json& value = body.at(name);
  if (!value.is_number()) throw invalid(name, "expected a number, found " + shown(value));
  const double x = value.get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    throw invalid(name, "expected a number in [" + json(min).dump() + ", " + json(max).dump() +
                            "], found " + shown(value));
  }
  return x;
}

int64_t integer_field(const json& body, const char* name, int64_t min, int64_t max) {
  const json& value = body.at(name);
  if (!value.is_number_integer()) {
    throw invalid(name, "expected an integer, found " + shown(value));
  }
  const bool in_range =
      value.is_number_unsigned()
          ? value.get<uint64_t>() <= static_cast<uint64_t>(max) && value.get<int64_t>() >= min
          : value.get<int64_t>() >= min && value.get<int64_t>() <= max;
  if (!in_range) {
    throw invalid(name, "expected an integer in [" + std::to_string(min) + ", " +
                            std::to_string(max) + "], found " + shown(value));
  }
  return value.get<int64_t>();
}

bool bool_field(const json& body, const char* name) {
  const json& value = body.at(name);
  if (!value.is_boolean()) throw invalid(name, "expected true or false, found " + shown(value));
  return value.get<bool>();
}

bool present(const json& body, const char* name) {
  return body.contains(name) && !body.at(name).is_null();
}

std::vector<aft_logit_bias> logit_bias_field(const json& value, const ModelLimits& limits) {
  if (!value.is_object()) {
    throw invalid("logit_bias", "expected an object of token id -> bias, found " + shown(value));
  }
  std::vector<aft_logit_bias> biases;
  std::vector<bool> banned(static_cast<size_t>(limits.vocab_size), false);
  int32_t n_banned = 0;
  for (const auto& [key, bias] : value.items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    const long long token = digits ? std::stoll(key) : -1;
    if (token < 0 || token >= limits.vocab_size) {
      throw invalid("logit_bias", "key \"" + key + "\" is not a token id in [0, " +
                                      std::to_string(limits.vocab_size - 1) + "]");
    }
    if (!bias.is_number() || std::isnan(bias.get<double>()) || bias.get<double>() > 1e30) {
      throw invalid("logit_bias",
                    "the bias of token " + key + " must be a number, found " + shown(bias));
    }
    // Below float's range a bias bans the token (-inf), as -inf itself would.
    const double wanted = bias.get<double>();
    const float as_float = wanted < -std::numeric_limits<float>::max()
                               ? -std::numeric_limits<float>::infinity()
                               : static_cast<float>(wanted);
    if (std::isinf(as_float) && !banned[static_cast<size_t>(token)]) {
      banned[static_cast<size_t>(token)] = true;
      ++n_banned;
    }
    biases.push_back({static_cast<int32_t>(token), as_float});
  }
  if (n_banned == limits.vocab_size) {
    throw invalid("logit_bias",
                  "every token of the vocabulary is banned (a bias of -inf or below "
                  "float's range): none is left to sample");
  }
  return biases;
}

std::vector<std::string> stop_field(const json& value) {
  std::vector<std::string> stops;
  if (value.is_string()) {
    stops.push_back(value.get<std::string>());
  } else if (value.is_array() && value.size() <= 16) {
    for (const json& stop : value) {
      if (!stop.is_string()) throw invalid("stop", "expected strings, found " + shown(stop));
      stops.push_back(stop.get<std::string>());
    }
  } else {
    throw invalid("stop", "expected a string or a list of at most 16 strings");
  }
  for (const std::string& stop : stops) {
    if (stop.empty()) throw invalid("stop", "a stop string is empty");
    // Each token's text is matched against every stop string's prefixes on the scheduler's thread.
    if (stop.size() > 1024) throw invalid("stop", "a stop string is longer than 1024 bytes");
  }
  return stops;
}

// response_format: the schema of the JSON object the completion is to be, or null for any text.
// The schema is read again from the body's text, in an ordered_json that keeps its properties'
// order: the order they are written in.
std::shared_ptr<const JsonSchema> response_format_field(const json& value,
                                                        const std::string& body_text) {
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string()) {
    throw invalid("response_format",
                  "expected {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                  "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": ...}}, found " +
                      shown(value));
  }
  const std::string type = value["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return JsonSchema::any_object();
  if (type != "json_schema") {
    throw invalid("response_format",
                  "unknown type \"" + type + "\" (text, json_object or json_schema)");
  }
  const json& format = value.contains("json_schema") ? value["json_schema"] : json(nullptr);
  if (!format.is_object() || !format.contains("schema") || !format["schema"].is_object()) {
    throw invalid(
        "response_format",
        "json_schema: expected {\"name\": ..., \"schema\": {...}}, found " + shown(format));
  }
  const auto ordered = nlohmann::ordered_json::parse(body_text);
  try {
    return JsonSchema::compile(ordered["response_format"]["json_schema"]["schema"]);
  } catch (const std::invalid_argument& error) {
    throw invalid("response_format", error.what());
  }
}

// The choices a request may ask for (n, best_of): each takes a slot or a place in the queue.
constexpr int64_t kMaxChoices = 16;

// The fields the two endpoints share: sampling, length, stop, streaming, choices.
void parse_generation_fields(const json& body, const std::string& body_text,
                             const ModelLimits& limits, CompletionRequest& request) {
  // OpenAI's defaults (temperature 1, no filters), not aft-run's.
  aft_sampler_params& s = request.sampling;
  s = aft_sampler_default_params();
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  const char* max_tokens_name =
      present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(body, max_tokens_name)) {
    request.max_tokens = static_cast<int32_t>(integer_field(
        body, max_tokens_name, request.echo ? 0 : 1, std::numeric_limits<int32_t>::max()));
  }
  if (present(body, "temperature")) {
    s.temperature = static_cast<float>(number_field(body, "temperature", 0, 100));
  }
  if (present(body, "top_k")) {
    s.top_k =
        static_cast<int32_t>(integer_field(body, "top_k", 0, std::numeric_limits<int32_t>::max()));
  }
  if (present(body, "top_p")) s.top_p = static_cast<float>(number_field(body, "top_p", 1e-6, 1));
  if (present(body, "min_p")) s.min_p = static_cast<float>(number_field(body, "min_p", 0, 1));
  if (present(body, "repeat_penalty")) {
    s.repeat_penalty = static_cast<float>(number_field(body, "repeat_penalty", 0.01, 100));
  }
  if (present(body, "repeat_last_n")) {
    s.repeat_last_n = static_cast<int32_t>(
        integer_field(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()));
  }
  if (present(body, "frequency_penalty")) {
    s.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty", -2, 2));
  }
  if (present(body, "presence_penalty")) {
    s.presence_penalty = static_cast<float>(number_field(body, "presence_penalty", -2, 2));
  }
  if (present(body, "seed")) {
    s.seed = static_cast<uint64_t>(integer_field(body, "seed", std::numeric_limits<int64_t>::min(),
                                                 std::numeric_limits<int64_t>::max()));
  } else {
    s.seed = std::random_device{}();
  }
  if (present(body, "logit_bias"))
    request.logit_bias = logit_bias_field(body["logit_bias"], limits);
  // llama-server's: the end of text banned, so that the completion runs to max_tokens.
  const int32_t end_of_text = aft_model_end_of_text(limits.model);
  if (present(body, "ignore_eos") && bool_field(body, "ignore_eos") && end_of_text >= 0) {
    request.logit_bias.push_back({end_of_text, -std::numeric_limits<float>::infinity()});
  }
  if (present(body, "stop")) request.stop = stop_field(body["stop"]);
  if (present(body, "stream")) request.stream = bool_field(body, "stream");
  if (present(body, "stream_options")) {
    const json& options = body["stream_options"];
    if (!options.is_object()) {
      throw invalid("stream_options", "expected an object, found " + shown(options));
    }
    if (present(options, "include_usage")) {
      request.include_usage =
          options["include_usage"].is_boolean() && options["include_usage"].get<bool>();
    }
  }
  if (present(body, "return_tokens")) request.return_tokens = bool_field(body, "return_tokens");
  if (present(body, "response_format")) {
    request.json_schema = response_format_field(body["response_format"], body_text);
  }
  if (present(body, "n")) {
    request.n = static_cast<int32_t>(integer_field(body, "n", 1, kMaxChoices));
  }
  request.best_of = request.n;
  // Features not served yet are refused rather than silently ignored.
  for (const char* name : {"suffix", "tools", "functions"}) {
    const json value = present(body, name) ? body[name] : json(nullptr);
    if (!value.is_null() && value != false && value != 0 && value != "" && value != json::array()) {
      throw invalid(name,
                    "not supported by aft-server yet (docs/server.md), found " + shown(value));
    }
  }
}

// The likeliest tokens a step's log-probabilities list at most (OpenAI's chat limit).
constexpr int64_t kMaxTopLogprobs = 20;

void check_prompt_length(const CompletionRequest& request, const ModelLimits& limits,
                         const std::string& param) {
  if (request.prompt.empty()) throw invalid(param, "the prompt is empty: give at least one token");
  if (limits.max_positions > 0 &&
      static_cast<int64_t>(request.prompt.size()) > limits.max_positions) {
    throw invalid(param, "the prompt's " + std::to_string(request.prompt.size()) +
                             " tokens exceed the model's limit of " +
                             std::to_string(limits.max_positions) + " positions");
  }
}

}  // namespace

namespace {

// The deepest nesting of arrays and objects in JSON text (brackets inside strings not counted).
// Checked before parsing: nlohmann's dump() recurses, and a message showing a prompt of 400,000
// nested '[' overflowed the handler thread's stack.
size_t nesting_depth(const std::string& text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

constexpr size_t kMaxNesting = 64;

}  // namespace

json parse_object(const std::string& body) {
  if (nesting_depth(body) > kMaxNesting) {
    throw RequestError(400, "the request body nests arrays and objects deeper than " +
                                std::to_string(kMaxNesting) + " levels");
  }
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw RequestError(400, "the request body is not valid JSON");
  if (!parsed.is_object()) throw RequestError(400, "the request body must be a JSON object");
  return parsed;
}

std::vector<int32_t> tokenize(const aft_model* model, const std::string& text,
                              const std::string& param) {
  size_t n = 0;
  aft_status status = aft_tokenize(model, text.data(), text.size(), nullptr, 0, &n);
  std::vector<int32_t> tokens(n);
  if (status == AFT_ERR_BUFFER_TOO_SMALL) {
    status = aft_tokenize(model, text.data(), text.size(), tokens.data(), tokens.size(), &n);
  }
  if (status != AFT_OK) throw invalid(param, std::string("cannot tokenize: ") + aft_last_error());
  tokens.resize(n);
  return tokens;
}

std::vector<int32_t> token_array(const json& value, const ModelLimits& limits,
                                 const std::string& param) {
  std::vector<int32_t> tokens;
  tokens.reserve(value.size());
  for (const json& token : value) {
    if (!token.is_number_integer() || token.get<int64_t>() < 0 ||
        token.get<int64_t>() >= limits.vocab_size) {
      throw invalid(param, "token " + shown(token) + " is not a token id in [0, " +
                               std::to_string(limits.vocab_size - 1) + "]");
    }
    tokens.push_back(static_cast<int32_t>(token.get<int64_t>()));
  }
  return tokens;
}

CompletionRequest parse_completion_request(const std::string& body_text,
                                           const ModelLimits& limits) {
  const json body = parse_object(body_text);
  CompletionRequest request;
  if (!present(body, "prompt")) throw invalid("prompt", "missing");
  const json& prompt = body["prompt"];
  if (prompt.is_string()) {
    request.prompt = tokenize(limits.model, prompt.get<std::string>(), "prompt");
  } else if (prompt.is_array()) {
    request.prompt = token_array(prompt, limits, "prompt");
  } else {
    throw invalid("prompt", "expected a string or an array of token ids, found " + shown(prompt));
  }
  check_prompt_length(request, limits, "prompt");
  if (present(body, "echo")) request.echo = bool_field(body, "echo");
  parse_generation_fields(body, body_text, limits, request);
  if (present(body, "logprobs")) {
    request.top_logprobs =
        static_cast<int32_t>(integer_field(body, "logprobs", 0, kMaxTopLogprobs));
  }
  if (present(body, "top_logprobs")) {
    throw invalid("top_logprobs", "not a field of /v1/completions: give logprobs the count");
  }
  if (present(body, "best_of")) {
    request.best_of = static_cast<int32_t>(integer_field(body, "best_of", request.n, kMaxChoices));
    // The best are known only once every candidate has ended.
    if (request.ranked() && request.stream) {
      throw invalid("best_of", "cannot be streamed when greater than n");
    }
  }
  return request;
}

CompletionRequest parse_chat_request(const std::string& body_text, const ModelLimits& limits,
                                     const ChatTemplate& chat_template) {
  const json body = parse_object(body_text);
  if (!present(body, "messages")) throw invalid("messages", "missing");
  const json& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) {
    throw invalid("messages", "expected a non-empty list of messages");
  }
  for (const json& message : messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content") || !message["content"].is_string()) {
      throw invalid("messages", "each message needs a string \"role\" and a string \"content\"");
    }
    const std::string role = message["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant") {
      throw invalid("messages", "unknown role \"" + role + "\" (system, user or assistant)");
    }
  }
  CompletionRequest request;
  std::string prompt;
  try {
    prompt = chat_template.render(messages);
  } catch (const std::invalid_argument& error) {
    throw invalid("messages", error.what());
  }
  request.prompt = tokenize(limits.model, prompt, "messages");
  check_prompt_length(request, limits, "messages");
  if (present(body, "echo") && body["echo"] != false) {
    throw invalid("echo", "not a field of chat completions, found " + shown(body["echo"]));
  }
  parse_generation_fields(body, body_text, limits, request);
  if (present(body, "best_of") && body["best_of"] != request.n) {
    throw invalid("best_of", "not a field of chat completions, found " + shown(body["best_of"]));
  }
  if (present(body, "logprobs") && bool_field(body, "logprobs")) request.top_logprobs = 0;
  if (present(body, "top_logprobs")) {
    const auto n = static_cast<int32_t>(integer_field(body, "top_logprobs", 0, kMaxTopLogprobs));
    if (request.top_logprobs < 0) {
      throw invalid("top_logprobs", "needs \"logprobs\": true");
    }
    request.top_logprobs = n;
  }
  request.answered = [chat_template, messages](const std::string& answer) {
    return chat_template.render_answered(messages, answer);
  };
  // A chat turn ends where the model starts the next speaker's turn.
  if (request.stop.empty()) request.stop = chat_template.stop;
  return request;
}

}  // namespace aft::server
