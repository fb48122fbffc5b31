#include "tools/server/responses.h"

namespace aft::server {

using nlohmann::json;

std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& data) { return "data: " + dump(data) + "\n\n"; }

json usage_json(const std::vector<std::shared_ptr<Job>>& jobs) {
  const size_t prompt = jobs.front()->request.prompt.size();
  size_t completion = 0;
  for (const auto& job : jobs) completion += job->result().tokens.size();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", jobs.front()->result().cached_tokens}}}};
}

namespace {

json choice(const ResponseContext& context, int index, const std::string& text, bool streamed) {
  json choice = {{"index", index}};
  if (!context.chat) {
    choice["text"] = text;
  } else if (streamed) {
    choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return choice;
}

// Chat's shape: a list of {token, logprob, bytes, top_logprobs}.
json chat_logprobs_json(const std::vector<TokenLogprob>& logprobs) {
  auto candidate = [](const TokenLogprob::Candidate& c) {
    json bytes = json::array();
    for (char byte : c.text) bytes.push_back(static_cast<unsigned char>(byte));
    return json{{"token", c.text}, {"logprob", c.logprob}, {"bytes", bytes}};
  };
  json content = json::array();
  for (const TokenLogprob& scored : logprobs) {
    json entry = candidate(scored.chosen);
    entry["top_logprobs"] = json::array();
    for (const auto& c : scored.top) entry["top_logprobs"].push_back(candidate(c));
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// The completions endpoint's older shape: parallel lists, the alternatives as text -> logprob
// (the likeliest kept where two tokens have the same text).
json completion_logprobs_json(const std::vector<TokenLogprob>& logprobs) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& scored : logprobs) {
    tokens.push_back(scored.chosen.text);
    token_logprobs.push_back(scored.scored ? json(scored.chosen.logprob) : json(nullptr));
    json alternatives = scored.scored ? json::object() : json(nullptr);
    for (const auto& c : scored.top) alternatives.emplace(c.text, c.logprob);
    top.push_back(std::move(alternatives));
    offsets.push_back(scored.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json logprobs_json(const ResponseContext& context, const std::vector<TokenLogprob>* logprobs) {
  if (logprobs == nullptr) return nullptr;
  return context.chat ? chat_logprobs_json(*logprobs) : completion_logprobs_json(*logprobs);
}

json envelope(const ResponseContext& context, bool streamed) {
  return {{"id", context.id},
          {"object", streamed && context.chat ? context.object + ".chunk" : context.object},
          {"created", context.created},
          {"model", context.model}};
}

}  // namespace

json completion_json(const ResponseContext& context, const CompletionRequest& request,
                     const std::vector<ChoiceOutput>& choices, const json& usage) {
  json response = envelope(context, false);
  response["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& output = choices[i];
    json entry = choice(context, static_cast<int>(i), output.text, false);
    entry["logprobs"] =
        logprobs_json(context, request.top_logprobs >= 0 ? &output.logprobs : nullptr);
    entry["finish_reason"] = output.result.finish_reason;
    if (request.return_tokens) entry["tokens"] = output.result.tokens;
    response["choices"].push_back(std::move(entry));
  }
  response["usage"] = usage;
  return response;
}

json chunk_json(const ResponseContext& context, int index, const std::string& text,
                const std::string& finish_reason, const std::vector<TokenLogprob>* logprobs) {
  json response = envelope(context, true);
  json entry = choice(context, index, text, true);
  entry["logprobs"] = logprobs_json(context, logprobs);
  entry["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  response["choices"] = json::array({entry});
  return response;
}

json role_chunk_json(const ResponseContext& context, int index) {
  json response = envelope(context, true);
  response["choices"] = json::array({{{"index", index},
                                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                                      {"finish_reason", nullptr}}});
  return response;
}

json usage_chunk_json(const ResponseContext& context, const json& usage) {
  json response = envelope(context, true);
  response["choices"] = json::array();
  response["usage"] = usage;
  return response;
}

json error_json(const std::string& message, const std::string& type, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", nullptr}}}};
}

}  // namespace aft::server
