#include "tools/server/routes.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "tools/cli/elapsed.h"
#include "tools/server/client_connection.h"
#include "tools/server/job.h"
#include "tools/server/responses.h"
#include "tools/server/slot_files.h"

namespace aft::server {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

namespace {

using cli::Clock;
using cli::ms_since;

void send_error(httplib::Response& res, const RequestError& error) {
  send_json(res, error.status, error_json(error.what(), error.type, error.param));
}

// httplib 0.11 holds a body to --max-body-bytes by its Content-Length alone: a chunked body, or a
// compressed one (which it inflates), would be read whole whatever its size, and a body with
// neither header is read until the client closes or --timeout passes. So a body comes with its
// length, uncompressed (the refusal asks the client to close: the body is left unread).
bool refuse_unbounded_body(const httplib::Request& req, httplib::Response& res) {
  if (req.method != "POST" && req.method != "PUT" && req.method != "PATCH") return false;
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    res.set_header("Connection", "close");
    send_error(res, RequestError(415, "Content-Encoding " + encoding +
                                          " is not accepted: send the body uncompressed"));
    return true;
  }
  if (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length")) {
    res.set_header("Connection", "close");
    send_error(res, RequestError(411,
                                 "the body needs a Content-Length header (chunked transfer "
                                 "encoding is not accepted; no body: Content-Length: 0)"));
    return true;
  }
  return false;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The request's line on stderr: id, tokens in and out, cached tokens, times.
void log_job(const Job& job, const char* outcome) {
  const Job::Result& r = job.result();
  const double total = ms_since(job.created);
  std::fprintf(stderr,
               "aft-server: request %llu %s | prompt %zu tokens, %lld cached | completion %zu "
               "tokens (%s) | queue %.1f ms, prefill %.1f ms, decode %.1f ms, total %.1f ms\n",
               static_cast<unsigned long long>(job.id), outcome, job.request.prompt.size(),
               static_cast<long long>(r.cached_tokens), r.tokens.size(),
               r.error.empty() ? r.finish_reason.c_str() : r.error.c_str(), r.queue_ms,
               r.prefill_ms, r.decode_ms, total);
}

void count_job(ServerState& state, const Job& job) {
  const Job::Result& r = job.result();
  ++state.metrics.requests;
  if (!r.error.empty()) ++state.metrics.requests_failed;
  state.metrics.prompt_tokens += job.request.prompt.size();
  state.metrics.completion_tokens += r.tokens.size();
  state.metrics.cached_tokens += static_cast<uint64_t>(r.cached_tokens);
}

void stream(httplib::Response& res, ServerState& state, std::shared_ptr<Job> job,
            ResponseContext context) {
  res.set_header("Cache-Control", "no-cache");
  ++state.open_streams;
  res.set_chunked_content_provider(
      "text/event-stream",
      [&state, job, context](size_t offset, httplib::DataSink& sink) {
        std::string text;
        std::vector<TokenLogprob> logprobs;
        const bool with_logprobs = job->request.top_logprobs >= 0;
        const bool done =
            job->take(&text, std::chrono::seconds(1), with_logprobs ? &logprobs : nullptr);
        std::string events;
        if (offset == 0 && context.chat) events += sse_event(role_chunk_json(context));
        if (!text.empty() || !logprobs.empty()) {
          events += sse_event(chunk_json(context, text, "", with_logprobs ? &logprobs : nullptr));
        }
        // A second with nothing to send (a queued request, a long prompt): an SSE comment, which
        // clients ignore, so that a client gone away is noticed by a failed write.
        if (!done && events.empty()) events += ": waiting\n\n";
        if (done) {
          const Job::Result& result = job->result();
          if (!result.error.empty()) {
            events += sse_event(error_json(result.error, "server_error", ""));
          } else {
            events += sse_event(chunk_json(context, "", result.finish_reason));
            if (job->request.include_usage) {
              events += sse_event(usage_chunk_json(context, job->request, result));
            }
          }
          events += kSseDone;
        }
        // A client gone away cancels its slot: the scheduler frees it at its next step. (Not
        // sink.is_writable(): it is false while the socket's buffer is full, a slow reader.)
        if (!sink.write(events.data(), events.size())) {
          job->cancel();
          return false;
        }
        if (done) {
          count_job(state, *job);
          log_job(*job, "streamed");
          sink.done();
        }
        return true;
      },
      [&state, job](bool success) {
        if (!success) job->cancel();
        --state.open_streams;
      });
}

// The shared cache's longest prefix of the prompt, looked up here rather than on the scheduler's
// thread (its round trips would stall every stream), and only for what the local cache lacks.
void find_shared_prefix(ServerState& state, Job& job) {
  const std::vector<int32_t>& prompt = job.request.prompt;
  const size_t local = state.scheduler->cache().longest_prefix_length(prompt);
  if (local >= prompt.size()) return;
  const auto start = Clock::now();
  job.shared_prefix = state.shared_cache->find(prompt, local);
  if (state.options.verbose) {
    std::fprintf(stderr,
                 "aft-server: request %llu: %zu of %zu prompt tokens in the local cache, %zu in "
                 "the shared one (%.2f ms)\n",
                 static_cast<unsigned long long>(job.id), local, prompt.size(),
                 job.shared_prefix ? job.shared_prefix->tokens.size() : size_t{0}, ms_since(start));
  }
}

void complete(const httplib::Request& req, httplib::Response& res, ServerState& state, bool chat) {
  CompletionRequest request;
  try {
    request = chat ? parse_chat_request(req.body, state.limits, state.chat_template)
                   : parse_completion_request(req.body, state.limits);
  } catch (const RequestError& error) {
    ++state.metrics.requests_failed;
    return send_error(res, error);
  }
  const uint64_t id = state.next_id++;
  ResponseContext context;
  context.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  context.object = chat ? "chat.completion" : "text_completion";
  context.model = state.model_name;
  context.created = unix_seconds();
  context.chat = chat;
  auto job = std::make_shared<Job>(id, std::move(request));
  if (state.shared_cache != nullptr) find_shared_prefix(state, *job);
  if (!state.scheduler->submit(job)) {
    ++state.metrics.requests_failed;
    res.set_header("Retry-After", "1");
    return send_error(res,
                      RequestError(503,
                                   "every slot is busy and the queue is full (--parallel " +
                                       std::to_string(state.options.parallel) + ", --max-queue " +
                                       std::to_string(state.options.max_queue) + "): retry later",
                                   "", "server_busy"));
  }
  if (job->request.stream) return stream(res, state, job, context);

  // Nothing is written until the answer is whole, so the client's leaving is looked for on the
  // socket: it cancels the job, which frees its slot (or its place in the queue) at the
  // scheduler's next step.
  const ClientConnection connection(req);
  std::string text;
  std::vector<TokenLogprob> logprobs;
  while (!job->take(&text, std::chrono::milliseconds(200), &logprobs)) {
    if (!job->cancelled() && connection.closed_by_client()) job->cancel();
  }
  if (job->cancelled()) {  // the scheduler has logged it; written in case the client still reads
    return send_error(
        res, RequestError(500, "cancelled: the client closed its end of the connection", "",
                          "server_error"));
  }
  count_job(state, *job);
  log_job(*job, "answered");
  if (!job->result().error.empty()) {
    return send_error(res, RequestError(500, job->result().error, "", "server_error"));
  }
  send_json(res, 200, completion_json(context, job->request, text, job->result(), logprobs));
}

void tokenize_route(const httplib::Request& req, httplib::Response& res, ServerState& state) {
  try {
    const json body = parse_object(req.body);
    if (!body.contains("content") || !body["content"].is_string()) {
      throw RequestError(400, "'content': expected the text to tokenize", "content");
    }
    send_json(
        res, 200,
        {{"tokens", tokenize(state.limits.model, body["content"].get<std::string>(), "content")}});
  } catch (const RequestError& error) {
    send_error(res, error);
  }
}

void detokenize_route(const httplib::Request& req, httplib::Response& res, ServerState& state) {
  try {
    const json body = parse_object(req.body);
    if (!body.contains("tokens") || !body["tokens"].is_array()) {
      throw RequestError(400, "'tokens': expected an array of token ids", "tokens");
    }
    const std::vector<int32_t> tokens = token_array(body["tokens"], state.limits, "tokens");
    aft_detokenizer* raw = nullptr;
    if (aft_detokenizer_create(state.limits.model, &raw) != AFT_OK) {
      throw RequestError(500, aft_last_error(), "", "server_error");
    }
    std::unique_ptr<aft_detokenizer, void (*)(aft_detokenizer*)> detokenizer(raw,
                                                                             aft_detokenizer_free);
    std::string content;
    std::vector<char> piece(64);
    auto add = [&](auto call) {
      size_t length = 0;
      aft_status status = call(&length);
      if (status == AFT_ERR_BUFFER_TOO_SMALL) {
        piece.resize(length);
        status = call(&length);
      }
      if (status != AFT_OK) throw RequestError(500, aft_last_error(), "", "server_error");
      content.append(piece.data(), length);
    };
    for (int32_t token : tokens) {
      add([&](size_t* length) {
        return aft_detokenizer_push(detokenizer.get(), token, piece.data(), piece.size(), length);
      });
    }
    add([&](size_t* length) {
      return aft_detokenizer_flush(detokenizer.get(), piece.data(), piece.size(), length);
    });
    send_json(res, 200, {{"content", content}});
  } catch (const RequestError& error) {
    send_error(res, error);
  }
}

}  // namespace

void install_routes(httplib::Server& http, ServerState& state) {
  http.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (!state.options.api_key.empty() &&
        req.get_header_value("Authorization") != "Bearer " + state.options.api_key) {
      send_error(res, RequestError(401,
                                   req.has_header("Authorization")
                                       ? "the API key is wrong (Authorization: Bearer KEY)"
                                       : "no API key: send the header Authorization: Bearer KEY",
                                   "", "authentication_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!state.ready) {
      res.set_header("Retry-After", "1");
      send_error(res, RequestError(503, "the model is loading", "", "server_busy"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (answer_bodyless_slot_action(req, res, state) || refuse_unbounded_body(req, res)) {
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  http.Get("/health", [&state](const httplib::Request&, httplib::Response& res) {
    if (state.ready) return send_json(res, 200, {{"status", "ok"}});
    send_json(res, 503, {{"status", "loading"}});
  });
  http.Get("/v1/models", [&state](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", state.model_name},
                                      {"object", "model"},
                                      {"created", 0},
                                      {"owned_by", "aft"}}})}});
  });
  // llama-server's /props, as far as it applies: the chat template and the slots.
  http.Get("/props", [&state](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"model", state.model_name},
               {"total_slots", state.options.parallel},
               {"chat_template_name", state.chat_template.name},
               {"chat_template", state.chat_template.to_json()}});
  });
  http.Post("/v1/completions", [&state](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, state, false);
  });
  http.Post("/v1/chat/completions", [&state](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, state, true);
  });
  http.Post("/tokenize", [&state](const httplib::Request& req, httplib::Response& res) {
    tokenize_route(req, res, state);
  });
  http.Post("/detokenize", [&state](const httplib::Request& req, httplib::Response& res) {
    detokenize_route(req, res, state);
  });
  http.Get("/metrics", [&state](const httplib::Request&, httplib::Response& res) {
    res.set_content(state.metrics.prometheus(state.scheduler->cache(), state.scheduler->slots()),
                    "text/plain; version=0.0.4");
  });
  install_slot_routes(http, state);

  // httplib's own refusals (no route, a body too large, a malformed request) as error objects.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&state](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "HTTP " + std::to_string(res.status);
        std::string type = "invalid_request_error";
        if (res.status == 404) {
          message = "unknown route: " + req.method + " " + req.path;
          type = "not_found_error";
        } else if (res.status == 400) {
          message = "a malformed request, or one not received whole within --timeout (" +
                    std::to_string(state.options.timeout_seconds) + " s)";
        } else if (res.status == 413 &&
                   req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
          // httplib limits form bodies to 8 KiB whatever --max-body-bytes (curl -d sends that
          // type).
          message =
              "a form-encoded body is limited to 8192 bytes: send the JSON with "
              "Content-Type: application/json";
        } else if (res.status == 413) {
          message = "the request body exceeds the limit of " +
                    std::to_string(state.options.max_body_bytes) + " bytes (--max-body-bytes)";
        }
        send_json(res, res.status, error_json(message, type, ""));
        return httplib::Server::HandlerResponse::Handled;
      }));
  // Anything a handler did not expect (out of memory, say) is a 500 with an error object.
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr failure) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          message += std::string(": ") + e.what();
        } catch (...) {
        }
        send_json(res, 500, error_json(message, "server_error", ""));
      });
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    // Completions answered by a job have their own line (log_job).
    const bool job_route = req.path == "/v1/completions" || req.path == "/v1/chat/completions";
    if (job_route && res.status == 200) return;
    if (req.path == "/health" || req.path == "/metrics") return;  // polled
    std::fprintf(stderr, "aft-server: %s %s %d %s\n", req.method.c_str(), req.path.c_str(),
                 res.status, res.status >= 400 ? res.body.c_str() : "");
  });
}

}  // namespace aft::server
