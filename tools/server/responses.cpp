#include "tools/server/responses.h"

namespace aft::server {

using nlohmann::json;

std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& data) { return "data: " + dump(data) + "\n\n"; }

json usage_json(const CompletionRequest& request, const Job::Result& result) {
  const size_t completion = result.tokens.size();
  return {{"prompt_tokens", request.prompt.size()},
          {"completion_tokens", completion},
          {"total_tokens", request.prompt.size() + completion},
          {"prompt_tokens_details", {{"cached_tokens", result.cached_tokens}}}};
}

namespace {

json choice(const ResponseContext& context, const std::string& text, bool streamed) {
  json choice = {{"index", 0}};
  if (!context.chat) {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  } else if (streamed) {
    choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return choice;
}

json envelope(const ResponseContext& context, bool streamed) {
  return {{"id", context.id},
          {"object", streamed && context.chat ? context.object + ".chunk" : context.object},
          {"created", context.created},
          {"model", context.model}};
}

}  // namespace

json completion_json(const ResponseContext& context, const CompletionRequest& request,
                     const std::string& text, const Job::Result& result) {
  json response = envelope(context, false);
  json first = choice(context, text, false);
  first["finish_reason"] = result.finish_reason;
  if (request.return_tokens) first["tokens"] = result.tokens;
  response["choices"] = json::array({first});
  response["usage"] = usage_json(request, result);
  return response;
}

json chunk_json(const ResponseContext& context, const std::string& text,
                const std::string& finish_reason) {
  json response = envelope(context, true);
  json first = choice(context, text, true);
  first["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  response["choices"] = json::array({first});
  return response;
}

json role_chunk_json(const ResponseContext& context) {
  json response = envelope(context, true);
  response["choices"] = json::array({{{"index", 0},
                                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                                      {"finish_reason", nullptr}}});
  return response;
}

json usage_chunk_json(const ResponseContext& context, const CompletionRequest& request,
                      const Job::Result& result) {
  json response = envelope(context, true);
  response["choices"] = json::array();
  response["usage"] = usage_json(request, result);
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
