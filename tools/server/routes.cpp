#include "tools/server/routes.h"

#include <algorithm>
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

// A job's line on stderr: id, tokens in and out, cached tokens, times.
void log_job(const Job& job, const char* outcome) {
  const Job::Result& r = job.result();
  const double total = ms_since(job.created);
  std::fprintf(stderr,
               "aft-server: %s %s | prompt %zu tokens, %lld cached | completion %zu tokens (%s) | "
               "queue %.1f ms, prefill %.1f ms, decode %.1f ms, total %.1f ms\n",
               job.name().c_str(), outcome, job.request.prompt.size(),
               static_cast<long long>(r.cached_tokens), r.tokens.size(),
               r.error.empty() ? r.finish_reason.c_str() : r.error.c_str(), r.queue_ms,
               r.prefill_ms, r.decode_ms, total);
}

// A request's jobs, all done, in the metrics (the prompt once) and the log (a line each).
void count_request(ServerState& state, const std::vector<std::shared_ptr<Job>>& jobs,
                   const char* outcome) {
  const Job& first = *jobs.front();
  ++state.metrics.requests;
  state.metrics.prompt_tokens += first.request.prompt.size();
  state.metrics.cached_tokens += static_cast<uint64_t>(first.result().cached_tokens);
  bool failed = false;
  for (const auto& job : jobs) {
    failed |= !job->result().error.empty();
    state.metrics.completion_tokens += job->result().tokens.size();
    log_job(*job, outcome);
  }
  if (failed) ++state.metrics.requests_failed;
}

// The first error among the jobs' results, or "".
std::string first_error(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (const auto& job : jobs) {
    if (!job->result().error.empty()) return job->result().error;
  }
  return "";
}

void cancel_all(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (const auto& job : jobs) job->cancel();
}

// A stream's progress over its request's choices.
struct StreamProgress {
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<bool> ended;
  std::string error;  // the first choice to fail: the others are cancelled, their text not sent
};

// The events of a stream's next call (waiting up to a second for something to send): each
// choice's text since the last call (chat: its role first), then its end; once every choice has
// ended, the usage (if asked) or the error, and [DONE]. Sets *done then.
std::string next_events(StreamProgress& progress, const ResponseContext& context, bool first_call,
                        bool* done) {
  const auto& jobs = progress.jobs;
  const CompletionRequest& request = jobs.front()->request;
  const bool with_logprobs = request.top_logprobs >= 0;
  std::vector<std::shared_ptr<Job>> running;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!progress.ended[i]) running.push_back(jobs[i]);
  }
  Job::wait_any(running, std::chrono::seconds(1), with_logprobs);
  std::string events;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int index = static_cast<int>(i);
    if (first_call && context.chat) events += sse_event(role_chunk_json(context, index));
    if (progress.ended[i]) continue;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    progress.ended[i] =
        jobs[i]->take(&text, std::chrono::milliseconds(0), with_logprobs ? &logprobs : nullptr);
    const bool sending = progress.error.empty();
    if (sending && (!text.empty() || !logprobs.empty())) {
      events +=
          sse_event(chunk_json(context, index, text, "", with_logprobs ? &logprobs : nullptr));
    }
    if (!progress.ended[i]) continue;
    const Job::Result& result = jobs[i]->result();
    if (!result.error.empty() && sending) {
      progress.error = result.error;
      cancel_all(jobs);  // they end at the scheduler's next step
    } else if (sending) {
      events += sse_event(chunk_json(context, index, "", result.finish_reason));
    }
  }
  *done = std::all_of(progress.ended.begin(), progress.ended.end(), [](bool e) { return e; });
  if (*done) {
    if (!progress.error.empty()) {
      events += sse_event(error_json(progress.error, "server_error", ""));
    } else if (request.include_usage) {
      events += sse_event(usage_chunk_json(context, usage_json(jobs)));
    }
    events += kSseDone;
  }
  // A second with nothing to send (a queued request, a long prompt): an SSE comment, which
  // clients ignore, so that a client gone away is noticed by a failed write.
  if (events.empty()) events = ": waiting\n\n";
  return events;
}

