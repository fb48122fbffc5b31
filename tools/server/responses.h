// OpenAI's response shapes: a completion, a streamed chunk, usage, an error object; and the
// server-sent events that carry a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/server/job.h"

namespace aft::server {

// What every response of one request shares.
struct ResponseContext {
  std::string id;      // "cmpl-7"
  std::string object;  // "text_completion", "chat.completion" (".chunk" when streamed)
  std::string model;
  int64_t created = 0;  // Unix seconds
  bool chat = false;
};

// One choice of a whole response: what its job wrote, as the handler took it, and its result.
struct ChoiceOutput {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  Job::Result result;
};

// The usage of a request's jobs, all done: the prompt counted once, the completion tokens of every
// choice generated (best_of's candidates too), the cached tokens of the first choice's.
nlohmann::json usage_json(const std::vector<std::shared_ptr<Job>>& jobs);
// choices in the order returned (their index); logprobs as the request asked.
nlohmann::json completion_json(const ResponseContext& context, const CompletionRequest& request,
                               const std::vector<ChoiceOutput>& choices,
                               const nlohmann::json& usage);
// A streamed piece of choice index's text; finish_reason empty: null (more to come). logprobs:
// those of the tokens generated since the last chunk, or nullptr when the request asked for none.
nlohmann::json chunk_json(const ResponseContext& context, int index, const std::string& text,
                          const std::string& finish_reason,
                          const std::vector<TokenLogprob>* logprobs = nullptr);
// A chat stream's first chunk of a choice, as OpenAI's: the delta's role, no text yet.
nlohmann::json role_chunk_json(const ResponseContext& context, int index);
// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseContext& context, const nlohmann::json& usage);
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& param);

// One server-sent event: "data: JSON\n\n".
std::string sse_event(const nlohmann::json& data);
constexpr const char kSseDone[] = "data: [DONE]\n\n";

// JSON text for the wire: invalid UTF-8 (never produced, but never fatal) becomes U+FFFD.
std::string dump(const nlohmann::json& value);

}  // namespace aft::server
