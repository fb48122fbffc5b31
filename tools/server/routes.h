// The HTTP endpoints (docs/server.md) over the scheduler: OpenAI's completions and chat
// completions, models, health, tokenize/detokenize, metrics; authorization and error objects.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tools/server/metrics.h"
#include "tools/server/options.h"
#include "tools/server/request.h"
#include "tools/server/scheduler.h"
#include "tools/server/shared_cache.h"

namespace aft::server {

// What the handlers share. The model and scheduler are set before ready becomes true; until then
// every route but /health answers 503.
struct ServerState {
  explicit ServerState(const Options& options) : options(options) {}
  const Options& options;
  std::string model_name;
  ModelLimits limits;
  ChatTemplate chat_template;
  Scheduler* scheduler = nullptr;
  SharedCache* shared_cache = nullptr;  // --redis
  std::atomic<bool> ready{false};
  Metrics metrics;
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> open_streams{0};  // streamed responses not yet fully written
};

void install_routes(httplib::Server& http, ServerState& state);

// A JSON body with its status (the routes here and slot_files.cpp's).
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

}  // namespace aft::server