void stream(httplib::Response& res, ServerState& state, std::vector<std::shared_ptr<Job>> jobs,
            ResponseContext context) {
  res.set_header("Cache-Control", "no-cache");
  ++state.open_streams;
  auto progress = std::make_shared<StreamProgress>();
  progress->ended.assign(jobs.size(), false);
  progress->jobs = std::move(jobs);
  res.set_chunked_content_provider(
      "text/event-stream",
      [&state, progress, context](size_t offset, httplib::DataSink& sink) {
        bool done = false;
        const std::string events = next_events(*progress, context, offset == 0, &done);
        // A client gone away cancels its slots: the scheduler frees them at its next step. (Not
        // sink.is_writable(): it is false while the socket's buffer is full, a slow reader.)
        if (!sink.write(events.data(), events.size())) {
          cancel_all(progress->jobs);
          return false;
        }
        if (done) {
          count_request(state, progress->jobs, "streamed");
          sink.done();
        }
        return true;
      },
      [&state, progress](bool success) {
        if (!success) cancel_all(progress->jobs);
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
                 "aft-server: %s: %zu of %zu prompt tokens in the local cache, %zu in the "
                 "shared one (%.2f ms)\n",
                 job.name().c_str(), local, prompt.size(),
                 job.shared_prefix ? job.shared_prefix->tokens.size() : size_t{0}, ms_since(start));
  }
}

// The choices to return, best first: those of highest log-probability per token when best_of
// ranks its candidates (equal ones in the order generated), else all in order.
std::vector<ChoiceOutput> returned_choices(std::vector<ChoiceOutput> outputs,
                                           const CompletionRequest& request) {
  if (!request.ranked()) return outputs;
  auto per_token = [](const ChoiceOutput& c) {
    const size_t scored = c.result.tokens.size() + (c.result.end_of_text ? 1 : 0);
    return scored == 0 ? 0.0 : c.result.logprob_sum / static_cast<double>(scored);
  };
  std::stable_sort(
      outputs.begin(), outputs.end(),
      [&](const ChoiceOutput& a, const ChoiceOutput& b) { return per_token(a) > per_token(b); });
  outputs.resize(static_cast<size_t>(request.n));
  return outputs;
}

void complete(const httplib::Request& req, httplib::Response& res, ServerState& state, bool chat) {
  CompletionRequest request;
  try {
    request = chat ? parse_chat_request(req.body, state.limits, state.chat_template)
                   : parse_completion_request(req.body, state.limits);
    const int capacity = state.options.parallel + state.options.max_queue;
    if (request.best_of > capacity) {
      const char* param = request.ranked() ? "best_of" : "n";
      throw RequestError(400,
                         std::string("'") + param + "': " + std::to_string(request.best_of) +
                             " choices never fit the " + std::to_string(capacity) +
                             " places of this server's slots and queue (--parallel " +
                             std::to_string(state.options.parallel) + ", --max-queue " +
                             std::to_string(state.options.max_queue) + ")",
                         param);
    }
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
  // A job per choice, sampled with the request's seed plus its index.
  std::vector<std::shared_ptr<Job>> jobs;
  const auto signal = std::make_shared<JobSignal>();
  for (int i = 0; i < request.best_of; ++i) {
    CompletionRequest choice = request;
    choice.sampling.seed += static_cast<uint64_t>(i);
    jobs.push_back(std::make_shared<Job>(id, std::move(choice), i, signal));
  }
  // The other choices wait for the first's prompt and start from its state (the scheduler's
  // waits_for_prefill).
  if (state.shared_cache != nullptr) find_shared_prefix(state, *jobs.front());
  if (!state.scheduler->submit(jobs)) {
    ++state.metrics.requests_failed;
    res.set_header("Retry-After", "1");
    return send_error(res,
                      RequestError(503,
                                   "every slot is busy and the queue is full (--parallel " +
                                       std::to_string(state.options.parallel) + ", --max-queue " +
                                       std::to_string(state.options.max_queue) + "): retry later",
                                   "", "server_busy"));
  }
  if (request.stream) return stream(res, state, std::move(jobs), context);

  // Nothing is written until the answer is whole, so the client's leaving is looked for on the
  // socket: it cancels the jobs, which frees their slots (or places in the queue) at the
  // scheduler's next step.
  const ClientConnection connection(req);
  std::vector<ChoiceOutput> outputs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    while (!jobs[i]->take(&outputs[i].text, std::chrono::milliseconds(200), &outputs[i].logprobs)) {
      if (!jobs[i]->cancelled() && connection.closed_by_client()) cancel_all(jobs);
    }
    outputs[i].result = jobs[i]->result();
  }
  if (jobs.front()->cancelled()) {  // the scheduler has logged it; in case the client still reads
    return send_error(
        res, RequestError(500, "cancelled: the client closed its end of the connection", "",
                          "server_error"));
  }
  count_request(state, jobs, "answered");
  const std::string error = first_error(jobs);
  if (!error.empty()) return send_error(res, RequestError(500, error, "", "server_error"));
  send_json(res, 200,
            completion_json(context, request, returned_choices(std::move(outputs), request),
                            usage_json(jobs)));
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
