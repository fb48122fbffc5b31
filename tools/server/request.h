// The JSON of a completion request, checked field by field against the model: every refusal names
// its field, as OpenAI's error objects do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aft.h"
#include "tools/server/chat_template.h"
#include "tools/server/json_schema.h"

namespace aft::server {

// A request the server refuses: the HTTP status, the message and the field at fault ("" if none).
struct RequestError : std::runtime_error {
  RequestError(int status, const std::string& message, std::string param = "",
               std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        type(std::move(type)) {}
  int status;
  std::string param;
  std::string type;
};

// What a request is checked against.
struct ModelLimits {
  const aft_model* model = nullptr;
  int32_t vocab_size = 0;
  int64_t max_positions = 0;  // 0 = unlimited
};

struct CompletionRequest {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  aft_sampler_params sampling{};  // logit_bias: the vector below, attached when the sampler is made
  std::vector<aft_logit_bias> logit_bias;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  bool return_tokens = false;  // an extension: the completion's token ids in the choice
  // logprobs (completions: N; chat: true, with top_logprobs N): each generated token's
  // log-probability and the N likeliest tokens at its step. -1: none asked.
  int32_t top_logprobs = -1;
  // echo (completions): the prompt's text comes before the completion's, and with logprobs the
  // prompt's tokens are scored too (the first, which nothing predicts, as null). max_tokens may
  // then be 0: the prompt scored, nothing generated.
  bool echo = false;
  bool prompt_logprobs() const { return echo && top_logprobs >= 0; }
  // n choices, each sampled with seed + its index; best_of (completions) > n: that many
  // generated, the n with the highest log-probability per token returned.
  // response_format json_object or json_schema: the completion is one JSON object of this
  // schema's shape, and ends where it closes (json_grammar.h); null: any text.
  std::shared_ptr<const JsonSchema> json_schema;
  int32_t n = 1;
  int32_t best_of = 1;
  bool ranked() const { return best_of > n; }
  // A chat's: the conversation with the answer, as the next turn's prompt will begin.
  std::function<std::string(const std::string& answer)> answered;
};

// The body of POST /v1/completions. Throws RequestError.
CompletionRequest parse_completion_request(const std::string& body, const ModelLimits& limits);

// The body of POST /v1/chat/completions: the messages become a prompt by the template, whose stop
// strings end the turn unless the request gives its own.
CompletionRequest parse_chat_request(const std::string& body, const ModelLimits& limits,
                                     const ChatTemplate& chat_template);

// A body parsed as a JSON object, or RequestError.
nlohmann::json parse_object(const std::string& body);

// text as the model's tokens; RequestError naming param if the tokenizer refuses it.
std::vector<int32_t> tokenize(const aft_model* model, const std::string& text,
                              const std::string& param);

// A JSON array of token ids checked against the vocabulary.
std::vector<int32_t> token_array(const nlohmann::json& value, const ModelLimits& limits,
                                 const std::string& param);

}  // namespace aft::server
