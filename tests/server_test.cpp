// aft-server as a client meets it: the real binary on a free loopback port, spoken to over HTTP.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model_file_writer.h"
#include "run_command.h"
#include "tools/cli/api_call.h"
#include "tools/cli/prefix_state.h"
#include "tools/server/json_grammar.h"
#include "tools/server/routes.h"

// The shared cache's tests (--redis, at the end).
#include <filesystem>

#include "tools/cli/arguments.h"
#include "tools/cli/prefix_state.h"
#include "tools/server/prefix_cache.h"
#include "tools/server/redis_url.h"
#ifdef AFT_SERVER_REDIS
#include <hiredis/hiredis.h>
#endif

namespace aft::testing {
namespace {

using nlohmann::json;

const std::string kDecayModel = AFT_SHIPPED_DECAY_MODEL;  // char tokens: text is its tokens
const std::string kFixtures = AFT_FIXTURES_DIR;

// Starts argv[0] with its stdout and stderr in the file log_path; its pid.
pid_t spawn(std::vector<std::string> argv, const std::string& log_path) {
  std::vector<char*> raw;  // built before fork: the child only calls what is safe there
  for (std::string& arg : argv) raw.push_back(arg.data());
  raw.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDERR_FILENO);
    dup2(log, STDOUT_FILENO);
    execv(raw[0], raw.data());
    _exit(127);
  }
  return pid;
}

// The server as a child process, its stderr in a file; stopped with SIGTERM.
class Server {
 public:
  // Started on --port 0: the kernel picks a free port, which the server's ready line names.
  explicit Server(const std::string& model, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {AFT_SERVER_PATH, model, "--port", "0", "--threads", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = spawn(std::move(argv), log_.path());
    const std::string ready = "listening on http://127.0.0.1:";
    for (int i = 0; i < 500; ++i) {
      const std::string text = log();
      const size_t at = text.find(ready);
      if (at != std::string::npos) {
        port_ = std::atoi(text.c_str() + at + ready.size());
        auto res = client().Get("/health");
        if (res && res->status == 200) return;
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the server did not become ready: " << log();
  }
  ~Server() { terminate(); }
  // SIGTERM; the exit status (-1: killed by a signal).
  int terminate() {
    if (pid_ < 0) return exit_status_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_status_;
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(20));
    return client;
  }
  std::string log() const {
    std::ifstream in(log_.path());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  TempFile log_{"server-log"};
  int port_ = 0;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

struct Reply {
  int status = 0;
  json body;
};

Reply post(const Server& server, const std::string& path, const std::string& body,
           const httplib::Headers& headers = {}) {
  auto res = server.client().Post(path.c_str(), headers, body, "application/json");
  if (!res) return {};
  return {res->status, json::parse(res->body, nullptr, false)};
}

// A bias below float's range on each of the shipped model's 85 tokens: none is left to sample.
json every_token_banned() {
  json biases = json::object();
  for (int token = 0; token < 85; ++token) biases[std::to_string(token)] = -1e300;
  return biases;
}

Reply complete(const Server& server, const json& request) {
  return post(server, "/v1/completions", request.dump());
}

std::vector<int32_t> tokens_of(const Reply& reply) {
  return reply.body["choices"][0]["tokens"].get<std::vector<int32_t>>();
}

// A server-sent event stream's proper end.
bool ends_with_done(const std::string& events) {
  const std::string done = "data: [DONE]\n\n";
  return events.size() >= done.size() &&
         events.compare(events.size() - done.size(), done.size(), done) == 0;
}

// The JSON chunks of a whole server-sent event stream; none unless it ends with [DONE] and every
// event is data or a comment (": waiting").
std::vector<json> sse_chunks(const std::string& events) {
  std::vector<json> chunks;
  if (!ends_with_done(events)) return chunks;
  for (size_t at = 0; at < events.size() - std::strlen("data: [DONE]\n\n");) {
    const size_t end = events.find("\n\n", at);
    if (end == std::string::npos) return {};
    if (events.compare(at, 6, "data: ") == 0) {
      chunks.push_back(json::parse(events.substr(at + 6, end - at - 6)));
    } else if (events[at] != ':') {
      return {};
    }
    at = end + 2;
  }
  return chunks;
}

// A streamed completion request whose events go to receive as they come.
httplib::Request stream_request(const json& body, httplib::ContentReceiverWithProgress receive) {
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.content_receiver = std::move(receive);
  return request;
}

TEST(Server, HealthAndModels) {
  Server server(kDecayModel);
  auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body), json({{"status", "ok"}}));
  auto models = server.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "brown-decay-tiny.aft");
}

// Until the model is loaded and warmed up, /health says "loading" and every other route 503: the
// routes in process, over a state that never becomes ready.
TEST(Server, LoadingAnswers503) {
  server::Options options;
  options.api_key = "key";
  server::ServerState state(options);
  httplib::Server http;
  server::install_routes(http, state);
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&http] { http.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  const httplib::Headers key = {{"Authorization", "Bearer key"}};
  auto health = client.Get("/health");
  auto models = client.Get("/v1/models", key);
  auto completion = client.Post("/v1/completions", key, R"({"prompt": "a"})", "application/json");
  auto unauthorized = client.Get("/v1/models");
  http.stop();
  listener.join();
  ASSERT_TRUE(health && models && completion && unauthorized);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(json::parse(health->body), json({{"status", "loading"}}));
  for (const auto* res : {&models, &completion}) {
    EXPECT_EQ((*res)->status, 503);
    EXPECT_EQ((*res)->get_header_value("Retry-After"), "1");
    EXPECT_EQ(json::parse((*res)->body)["error"]["message"], "the model is loading");
  }
  EXPECT_EQ(unauthorized->status, 401);  // the key is checked first: loading tells nothing
}

TEST(Server, BadFlagsExitWithUsage) {
  const CommandResult r = run_command(AFT_SERVER_PATH, shell_quote(kDecayModel) + " --port x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--port: expected an integer"), std::string::npos) << r.err;
  EXPECT_EQ(run_command(AFT_SERVER_PATH, "").exit_code, 2);
}

TEST(Server, APortInUseIsAnError) {
  Server server(kDecayModel);
  const CommandResult r = run_command(
      AFT_SERVER_PATH, shell_quote(kDecayModel) + " --port " + std::to_string(server.port()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + std::to_string(server.port())),
            std::string::npos)
      << r.err;
}

// --no-mmap is still accepted (it no longer changes anything): the same greedy text.
TEST(Server, NoMmapGivesTheSameCompletion) {
  const json request = {{"prompt", "The jury said"}, {"max_tokens", 12}, {"temperature", 0}};
  Server mapped(kDecayModel);
  Server copied(kDecayModel, {"--no-mmap"});
  const Reply want = complete(mapped, request);
  const Reply got = complete(copied, request);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body["choices"][0]["text"], want.body["choices"][0]["text"]);
}

TEST(Server, CompletionCountsTokens) {
  Server server(kDecayModel);
  const Reply r = complete(server, {{"prompt", "The jury said"},
                                    {"max_tokens", 12},
                                    {"temperature", 0},
                                    {"return_tokens", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["object"], "text_completion");
  const json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["text"].get<std::string>().size(), 12u);  // one character a token
  EXPECT_EQ(tokens_of(r).size(), 12u);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], 13);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(r.body["usage"]["total_tokens"], 25);
  EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  // The same request as token ids, streamed: the same text, in OpenAI's chunks, ending [DONE].
  const Reply ids = post(server, "/tokenize", json({{"content", "The jury said"}}).dump());
  ASSERT_EQ(ids.status, 200);
  std::string events;
  auto res = server.client().Post("/v1/completions",
                                  json({{"prompt", ids.body["tokens"]},
                                        {"max_tokens", 12},
                                        {"temperature", 0},
                                        {"stream", true},
                                        {"stream_options", {{"include_usage", true}}}})
                                      .dump(),
                                  "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  events = res->body;
  ASSERT_TRUE(ends_with_done(events)) << events;
  std::string text;
  json usage, finish;
  for (size_t at = 0; at < events.size() - std::strlen("data: [DONE]\n\n");) {
    const size_t end = events.find("\n\n", at);
    ASSERT_EQ(events.compare(at, 6, "data: "), 0) << events;
    const json chunk = json::parse(events.substr(at + 6, end - at - 6));
    if (chunk.contains("usage")) usage = chunk["usage"];
    if (!chunk["choices"].empty()) {
      text += chunk["choices"][0]["text"].get<std::string>();
      if (!chunk["choices"][0]["finish_reason"].is_null()) {
        finish = chunk["choices"][0]["finish_reason"];
      }
    }
    at = end + 2;
  }
  EXPECT_EQ(text, choice["text"]);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 12);
  EXPECT_EQ(usage["prompt_tokens"], 13);
  // The first request's prompt state was kept: the whole prompt came from the cache.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 13);
}

// A streamed chat answer: a first chunk with the role (as OpenAI's), then the text of the answer
// not streamed, in chat.completion.chunk events.
TEST(Server, StreamedChatStartsWithTheRole) {
  Server server(kDecayModel);
  json request = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                  {"max_tokens", 8},
                  {"temperature", 0}};
  const Reply whole = post(server, "/v1/chat/completions", request.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  request["stream"] = true;
  auto res = server.client().Post("/v1/chat/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const std::vector<json> chunks = sse_chunks(res->body);
  ASSERT_GE(chunks.size(), 2u) << res->body;
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
  std::string text;
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_FALSE(chunks[i]["choices"][0]["delta"].contains("role")) << chunks[i];
    text += chunks[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, whole.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
}

// Each token's log-probability under the model, as the C API computes it from the same tokens
// (row i: the distribution after tokens[0..i]).
std::vector<std::vector<double>> reference_log_probs(const std::vector<int32_t>& tokens) {
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load(kDecayModel.c_str(), nullptr, &model), AFT_OK);
  const cli::Model owned(model);
  aft_session* session = nullptr;
  EXPECT_EQ(aft_session_create(model, nullptr, &session), AFT_OK);
  const cli::Session owned_session(session);
  std::vector<float> logits(tokens.size() * 85);
  EXPECT_EQ(aft_session_eval(session, tokens.data(), tokens.size(), AFT_LOGITS_ALL, logits.data()),
            AFT_OK);
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<double> row(85);
    double peak = -INFINITY, sum = 0.0;
    for (size_t v = 0; v < 85; ++v) peak = std::max(peak, double{logits[i * 85 + v]});
    for (size_t v = 0; v < 85; ++v) sum += std::exp(logits[i * 85 + v] - peak);
    for (size_t v = 0; v < 85; ++v) row[v] = logits[i * 85 + v] - peak - std::log(sum);
    rows.push_back(std::move(row));
  }
  return rows;
}

// logprobs: the chosen token's log-probability under the model (not the sampler's altered
// distribution) and the likeliest tokens, in OpenAI's two shapes; streamed, the same values
// spread over the chunks.
TEST(Server, LogprobsAreTheModelsOwn) {
  Server server(kDecayModel);
  const std::string prompt = "The jury said";  // the decay model's tokens are characters
  const json request = {{"prompt", prompt},     {"max_tokens", 6},       {"logprobs", 3},
                        {"temperature", 0.7},   {"repeat_penalty", 1.3}, {"seed", 5},
                        {"return_tokens", true}};
  const Reply r = complete(server, request);
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<int32_t> tokens = post(server, "/tokenize", json({{"content", prompt}}).dump())
                                    .body["tokens"]
                                    .get<std::vector<int32_t>>();
  const size_t n_prompt = tokens.size();
  const std::vector<int32_t> completion = tokens_of(r);
  ASSERT_EQ(completion.size(), 6u);
  tokens.insert(tokens.end(), completion.begin(), completion.end());
  const std::vector<std::vector<double>> reference = reference_log_probs(tokens);
  const json& logprobs = r.body["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 6u) << logprobs;
  std::string text;
  int64_t offset = static_cast<int64_t>(prompt.size());
  for (size_t i = 0; i < 6; ++i) {
    const std::vector<double>& row = reference[n_prompt - 1 + i];
    EXPECT_NEAR(logprobs["token_logprobs"][i].get<double>(), row[completion[i]], 1e-4) << i;
    std::vector<double> likeliest = row;
    std::sort(likeliest.rbegin(), likeliest.rend());
    const json& top = logprobs["top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u) << top;
    std::vector<double> got;
    for (const auto& [piece, logprob] : top.items()) {
      const auto token = static_cast<size_t>(
          post(server, "/tokenize", json({{"content", piece}}).dump()).body["tokens"][0]);
      EXPECT_NEAR(logprob.get<double>(), row[token], 1e-4) << piece;
      got.push_back(logprob.get<double>());
    }
    std::sort(got.rbegin(), got.rend());
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(got[k], likeliest[k], 1e-4) << i;
    EXPECT_EQ(logprobs["text_offset"][i], offset);
    const std::string piece = logprobs["tokens"][i];
    text += piece;
    offset += static_cast<int64_t>(piece.size());
  }
  EXPECT_EQ(text, r.body["choices"][0]["text"]);

  // Streamed: the same values, the chunks' lists concatenated.
  json streamed_request = request;
  streamed_request["stream"] = true;
  auto res = server.client().Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(res);
  json streamed = json::array();
  for (const json& chunk : sse_chunks(res->body)) {
    const json& part = chunk["choices"][0]["logprobs"];
    if (part.is_null()) continue;
    for (size_t i = 0; i < part["tokens"].size(); ++i) {
      streamed.push_back({part["tokens"][i], part["token_logprobs"][i], part["text_offset"][i]});
    }
  }
  ASSERT_EQ(streamed.size(), 6u) << res->body;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(streamed[i][0], logprobs["tokens"][i]);
    EXPECT_NEAR(streamed[i][1].get<double>(), logprobs["token_logprobs"][i].get<double>(), 1e-9);
    EXPECT_EQ(streamed[i][2], logprobs["text_offset"][i]);
  }

  // Chat's shape: content entries with their bytes; top_logprobs only with logprobs: true.
  const json messages = {{{"role", "user"}, {"content", "Hello"}}};
  const Reply chat = post(
      server, "/v1/chat/completions",
      json({{"messages", messages}, {"max_tokens", 4}, {"logprobs", true}, {"top_logprobs", 2}})
          .dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json& content = chat.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u) << chat.body;
  for (const json& entry : content) {
    const std::string piece = entry["token"];
    json bytes = json::array();
    for (char byte : piece) bytes.push_back(static_cast<unsigned char>(byte));
    EXPECT_EQ(entry["bytes"], bytes);
    ASSERT_EQ(entry["top_logprobs"].size(), 2u);
    EXPECT_GE(entry["top_logprobs"][0]["logprob"], entry["top_logprobs"][1]["logprob"]);
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
    EXPECT_GE(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
  }
  const Reply plain = post(server, "/v1/chat/completions",
                           json({{"messages", messages}, {"max_tokens", 2}}).dump());
  EXPECT_TRUE(plain.body["choices"][0]["logprobs"].is_null()) << plain.body;
  const Reply no_logprobs =
      post(server, "/v1/chat/completions",
           json({{"messages", messages}, {"top_logprobs", 2}, {"logprobs", false}}).dump());
  EXPECT_EQ(no_logprobs.status, 400);
  EXPECT_EQ(no_logprobs.body["error"]["param"], "top_logprobs");
}

// echo with logprobs scores the prompt (lm-evaluation-harness's loglikelihood: max_tokens 0): its
// text first, each token's log-probability from the logits of every position, the first null;
// never from a cached state, which holds no logits but the last. Chunks of 3 tokens here, so the
// rows cross chunks.
TEST(Server, EchoScoresThePrompt) {
  Server server(kDecayModel, {"--prefill-chunk", "3"});
  const std::string prompt = "The jury said it";
  const std::vector<int32_t> tokens = post(server, "/tokenize", json({{"content", prompt}}).dump())
                                          .body["tokens"]
                                          .get<std::vector<int32_t>>();
  const std::vector<std::vector<double>> reference = reference_log_probs(tokens);
  const json request = {{"prompt", tokens}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}};
  for (int round = 0; round < 2; ++round) {  // the second with the prompt's state in the cache
    const Reply r = complete(server, request);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["choices"][0]["text"], prompt);
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 0);
    EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    const json& logprobs = r.body["choices"][0]["logprobs"];
    ASSERT_EQ(logprobs["tokens"].size(), tokens.size()) << logprobs;
    EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
    EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(logprobs["tokens"][i], prompt.substr(i, 1));
      EXPECT_EQ(logprobs["text_offset"][i], i);
      if (i == 0) continue;
      EXPECT_NEAR(logprobs["token_logprobs"][i].get<double>(), reference[i - 1][tokens[i]], 1e-4)
          << i;
      ASSERT_EQ(logprobs["top_logprobs"][i].size(), 2u);
    }
  }
  // Generating after the echo: the completion's entries follow the prompt's.
  const Reply more = complete(
      server,
      {{"prompt", prompt}, {"max_tokens", 3}, {"echo", true}, {"logprobs", 0}, {"temperature", 0}});
  ASSERT_EQ(more.status, 200) << more.body;
  const std::string text = more.body["choices"][0]["text"];
  EXPECT_EQ(text.substr(0, prompt.size()), prompt);
  EXPECT_EQ(text.size(), prompt.size() + 3);
  const json& logprobs = more.body["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), tokens.size() + 3);
  EXPECT_EQ(logprobs["text_offset"][tokens.size()], prompt.size());
  // Streamed: the prompt's text comes first (in the first chunk, with what was generated by then).
  auto res = server.client().Post("/v1/completions",
                                  json({{"prompt", prompt},
                                        {"max_tokens", 2},
                                        {"echo", true},
                                        {"stream", true},
                                        {"temperature", 0}})
                                      .dump(),
                                  "application/json");
  ASSERT_TRUE(res);
  const std::vector<json> chunks = sse_chunks(res->body);
  ASSERT_FALSE(chunks.empty()) << res->body;
  const std::string first = chunks[0]["choices"][0]["text"];
  EXPECT_EQ(first.substr(0, prompt.size()), prompt);
  std::string streamed;
  for (const json& chunk : chunks) streamed += chunk["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed.size(), prompt.size() + 2) << streamed;
  // Refused: echo on chat, max_tokens 0 without it.
  const Reply chat =
      post(server, "/v1/chat/completions",
           json({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"echo", true}}).dump());
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(chat.body["error"]["param"], "echo");
  EXPECT_EQ(complete(server, {{"prompt", prompt}, {"max_tokens", 0}}).status, 400);
}

TEST(Server, StopStringsAreCut) {
  Server server(kDecayModel);
  const json request = {{"prompt", "The jury said"}, {"max_tokens", 40}, {"temperature", 0}};
  const Reply full = complete(server, request);
  ASSERT_EQ(full.status, 200) << full.body;
  const std::string text = full.body["choices"][0]["text"];
  const std::string stop = text.substr(10, 3);
  json stopped_request = request;
  stopped_request["stop"] = {"never there", stop};
  for (bool stream : {false, true}) {
    stopped_request["stream"] = stream;
    auto res = server.client().Post("/v1/completions", stopped_request.dump(), "application/json");
    ASSERT_TRUE(res);
    std::string got;
    if (!stream) {
      const json body = json::parse(res->body);
      got = body["choices"][0]["text"];
      EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    } else {
      for (size_t at = 0; (at = res->body.find("\"text\":\"", at)) != std::string::npos;) {
        const size_t end = res->body.find('"', at + 8);
        got += res->body.substr(at + 8, end - at - 8);  // no escapes in this model's letters
        at = end;
      }
      EXPECT_NE(res->body.find("\"finish_reason\":\"stop\""), std::string::npos);
    }
    EXPECT_EQ(got, text.substr(0, text.find(stop))) << "stream " << stream;
  }
}

// Each request's tokens are the same alone or decoded in a batch beside others, prompts of
// several chunks included.
TEST(Server, SameSeedSameTextAloneOrConcurrent) {
  // 16 at once: each beside 15 others, prompts of 1 to 6 chunks admitted while others decode.
  Server server(kDecayModel,
                {"--parallel", "16", "--state-cache-mib", "0", "--prefill-chunk", "32"});
  std::vector<json> requests;
  for (int i = 0; i < 16; ++i) {
    std::string prompt = "Request " + std::to_string(i) + ": the jury said";
    for (int j = 0; j < i % 6; ++j) prompt += " that the city of Atlanta, the county and the state";
    requests.push_back({{"prompt", prompt},
                        {"max_tokens", 30},
                        {"temperature", 0.9},
                        {"seed", 100 + i},
                        {"return_tokens", true}});
  }
  std::vector<std::vector<int32_t>> alone, together(requests.size());
  for (const json& request : requests) {
    const Reply r = complete(server, request);
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(tokens_of(r));
  }
  std::vector<std::thread> threads;
  std::vector<int> statuses(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      const Reply r = complete(server, requests[i]);
      statuses[i] = r.status;
      if (r.status == 200) together[i] = tokens_of(r);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(statuses[i], 200);
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
  }
}

// A conversation's next turn: `first`'s prompt, the completion `answer` gave it, then `more`, sent
// to `server`. It must report its first prompt and completion as cached, and give the text and
// tokens a server without a cache gives. Returns the follow-up request.
json expect_next_turn_like_uncached(const Server& server, const Server& uncached, const json& first,
                                    const Reply& answer, const std::string& more) {
  const std::string prompt = first["prompt"].get<std::string>();
  json next = first;
  next["prompt"] = prompt + answer.body["choices"][0]["text"].get<std::string>() + more;
  const Reply restored = complete(server, next);
  EXPECT_EQ(restored.status, 200) << restored.body;
  EXPECT_EQ(restored.body["usage"]["prompt_tokens_details"]["cached_tokens"],
            prompt.size() + answer.body["usage"]["completion_tokens"].get<size_t>());
  const Reply cold = complete(uncached, next);
  EXPECT_EQ(cold.status, 200) << cold.body;
  EXPECT_EQ(cold.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(restored.body["choices"][0]["text"], cold.body["choices"][0]["text"]);
  EXPECT_EQ(restored.body["choices"][0]["tokens"], cold.body["choices"][0]["tokens"]);
  return next;
}

// A request that extends an earlier one's prompt and completion restores the state after them and
// evaluates only the rest, with the text the server without a cache gives.
TEST(Server, CacheRestoresTheLongestPrefix) {
  Server cached(kDecayModel);
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  const std::string prompt =
      "The jury said that the city of Atlanta had been a great place to live for many years";
  const json first = {
      {"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"return_tokens", true}};
  const Reply a = complete(cached, first);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  expect_next_turn_like_uncached(cached, uncached, first, a, " and the county");

  // The first prompt again: all of it from the cache, the same text.
  const Reply again = complete(cached, first);
  EXPECT_EQ(again.body["usage"]["prompt_tokens_details"]["cached_tokens"], prompt.size());
  EXPECT_EQ(again.body["choices"][0]["text"], a.body["choices"][0]["text"]);

  auto metrics = cached.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("aft_cache_hits_total 2"), std::string::npos) << metrics->body;
}

// Inside a long prompt the state is cached every --cache-every tokens: a prompt that shares the
// beginning but ends otherwise restores the last checkpoint before they part, with the text the
// server without a cache gives.
TEST(Server, CheckpointsInsideLongPromptsServeAnotherEnding) {
  Server cached(kDecayModel, {"--cache-every", "32", "--prefill-chunk", "16"});
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  const std::string common =
      "The jury said that the city of Atlanta had been a great place to live for many years, "
      "and the county";  // 100 characters, one token each
  const json first = {{"prompt", common + " agreed."}, {"max_tokens", 8}, {"temperature", 0}};
  const Reply a = complete(cached, first);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json second = first;
  second["prompt"] = common + " did not.";
  const Reply b = complete(cached, second);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.body["usage"]["prompt_tokens_details"]["cached_tokens"], 96);  // 3 x 32 <= 98
  const Reply c = complete(uncached, second);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(b.body["choices"][0]["text"], c.body["choices"][0]["text"]);
}

TEST(Server, InvalidRequestsNameTheField) {
  Server server(kDecayModel);
  const Reply malformed = post(server, "/v1/completions", "{\"prompt\": ");
  EXPECT_EQ(malformed.status, 400);
  // Nested deep enough to exhaust a recursive walk's stack: refused, and the server lives on.
  const std::string deep =
      "{\"prompt\": \"a\", \"x\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  const Reply nested = post(server, "/v1/completions", deep);
  EXPECT_EQ(nested.status, 400);
  EXPECT_NE(nested.body["error"]["message"].get<std::string>().find("deeper than"),
            std::string::npos);
  EXPECT_EQ(malformed.body["error"]["type"], "invalid_request_error");
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"max_tokens", 3}}, "prompt"},
      {{{"prompt", 7}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", {1, 2, 85}}}, "prompt"},  // the vocabulary is 85 tokens
      {{{"prompt", "a"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "a"}, {"top_p", 2}}, "top_p"},
      {{{"prompt", "a"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "a"}, {"logit_bias", {{"900", 1}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"logit_bias", {{" 5", 1}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"logit_bias", {{"+5", 1}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"logit_bias", every_token_banned()}}, "logit_bias"},
      {{{"prompt", "a"}, {"stop", {1}}}, "stop"},
      {{{"prompt", "a"}, {"stop", std::string(1025, 'x')}}, "stop"},
      {{{"prompt", "a"}, {"stream", "yes"}}, "stream"},
      {{{"prompt", "a"}, {"seed", 1.5}}, "seed"},
      {{{"prompt", "a"}, {"logprobs", 21}}, "logprobs"},
      {{{"prompt", "a"}, {"logprobs", true}}, "logprobs"},
      {{{"prompt", "a"}, {"top_logprobs", 2}}, "top_logprobs"},
      {{{"prompt", "a"}, {"echo", "yes"}}, "echo"},
      {{{"prompt", "a"}, {"n", 0}}, "n"},
      {{{"prompt", "a"}, {"n", 17}}, "n"},
      {{{"prompt", "a"}, {"n", 2}, {"best_of", 1}}, "best_of"},
      {{{"prompt", "a"}, {"best_of", 2}, {"stream", true}}, "best_of"},
  };
  for (const auto& [request, param] : cases) {
    const Reply r = complete(server, request);
    EXPECT_EQ(r.status, 400) << request;
    EXPECT_EQ(r.body["error"]["param"], param) << request << " " << r.body;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(param), std::string::npos);
  }
  auto unknown = server.client().Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["type"], "not_found_error");
}

TEST(Server, PromptPastThePositionLimit) {
  Server server(kFixtures + "/local_learned_char.aft");  // learned positions: 64
  std::vector<int> prompt(65, 1);
  const Reply r = complete(server, {{"prompt", prompt}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "prompt");
  // At the limit the completion stops there.
  prompt.resize(60);
  const Reply ok = complete(server, {{"prompt", prompt}, {"max_tokens", 50}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(ok.body["choices"][0]["finish_reason"], "length");
}

TEST(Server, ApiKeyAndBodyLimit) {
  Server server(kDecayModel, {"--api-key", "sesame", "--max-body-bytes", "1000"});
  const std::string body = json({{"prompt", "a"}, {"max_tokens", 2}}).dump();
  EXPECT_EQ(post(server, "/v1/completions", body).status, 401);
  EXPECT_EQ(post(server, "/v1/completions", body, {{"Authorization", "Bearer nope"}}).status, 401);
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  EXPECT_EQ(post(server, "/v1/completions", body, key).status, 200);
  const Reply large =
      post(server, "/v1/completions", json({{"prompt", std::string(2000, 'a')}}).dump(), key);
  EXPECT_EQ(large.status, 413);
  auto health = server.client().Get("/health");  // no key needed
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// The key from a file (its first line) or from AFT_API_KEY, which a flag overrides.
TEST(Server, ApiKeyFromAFileOrTheEnvironment) {
  const std::string body = json({{"prompt", "a"}, {"max_tokens", 1}}).dump();
  auto status = [&](const Server& server, const std::string& key) {
    return post(server, "/v1/completions", body, {{"Authorization", "Bearer " + key}}).status;
  };
  TempFile key_file("key");
  std::ofstream(key_file.path()) << "from-file\nsecond line\n";
  {
    Server server(kDecayModel, {"--api-key-file", key_file.path()});
    EXPECT_EQ(status(server, "from-file"), 200);
    EXPECT_EQ(status(server, "second line"), 401);
  }
  setenv("AFT_API_KEY", "from-environment", 1);
  {
    Server server(kDecayModel);
    EXPECT_EQ(status(server, "from-environment"), 200);
    EXPECT_EQ(status(server, "other"), 401);
  }
  {
    Server server(kDecayModel, {"--api-key", "from-flag"});
    EXPECT_EQ(status(server, "from-flag"), 200);
    EXPECT_EQ(status(server, "from-environment"), 401);
  }
  unsetenv("AFT_API_KEY");
  std::ofstream(key_file.path(), std::ios::trunc) << "\n";
  const CommandResult empty =
      run_command(AFT_SERVER_PATH,
                  shell_quote(kDecayModel) + " --api-key-file " + shell_quote(key_file.path()));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("no key on its first line"), std::string::npos) << empty.err;
}

// A streamed request that never ends by itself, read on a thread until hang_up().
class EndlessStream {
 public:
  explicit EndlessStream(const Server& server)
      : thread_([this, &server] {
          httplib::Client client = server.client();
          httplib::Request request =
              stream_request({{"prompt", "a"}, {"max_tokens", 1 << 30}, {"stream", true}},
                             [this](const char* data, size_t size, uint64_t, uint64_t) {
                               received_.append(data, size);
                               started_ = true;
                               return !hang_up_;
                             });
          httplib::Response response;
          httplib::Error error;
          client.send(request, response, error);
        }) {}
  ~EndlessStream() { hang_up(); }
  bool started() {
    for (int i = 0; i < 500 && !started_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return started_;
  }
  // Closes the connection (if the server has not ended the stream); returns what was received.
  const std::string& hang_up() {
    hang_up_ = true;
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  std::atomic<bool> started_{false}, hang_up_{false};
  std::string received_;
  std::thread thread_;
};

// A streamed client that goes away while its request waits in the queue frees its place there.
TEST(Server, AStreamLeftWhileQueuedFreesItsPlace) {
  Server server(kDecayModel, {"--parallel", "1", "--max-queue", "1"});
  EndlessStream running(server);
  ASSERT_TRUE(running.started()) << server.log();
  {
    EndlessStream queued(server);  // the queue's one place; ": waiting" comes every second
    ASSERT_TRUE(queued.started()) << server.log();
    const std::string received = queued.hang_up();
    ASSERT_EQ(received.find("server_busy"), std::string::npos) << received;
  }
  // Once its handler has seen the client go (at its next ": waiting"), the place is free again.
  bool queued_again = false;
  for (int i = 0; i < 100 && !queued_again; ++i) {
    EndlessStream next(server);
    ASSERT_TRUE(next.started()) << server.log();
    queued_again = next.hang_up().find("server_busy") == std::string::npos;
    if (!queued_again) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(queued_again) << server.log();
  EXPECT_NE(server.log().find("cancelled (the client went away) while queued"), std::string::npos)
      << server.log();
}

// A client that goes away mid-stream frees its slot; a full queue is refused with 503.
TEST(Server, DisconnectCancelsAndAFullQueueRefuses) {
  Server server(kDecayModel, {"--parallel", "1", "--max-queue", "0"});
  EndlessStream stream(server);
  ASSERT_TRUE(stream.started()) << server.log();
  // While it streams, the only slot is taken and nothing may wait.
  const Reply refused = complete(server, {{"prompt", "b"}, {"max_tokens", 1}});
  stream.hang_up();
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.body["error"]["type"], "server_busy");
  // Once the stream's client has gone, the slot is free again.
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    status = complete(server, {{"prompt", "b"}, {"max_tokens", 1}}).status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200) << server.log();
}

// A client reading slower than the tokens come (the socket's buffer full) still gets them all.
TEST(Server, SlowReaderGetsEverything) {
  Server server(kDecayModel);
  std::string received;
  int calls = 0;
  httplib::Request request =
      stream_request({{"prompt", "a"},
                      {"max_tokens", 4000},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}},
                     [&](const char* data, size_t size, uint64_t, uint64_t) {
                       if (++calls < 4) std::this_thread::sleep_for(std::chrono::milliseconds(100));
                       received.append(data, size);
                       return true;
                     });
  httplib::Response response;
  httplib::Error error;
  ASSERT_TRUE(server.client().send(request, response, error));
  EXPECT_NE(received.find("\"completion_tokens\":4000"), std::string::npos) << server.log();
  EXPECT_TRUE(ends_with_done(received));
}

// SIGTERM ends the requests in flight (a stream with an error event, then [DONE]) and exits 0.
TEST(Server, TerminateEndsStreams) {
  Server server(kDecayModel);
  EndlessStream stream(server);
  ASSERT_TRUE(stream.started()) << server.log();
  EXPECT_EQ(server.terminate(), 0);
  const std::string& received = stream.hang_up();
  EXPECT_NE(received.find("the server is shutting down"), std::string::npos) << server.log();
  EXPECT_TRUE(ends_with_done(received)) << server.log();
}

TEST(Server, ChatTokenizeAndMetrics) {
  Server server(kDecayModel);
  const Reply chat = post(server, "/v1/chat/completions",
                          json({{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                {"max_tokens", 5},
                                {"seed", 1}})
                              .dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.body["object"], "chat.completion");
  EXPECT_EQ(chat.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat.body["usage"]["prompt_tokens"], std::string("User: Hello\nAssistant:").size());
  const Reply bad_role =
      post(server, "/v1/chat/completions",
           json({{"messages", {{{"role", "wizard"}, {"content", "Hello"}}}}}).dump());
  EXPECT_EQ(bad_role.status, 400);
  EXPECT_EQ(bad_role.body["error"]["param"], "messages");

  const Reply tokens = post(server, "/tokenize", json({{"content", "jury"}}).dump());
  ASSERT_EQ(tokens.status, 200);
  const Reply text = post(server, "/detokenize", json({{"tokens", tokens.body["tokens"]}}).dump());
  EXPECT_EQ(text.body["content"], "jury");

  // The slot is released just after the answer (its state is cached first).
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    auto res = server.client().Get("/metrics");
    ASSERT_TRUE(res);
    metrics = res->body;
    if (metrics.find("aft_active_slots 0") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(metrics.find("aft_requests_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("aft_completion_tokens_total 5"), std::string::npos);
  EXPECT_NE(metrics.find("aft_active_slots 0"), std::string::npos);
}

// A model of printable ASCII characters whose metadata carries chat_template (JSON, or no key).
void write_chat_model(const std::string& path, const json* chat_template) {
  std::vector<std::string> vocab;
  for (char c = ' '; c <= '~'; ++c) vocab.emplace_back(1, c);
  vocab.emplace_back("\n");
  json config = tiny_config("simple");
  config["vocab_size"] = vocab.size();
  ModelImage image =
      layout_model(config, char_tokenizer(vocab), random_tensors(config, 7, 0.5f), 1024);
  if (chat_template != nullptr) image.header["metadata"]["chat_template"] = *chat_template;
  write_bytes(path, to_bytes(image));
}

// The prompt a chat request became, as its token count and the tokens of the expected text.
void expect_chat_prompt(const Server& server, const json& messages, const std::string& expected) {
  const Reply chat = post(server, "/v1/chat/completions",
                          json({{"messages", messages}, {"max_tokens", 1}}).dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.body["usage"]["prompt_tokens"], expected.size()) << expected;
  const Reply tokenized = post(server, "/tokenize", json({{"content", expected}}).dump());
  const Reply same = post(server, "/v1/completions",
                          json({{"prompt", tokenized.body["tokens"]}, {"max_tokens", 1}}).dump());
  // The same tokens: the chat's prompt state is in the cache.
  EXPECT_EQ(same.body["usage"]["prompt_tokens_details"]["cached_tokens"], expected.size());
}

TEST(Server, ChatTemplateFromTheModelOrTheCommandLine) {
  const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Hi"}},
                         {{"role", "assistant"}, {"content", "Hello."}},
                         {{"role", "user"}, {"content", "Who?"}}};
  TempFile rwkv_model;
  const json rwkv = "rwkv";
  write_chat_model(rwkv_model.path(), &rwkv);
  {
    Server server(rwkv_model.path());
    auto props = server.client().Get("/props");
    ASSERT_TRUE(props);
    EXPECT_EQ(json::parse(props->body)["chat_template_name"], "rwkv");
    expect_chat_prompt(server, messages,
                       "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: "
                       "Who?\n\nAssistant:");
  }
  const json custom = {{"begin", "#"},
                       {"user", "Q {content}\n"},
                       {"assistant", "A {content}\n"},
                       {"generation", "A"},
                       {"stop", {"\nQ"}}};
  TempFile custom_model;
  write_chat_model(custom_model.path(), &custom);
  {
    Server server(custom_model.path());
    expect_chat_prompt(server, json::array({messages[1], messages[2], messages[3]}),
                       "#Q Hi\nA Hello.\nQ Who?\nA");
    const Reply no_system = post(server, "/v1/chat/completions",
                                 json({{"messages", messages}, {"max_tokens", 1}}).dump());
    EXPECT_EQ(no_system.status, 400);
    EXPECT_EQ(no_system.body["error"]["param"], "messages");
    EXPECT_NE(no_system.body["error"]["message"].get<std::string>().find("no role \"system\""),
              std::string::npos)
        << no_system.body;
  }
  {
    Server server(custom_model.path(), {"--chat-template", "plain"});  // overrides the model's
    expect_chat_prompt(server, json::array({messages[1]}), "User: Hi\nAssistant:");
  }
  TempFile plain_model;
  write_chat_model(plain_model.path(), nullptr);
  {
    Server server(plain_model.path(), {"--chat-template", custom.dump()});
    expect_chat_prompt(server, json::array({messages[1]}), "#Q Hi\nA");
  }
}

// A chat's next turn sends the answer back through the template, which writes it otherwise than
// it was generated; the server evaluates the conversation as the next turn will send it right
// after answering, so that turn restores everything before its new message, and gives the text a
// server without a cache gives.
TEST(Server, ChatNextTurnRestoresEverythingButItsNewMessage) {
  Server cached(kDecayModel);
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  json messages = {{{"role", "system"}, {"content", "The news of the day."}},
                   {{"role", "user"}, {"content", "What did the jury say?"}}};
  for (int turn = 1; turn <= 3; ++turn) {
    const json request = {{"messages", messages}, {"max_tokens", 24}, {"seed", turn}};
    const Reply answer = post(cached, "/v1/chat/completions", request.dump());
    ASSERT_EQ(answer.status, 200) << answer.body;
    const Reply cold = post(uncached, "/v1/chat/completions", request.dump());
    EXPECT_EQ(answer.body["choices"][0]["message"], cold.body["choices"][0]["message"]);
    // Character tokens: the new message and the open turn are all that is evaluated.
    const std::string opened =
        "User: " + messages.back()["content"].get<std::string>() + "\nAssistant:";
    const size_t prompt = answer.body["usage"]["prompt_tokens"];
    EXPECT_EQ(answer.body["usage"]["prompt_tokens_details"]["cached_tokens"],
              turn == 1 ? 0 : prompt - opened.size())
        << "turn " << turn;
    messages.push_back(answer.body["choices"][0]["message"]);
    messages.push_back({{"role", "user"}, {"content", "And then, turn " + std::to_string(turn)}});
  }
}

TEST(Server, BadChatTemplatesAreRefused) {
  const CommandResult flag =
      run_command(AFT_SERVER_PATH, shell_quote(kDecayModel) + " --chat-template llama9");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("--chat-template: unknown chat template \"llama9\""), std::string::npos)
      << flag.err;
  const CommandResult object = run_command(
      AFT_SERVER_PATH, shell_quote(kDecayModel) + " --chat-template '{\"user\": \"{content}\"}'");
  EXPECT_EQ(object.exit_code, 2);
  EXPECT_NE(object.err.find("\"assistant\" is missing"), std::string::npos) << object.err;
  TempFile model;
  const json twice = {
      {"user", "{content}{content}"}, {"assistant", "{content}"}, {"generation", ""}};
  write_chat_model(model.path(), &twice);
  const CommandResult own = run_command(AFT_SERVER_PATH, shell_quote(model.path()) + " --port 0");
  EXPECT_EQ(own.exit_code, 1);
  EXPECT_NE(own.err.find("its metadata's chat_template: \"user\": expected \"{content}\" once"),
            std::string::npos)
      << own.err;
}

// ---- The state cache shared across replicas: --redis ----

TEST(Server, RedisUrlsAreChecked) {
  const server::RedisUrl local = server::parse_redis_url("redis://localhost");
  EXPECT_EQ(local.host, "localhost");
  EXPECT_EQ(local.port, 6379);
  EXPECT_EQ(local.db, 0);
  EXPECT_TRUE(local.password.empty());
  const server::RedisUrl full = server::parse_redis_url("redis://:p%40ss%3a@10.0.0.7:6380/2");
  EXPECT_EQ(full.host, "10.0.0.7");
  EXPECT_EQ(full.port, 6380);
  EXPECT_EQ(full.db, 2);
  EXPECT_EQ(full.user, "");
  EXPECT_EQ(full.password, "p@ss:");
  EXPECT_EQ(full.display(), "redis://10.0.0.7:6380/2");  // no password in logs
  const server::RedisUrl ipv6 = server::parse_redis_url("redis://cache:secret@[::1]:7000/");
  EXPECT_EQ(ipv6.host, "::1");
  EXPECT_EQ(ipv6.port, 7000);
  EXPECT_EQ(ipv6.user, "cache");
  EXPECT_EQ(ipv6.password, "secret");
  const server::RedisUrl socket = server::parse_redis_url("unix:///run/redis/redis.sock");
  EXPECT_EQ(socket.socket, "/run/redis/redis.sock");
  EXPECT_TRUE(socket.host.empty());
  EXPECT_EQ(socket.db, 0);
  const server::RedisUrl secured =
      server::parse_redis_url("unix://cache:s%2Fcret@/run/redis/redis.sock?db=3");
  EXPECT_EQ(secured.socket, "/run/redis/redis.sock");
  EXPECT_EQ(secured.user, "cache");
  EXPECT_EQ(secured.password, "s/cret");
  EXPECT_EQ(secured.db, 3);
  EXPECT_EQ(secured.display(), "unix://cache@/run/redis/redis.sock?db=3");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "neither redis:// nor unix://"},
      {"http://localhost", "neither redis:// nor unix://"},
      {"rediss://localhost", "TLS"},
      {"redis://", "no host"},
      {"redis://:6379", "no host"},
      {"redis://localhost:0", "the port \"0\""},
      {"redis://localhost:65536", "the port \"65536\""},
      {"redis://localhost:", "the port is empty"},
      {"redis://u:secret@localhost/x", "in \"redis://***@localhost/x\""},
      {"redis://secret@localhost", "[user]:password"},
      {"redis://:@localhost", "the password is empty"},
      {"redis://:%zz@localhost", "hexadecimal"},
      {"redis://[::1", "']'"},
      {"unix://", "not absolute"},
      {"unix://redis.sock", "not absolute"},
      {"unix:///redis.sock?db=x", "the query \"db=x\" is not db=N"},
      {"unix:///redis.sock?password=x", "is not db=N"},
      {"unix://secret@/redis.sock", "[user]:password"},
  };
  for (const auto& [url, why] : bad) {
    try {
      server::parse_redis_url(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const cli::UsageError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("--redis: ", 0), 0u) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
      EXPECT_EQ(message.find("secret"), std::string::npos) << message;  // credentials hidden
      EXPECT_EQ(message.find("%zz"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("expected ") + server::kRedisUrlForms), std::string::npos)
          << message;
    }
  }
  // From the command line: a usage error, exit 2.
  const CommandResult r =
      run_command(AFT_SERVER_PATH, shell_quote(kDecayModel) + " --redis http://localhost");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--redis: the scheme is neither"), std::string::npos) << r.err;
  const CommandResult ttl = run_command(
      AFT_SERVER_PATH, shell_quote(kDecayModel) + " --redis unix:///tmp/r.sock --redis-ttl 0");
  EXPECT_EQ(ttl.exit_code, 2);
#ifdef AFT_SERVER_REDIS
  EXPECT_NE(ttl.err.find("--redis-ttl: expected an integer in [1, "), std::string::npos) << ttl.err;
#else
  EXPECT_NE(ttl.err.find("--redis: this aft-server is built without Redis"), std::string::npos)
      << ttl.err;
#endif
}

// A directory of its own under the system's temporary one, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "aft_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

#ifdef AFT_SERVER_REDIS

// redis-server on PATH, or "".
std::string find_redis_server() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string candidate = dirs.substr(at, end - at) + "/redis-server";
    if (end > at && access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

#define SKIP_WITHOUT_REDIS_SERVER()                                                          \
  if (find_redis_server().empty()) {                                                         \
    GTEST_SKIP() << "redis-server is not installed (tools/install-deps.sh installs it with " \
                    "libhiredis-dev)";                                                       \
  }

// One synchronous command over hiredis; null when Redis cannot be reached.
struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using RedisReply = std::unique_ptr<redisReply, FreeReply>;
RedisReply redis_command(const std::string& socket, const std::vector<std::string>& args) {
  std::unique_ptr<redisContext, void (*)(redisContext*)> context(redisConnectUnix(socket.c_str()),
                                                                 redisFree);
  if (!context || context->err != 0) return nullptr;
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.c_str());
    lengths.push_back(arg.size());
  }
  return RedisReply(static_cast<redisReply*>(
      redisCommandArgv(context.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
}

// redis-server on a unix socket in a directory of its own, nothing saved to disk; stopped with
// SIGTERM.
class RedisServer {
 public:
  explicit RedisServer(const std::vector<std::string>& args = {}) {
    socket_ = dir_.path() + "/redis.sock";
    std::vector<std::string> argv = {
        find_redis_server(), "--port", "0", "--unixsocket", socket_, "--dir",
        dir_.path(),         "--save", "",  "--appendonly", "no"};  // nothing on disk
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = spawn(std::move(argv), dir_.path() + "/redis.log");
    for (int i = 0; i < 500 && !ready(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~RedisServer() { stop(); }
  void stop() {
    if (pid_ < 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  bool ready() const {
    return redis_command(socket_, {"PING"}) != nullptr;  // PONG, or NOAUTH with a password
  }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

// A counter of the server's /metrics (-1 if absent).
double metric(const Server& server, const std::string& name) {
  auto res = server.client().Get("/metrics");
  if (!res) return -1;
  const std::string line = "\n" + name + " ";
  const size_t at = res->body.find(line);
  return at == std::string::npos ? -1 : std::atof(res->body.c_str() + at + line.size());
}

// Whether the server's metric reaches at least value within about two minutes (sanitizer builds).
bool metric_reaches(const Server& server, const std::string& name, double value) {
  for (int i = 0; i < 6000; ++i) {
    if (metric(server, name) >= value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

size_t count_occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A prompt answered by replica A is continued by replica B from the state A stored in Redis, with
// the text a server without any cache gives; another ending restores a checkpoint of A's prompt.
// The keys are the model's, carry the TTL, and hold encode_prefix_state's records. With Redis
// gone, B answers the same, and says so once.
TEST(Server, RedisSharesStatesAcrossReplicas) {
  SKIP_WITHOUT_REDIS_SERVER();
  RedisServer redis;
  ASSERT_TRUE(redis.ready());
  const std::vector<std::string> args = {
      "--redis", "unix://" + redis.socket(), "--redis-ttl", "600", "--cache-every", "256"};
  Server a(kDecayModel, args), b(kDecayModel, args);
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  std::string prompt;
  for (int i = 0; prompt.size() < 1100; ++i) {
    prompt += "The jury said that the city of Atlanta had been a great place to live for " +
              std::to_string(i + 2) + " years, and the county agreed. ";
  }
  const json first = {{"prompt", prompt},
                      {"max_tokens", 20},
                      {"temperature", 0.8},
                      {"seed", 7},
                      {"return_tokens", true}};
  const Reply from_a = complete(a, first);
  ASSERT_EQ(from_a.status, 200) << from_a.body;
  EXPECT_EQ(from_a.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Checkpoints at 256, 512, 768 and 1024 tokens, the prompt's end, the completion's end.
  ASSERT_TRUE(metric_reaches(a, "aft_redis_writes_total", 6)) << a.log();

  const std::string follow_up =
      expect_next_turn_like_uncached(b, uncached, first, from_a, " And the state")["prompt"];
  EXPECT_EQ(metric(b, "aft_redis_hits_total"), 1);

  // Another ending after 600 characters, 300 long: the checkpoint at 512 tokens lies below the
  // tokens B tries one by one (within --cache-every of the prompt's end).
  json other = first;
  std::string ending;
  while (ending.size() < 300) ending += " but the county did not see it that way at all;";
  other["prompt"] = prompt.substr(0, 600) + ending;
  const Reply checkpoint = complete(b, other);
  ASSERT_EQ(checkpoint.status, 200) << checkpoint.body;
  EXPECT_EQ(checkpoint.body["usage"]["prompt_tokens_details"]["cached_tokens"], 512);
  EXPECT_EQ(checkpoint.body["choices"][0]["text"],
            complete(uncached, other).body["choices"][0]["text"]);
  EXPECT_EQ(metric(b, "aft_redis_hits_total"), 2);
  EXPECT_EQ(metric(b, "aft_redis_errors_total"), 0);

  // The keys: aft:<the model's fingerprint>:<hash of the tokens>, expiring within the TTL, each
  // holding the record of a prefix of A's prompt and completion.
  aft_model* raw_model = nullptr;
  ASSERT_EQ(aft_model_load(kDecayModel.c_str(), nullptr, &raw_model), AFT_OK);
  char namespace_[32];
  std::snprintf(namespace_, sizeof namespace_, "aft:%08x:", aft_model_fingerprint(raw_model));
  aft_model_free(raw_model);
  std::vector<int32_t> a_tokens =
      post(a, "/tokenize", json({{"content", prompt}}).dump()).body["tokens"];
  const std::vector<int32_t> a_completion = tokens_of(from_a);
  a_tokens.insert(a_tokens.end(), a_completion.begin(), a_completion.end());
  const RedisReply keys = redis_command(redis.socket(), {"KEYS", "*"});
  ASSERT_TRUE(keys && keys->type == REDIS_REPLY_ARRAY);
  EXPECT_GE(keys->elements, 6u);
  std::vector<size_t> lengths;
  for (size_t i = 0; i < keys->elements; ++i) {
    const std::string key(keys->element[i]->str, keys->element[i]->len);
    ASSERT_EQ(key.rfind(namespace_, 0), 0u) << key;
    const RedisReply ttl = redis_command(redis.socket(), {"TTL", key});
    ASSERT_TRUE(ttl && ttl->type == REDIS_REPLY_INTEGER);
    EXPECT_GT(ttl->integer, 0) << key;
    EXPECT_LE(ttl->integer, 600) << key;
    const RedisReply value = redis_command(redis.socket(), {"GET", key});
    ASSERT_TRUE(value && value->type == REDIS_REPLY_STRING);
    std::string why;
    const std::optional<cli::PrefixState> state = cli::decode_prefix_state(
        reinterpret_cast<const unsigned char*>(value->str), value->len, &why);
    ASSERT_TRUE(state) << why;
    const uint64_t hash = server::tokens_hash(state->tokens);
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    EXPECT_EQ(key, namespace_ + std::string(hex));
    EXPECT_EQ(state->logits.size(), 85u);
    lengths.push_back(state->tokens.size());
    if (state->tokens.size() <= a_tokens.size() &&
        std::equal(state->tokens.begin(), state->tokens.end(), a_tokens.begin())) {
      continue;
    }
    // Or one of B's (its prompts' ends and completions).
    EXPECT_GT(state->tokens.size(), 600u) << key;
  }
  for (size_t length :
       {size_t{256}, size_t{512}, size_t{768}, size_t{1024}, prompt.size(), prompt.size() + 20}) {
    EXPECT_NE(std::find(lengths.begin(), lengths.end(), length), lengths.end()) << length;
  }

  // Redis gone: B answers as before, from its own cache or from the prompt, and says so once.
  redis.stop();
  json third = first;
  third["prompt"] = follow_up + ", the city";
  for (int i = 0; i < 3; ++i) {
    third["seed"] = 20 + i;
    const Reply without = complete(b, third);
    ASSERT_EQ(without.status, 200) << without.body;
    EXPECT_EQ(without.body["choices"][0]["text"],
              complete(uncached, third).body["choices"][0]["text"]);
  }
  EXPECT_EQ(count_occurrences(b.log(), "requests go on with the local cache only"), 1u) << b.log();
  EXPECT_GT(metric(b, "aft_redis_errors_total"), 0);
}

// --redis naming a socket nobody listens on: every request answered as without Redis; the failure
// logged once, not once per request.
TEST(Server, RedisDownStillAnswers) {
  TempDir dir;
  Server server(kDecayModel, {"--redis", "unix://" + dir.path() + "/nobody.sock"});
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  for (int i = 0; i < 4; ++i) {
    const json request = {{"prompt", "The jury said that the city of Atlanta " + std::to_string(i)},
                          {"max_tokens", 16},
                          {"temperature", 0.7},
                          {"seed", i}};
    const Reply r = complete(server, request);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["choices"][0]["text"], complete(uncached, request).body["choices"][0]["text"]);
  }
  const std::string log = server.log();
  EXPECT_EQ(count_occurrences(log, "cannot connect"), 1u) << log;
  EXPECT_NE(log.find("nobody.sock"), std::string::npos) << log;
  EXPECT_GE(metric(server, "aft_redis_errors_total"), 4);  // the lookups at least
  EXPECT_EQ(metric(server, "aft_redis_hits_total"), 0);
  EXPECT_EQ(metric(server, "aft_redis_writes_total"), 0);
}

// A Redis full (maxmemory, no eviction) refuses writes but answers lookups: no outage (lookups go
// on: misses, not errors), and the refusal is logged once, not per write.
TEST(Server, RedisRefusingWritesIsNoOutage) {
  SKIP_WITHOUT_REDIS_SERVER();
  RedisServer redis({"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(redis.ready());
  Server server(kDecayModel, {"--redis", "unix://" + redis.socket()});
  for (int i = 0; i < 40; ++i) {
    const Reply r = complete(
        server,
        {{"prompt", "The jury said that the city " + std::to_string(i)}, {"max_tokens", 4}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  // Each request writes two states of about 17 KB (its prompt's, its completion's): not all 80 fit
  // in 1 MB.
  auto settled = [&] {
    return metric(server, "aft_redis_writes_total") + metric(server, "aft_redis_errors_total") >=
           80;
  };
  for (int i = 0; i < 500 && !settled(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(metric(server, "aft_redis_writes_total"), 0);
  EXPECT_GT(metric(server, "aft_redis_errors_total"), 0);
  EXPECT_EQ(metric(server, "aft_redis_misses_total"), 40);
  const std::string log = server.log();
  EXPECT_EQ(count_occurrences(log, "refused SET: OOM"), 1u) << log;
  EXPECT_EQ(count_occurrences(log, "requests go on with the local cache only"), 0u) << log;
}

// A Redis with a password: replicas that give it (and a database) share states; one in another
// database does not see them; one with a wrong password answers all the same and logs the refusal
// once, without the password.
TEST(Server, RedisPasswordAndDatabase) {
  SKIP_WITHOUT_REDIS_SERVER();
  RedisServer redis({"--requirepass", "s3cret"});
  ASSERT_TRUE(redis.ready());
  const std::string url = "unix://:s3cret@" + redis.socket();
  Server a(kDecayModel, {"--redis", url + "?db=2"}), b(kDecayModel, {"--redis", url + "?db=2"});
  Server other_db(kDecayModel, {"--redis", url + "?db=3"});
  Server wrong(kDecayModel, {"--redis", "unix://:n0pe@" + redis.socket()});
  // A fixed seed: with a random one the completion began " and the" now and then, which made the
  // completion's state (46 tokens) a prefix of the second prompt too.
  const json first = {
      {"prompt", "The jury said that the city of Atlanta"}, {"max_tokens", 8}, {"seed", 7}};
  const Reply from_a = complete(a, first);
  ASSERT_EQ(from_a.status, 200) << from_a.body;
  ASSERT_TRUE(metric_reaches(a, "aft_redis_writes_total", 2))
      << a.log();  // the prompt's state, the completion's
  json second = first;
  second["prompt"] = first["prompt"].get<std::string>() + " and the county";
  const Reply from_b = complete(b, second);
  ASSERT_EQ(from_b.status, 200) << from_b.body;
  EXPECT_EQ(from_b.body["usage"]["prompt_tokens_details"]["cached_tokens"], 38);
  const Reply elsewhere = complete(other_db, second);
  ASSERT_EQ(elsewhere.status, 200) << elsewhere.body;
  EXPECT_EQ(elsewhere.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(metric(other_db, "aft_redis_misses_total"), 1);
  for (int i = 0; i < 3; ++i) {
    const Reply refused = complete(wrong, second);
    ASSERT_EQ(refused.status, 200) << refused.body;
    EXPECT_EQ(refused.body["usage"]["prompt_tokens_details"]["cached_tokens"], i == 0 ? 0 : 53);
  }
  const std::string log = wrong.log();
  EXPECT_EQ(count_occurrences(log, "AUTH: WRONGPASS"), 1u) << log;
  EXPECT_EQ(log.find("n0pe"), std::string::npos) << log;
  EXPECT_GT(metric(wrong, "aft_redis_errors_total"), 0);
  EXPECT_EQ(metric(wrong, "aft_redis_writes_total"), 0);
}

#endif  // AFT_SERVER_REDIS

// ---- /slots and --timeout ----

// A client that writes raw bytes and reads what comes back until the server closes.
class RawClient {
 public:
  // receive_buffer: SO_RCVBUF, when not 0 (a small one fills sooner).
  explicit RawClient(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ >= 0 && receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        fd_ >= 0 && connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool send_text(const std::string& text) {
    return connected_ &&
           ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }
  // What the server sends until it closes the connection; gives up after limit (closed false).
  std::string read_until_closed(std::chrono::seconds limit, bool* closed) {
    timeval timeout{static_cast<time_t>(limit.count()), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::string received;
    char buffer[4096];
    for (;;) {
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        received.append(buffer, static_cast<size_t>(n));
        continue;
      }
      *closed = n == 0;
      return received;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A body comes with its Content-Length, uncompressed: the --max-body-bytes limit holds for no
// other framing in httplib, and a POST with neither header waited for --timeout.
TEST(Server, BodiesWithoutALengthOrCompressedAreRefused) {
  Server server(kDecayModel, {"--max-body-bytes", "2000"});
  const std::string large = json({{"prompt", std::string(3000, 'a')}}).dump();
  std::ostringstream chunk_size;
  chunk_size << std::hex << large.size();
  RawClient chunked(server.port());
  ASSERT_TRUE(chunked.send_text(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
      chunk_size.str() + "\r\n" + large + "\r\n0\r\n\r\n"));
  bool closed = false;
  const std::string refused = chunked.read_until_closed(std::chrono::seconds(10), &closed);
  EXPECT_EQ(refused.compare(0, 12, "HTTP/1.1 411"), 0) << refused;
  EXPECT_NE(refused.find("Content-Length header"), std::string::npos) << refused;
  EXPECT_TRUE(closed);

  RawClient no_length(server.port());  // answered at once, not after --timeout (600 s)
  ASSERT_TRUE(
      no_length.send_text("POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string at_once = no_length.read_until_closed(std::chrono::seconds(10), &closed);
  EXPECT_EQ(at_once.compare(0, 12, "HTTP/1.1 411"), 0) << at_once;
  EXPECT_TRUE(closed);

  const Reply compressed = post(server, "/v1/completions", json({{"prompt", "a"}}).dump(),
                                {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(compressed.status, 415);
  EXPECT_NE(compressed.body["error"]["message"].get<std::string>().find("gzip"), std::string::npos);
  const Reply fine =
      post(server, "/v1/completions", json({{"prompt", "a"}, {"max_tokens", 1}}).dump(),
           {{"Content-Encoding", "identity"}});
  EXPECT_EQ(fine.status, 200) << fine.body;
}

Reply slot_action(const Server& server, const std::string& id, const std::string& action,
                  const json& body) {
  return post(server, "/slots/" + id + (action.empty() ? "" : "?action=" + action), body.dump());
}

json get_slots(const Server& server) {
  auto res = server.client().Get("/slots");
  if (!res || res->status != 200) return nullptr;
  return json::parse(res->body, nullptr, false);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A slot's sequence saved by one server and restored by another: the next request that continues
// it starts from the restored state (its tokens count as cached) and gets the text a server
// without any cache gives.
TEST(Server, SlotSaveRestoreContinuesInAnotherServer) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Server first(kDecayModel, {"--slot-save-path", dir.path(), "--parallel", "2"});
  EXPECT_EQ(get_slots(first), json::parse(R"([{"id": 0, "is_processing": false, "n_tokens": 0},
                                               {"id": 1, "is_processing": false, "n_tokens": 0}])"));
  const std::string prompt = "The jury said that the city of Atlanta";
  const Reply a = complete(first, {{"prompt", prompt},
                                   {"max_tokens", 20},
                                   {"temperature", 0.9},
                                   {"seed", 3},
                                   {"return_tokens", true}});
  ASSERT_EQ(a.status, 200) << a.body;
  const size_t n = prompt.size() + 20;            // one token a character
  EXPECT_EQ(get_slots(first)[0]["n_tokens"], n);  // requests one at a time take slot 0
  EXPECT_EQ(get_slots(first)[1]["n_tokens"], 0);

  const Reply saved = slot_action(first, "0", "save", {{"filename", "conversation"}});
  ASSERT_EQ(saved.status, 200) << saved.body;
  EXPECT_EQ(saved.body["id_slot"], 0);
  EXPECT_EQ(saved.body["filename"], "conversation");
  EXPECT_EQ(saved.body["n_saved"], n);
  const std::string bytes = file_bytes(dir.file("conversation"));
  EXPECT_EQ(saved.body["n_written"], bytes.size());
  EXPECT_GE(saved.body["timings"]["save_ms"].get<double>(), 0.0);
  // The file is a PrefixState record: the prompt and completion, and the last token's logits.
  std::string why;
  const auto record = cli::read_prefix_state_file(dir.file("conversation"), &why);
  ASSERT_TRUE(record) << why;
  std::vector<int32_t> expected =
      post(first, "/tokenize", json({{"content", prompt}}).dump()).body["tokens"];
  const std::vector<int32_t> completion = tokens_of(a);
  expected.insert(expected.end(), completion.begin(), completion.end());
  EXPECT_EQ(record->tokens, expected);
  EXPECT_EQ(record->logits.size(), 85u);  // the vocabulary
  EXPECT_FALSE(record->state.empty());

  Server second(kDecayModel, {"--slot-save-path", dir.path()});
  const Reply restored = slot_action(second, "2", "restore", {{"filename", "conversation"}});
  ASSERT_EQ(restored.status, 200) << restored.body;
  EXPECT_EQ(restored.body["id_slot"], 2);
  EXPECT_EQ(restored.body["filename"], "conversation");
  EXPECT_EQ(restored.body["n_restored"], n);
  EXPECT_EQ(restored.body["n_read"], bytes.size());
  EXPECT_GE(restored.body["timings"]["restore_ms"].get<double>(), 0.0);
  EXPECT_EQ(get_slots(second)[2]["n_tokens"], n);

  const json next = {
      {"prompt", prompt + a.body["choices"][0]["text"].get<std::string>() + " and the county"},
      {"max_tokens", 20},
      {"temperature", 0.8},
      {"seed", 11}};
  const Reply continued = complete(second, next);
  ASSERT_EQ(continued.status, 200) << continued.body;
  EXPECT_EQ(continued.body["usage"]["prompt_tokens_details"]["cached_tokens"], n);
  Server uncached(kDecayModel, {"--state-cache-mib", "0"});
  const Reply reference = complete(uncached, next);
  ASSERT_EQ(reference.status, 200) << reference.body;
  EXPECT_EQ(reference.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(continued.body["choices"][0]["text"], reference.body["choices"][0]["text"]);

  // The restored slot holds the sequence (the request above took slot 0): saved again, the same
  // bytes.
  const Reply again = slot_action(second, "2", "save", {{"filename", "copy"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(file_bytes(dir.file("copy")), bytes);

  const Reply erased = slot_action(second, "2", "erase", json::object());
  ASSERT_EQ(erased.status, 200) << erased.body;
  EXPECT_EQ(erased.body, json({{"id_slot", 2}, {"n_erased", n}}));
  EXPECT_EQ(get_slots(second)[2]["n_tokens"], 0);
  EXPECT_EQ(slot_action(second, "2", "erase", json::object()).body["n_erased"], 0);
  const Reply nothing = slot_action(second, "2", "save", {{"filename", "empty"}});
  EXPECT_EQ(nothing.status, 400);
  EXPECT_EQ(nothing.body["error"]["param"], "id_slot");
  EXPECT_FALSE(std::filesystem::exists(dir.file("empty")));
}

TEST(Server, SlotActionErrors) {
  {
    Server plain(kDecayModel);
    const Reply r = slot_action(plain, "0", "save", {{"filename", "x"}});
    EXPECT_EQ(r.status, 501);
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("--slot-save-path"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(get_slots(plain).size(), 4u);  // GET /slots needs no flag
  }
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string inside = dir.path() + "/inside";
  ASSERT_TRUE(std::filesystem::create_directory(inside));
  Server server(kDecayModel, {"--slot-save-path", inside, "--parallel", "2"});
  // No sequence yet: nothing to save.
  const Reply empty = slot_action(server, "0", "save", {{"filename", "a"}});
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(empty.body["error"]["param"], "id_slot");
  ASSERT_EQ(complete(server, {{"prompt", "The jury"}, {"max_tokens", 4}}).status, 200);

  // Names that are not a plain file name in the directory, with a sequence to save.
  for (const json& name : {json(""), json("../escaped"), json("sub/escaped"), json("..\\escaped"),
                           json("a\\b"), json(".hidden"), json(std::string(252, 'a')),
                           json(std::string("a\0b", 3)), json(7), json(nullptr)}) {
    const Reply r = slot_action(server, "0", "save", {{"filename", name}});
    EXPECT_EQ(r.status, 400) << name;
    EXPECT_EQ(r.body["error"]["param"], "filename") << name << " " << r.body;
  }
  const Reply missing_name = slot_action(server, "0", "save", json::object());
  EXPECT_EQ(missing_name.body["error"]["param"], "filename");
  EXPECT_FALSE(std::filesystem::exists(dir.file("escaped")));
  EXPECT_TRUE(std::filesystem::is_empty(inside));
  const Reply longest = slot_action(server, "0", "save", {{"filename", std::string(251, 'a')}});
  EXPECT_EQ(longest.status, 200) << longest.body;

  const Reply absent = slot_action(server, "1", "restore", {{"filename", "absent"}});
  EXPECT_EQ(absent.status, 404);
  EXPECT_EQ(absent.body["error"]["param"], "filename");
  EXPECT_EQ(absent.body["error"]["type"], "not_found_error");

  // Files that are not a record of this model: 400 naming the file and the reason.
  ASSERT_EQ(slot_action(server, "0", "save", {{"filename", "good"}}).status, 200);
  const std::string good = file_bytes(inside + "/good");
  std::string why;
  cli::PrefixState no_logits = *cli::read_prefix_state_file(inside + "/good", &why);
  no_logits.logits.clear();  // as aft-run's --prompt-cache writes them
  cli::write_prefix_state_file(inside + "/no-logits", no_logits);
  std::ofstream(inside + "/junk") << "not a record";
  std::ofstream(inside + "/truncated") << good.substr(0, good.size() - 10);
  std::string corrupt = good;
  corrupt[corrupt.size() - 100] ^= 0x55;  // inside the state: its checksum fails
  std::ofstream(inside + "/corrupt") << corrupt;
  ASSERT_TRUE(std::filesystem::create_directory(inside + "/folder"));
  {
    Server other(kFixtures + "/local_learned_char.aft", {"--slot-save-path", inside});
    ASSERT_EQ(complete(other, {{"prompt", {1, 2, 3}}, {"max_tokens", 3}}).status, 200);
    ASSERT_EQ(slot_action(other, "0", "save", {{"filename", "other-model"}}).status, 200);
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"junk", "not a saved prefix state"},
      {"truncated", "truncated"},
      {"corrupt", "does not load"},
      {"other-model", "saved from another model"},
      {"no-logits", "0 logits"},
      {"folder", "not a regular file"},
  };
  for (const auto& [name, reason] : refused) {
    const Reply r = slot_action(server, "1", "restore", {{"filename", name}});
    EXPECT_EQ(r.status, 400) << name;
    EXPECT_EQ(r.body["error"]["param"], "filename");
    const std::string message = r.body["error"]["message"];
    EXPECT_NE(message.find(name + ": "), std::string::npos) << message;
    EXPECT_NE(message.find(reason), std::string::npos) << message;
  }
  EXPECT_EQ(get_slots(server)[1]["n_tokens"], 0);  // nothing refused was restored

  for (const std::string id : {"2", "-1", "x", "99999999999"}) {
    const Reply r = slot_action(server, id, "erase", json::object());
    EXPECT_EQ(r.status, 400) << id;
    EXPECT_EQ(r.body["error"]["param"], "id_slot") << id;
  }
  for (const std::string action : {"", "load", "ERASE"}) {
    const Reply r = slot_action(server, "0", action, json::object());
    EXPECT_EQ(r.status, 400) << action;
    EXPECT_EQ(r.body["error"]["param"], "action") << action;
  }
  EXPECT_EQ(post(server, "/slots/0?action=save", "{\"filename\": ").status, 400);

  // A slot that is processing refuses every action; the others answer.
  {
    EndlessStream stream(server);
    ASSERT_TRUE(stream.started()) << server.log();
    const json slots = get_slots(server);
    EXPECT_EQ(slots[0]["is_processing"], true);
    EXPECT_GT(slots[0]["n_tokens"].get<int>(), 0);
    EXPECT_EQ(slots[1]["is_processing"], false);
    for (const std::string action : {"save", "restore", "erase"}) {
      const Reply r = slot_action(server, "0", action, {{"filename", "good"}});
      EXPECT_EQ(r.status, 409) << action << " " << r.body;
    }
    EXPECT_EQ(slot_action(server, "1", "restore", {{"filename", "good"}}).status, 200);
  }

  // `curl -X POST .../slots/1?action=erase` sends neither Content-Length nor a body: answered at
  // once, not once --timeout has passed.
  RawClient raw(server.port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      raw.send_text("POST /slots/1?action=erase HTTP/1.1\r\nHost: x\r\n"
                    "Connection: close\r\n\r\n"));
  bool closed = false;
  const std::string response = raw.read_until_closed(std::chrono::seconds(10), &closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(response.compare(0, 15, "HTTP/1.1 200 OK"), 0) << response;
  EXPECT_NE(response.find(R"({"id_slot":1,"n_erased":)"), std::string::npos) << response;
}

TEST(Server, SlotSavePathMustBeADirectory) {
  const CommandResult absent = run_command(
      AFT_SERVER_PATH, shell_quote(kDecayModel) + " --port 0 --slot-save-path /nonexistent/aft");
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("--slot-save-path /nonexistent/aft: not a directory"),
            std::string::npos)
      << absent.err;
  const CommandResult file =
      run_command(AFT_SERVER_PATH, shell_quote(kDecayModel) + " --port 0 --slot-save-path " +
                                       shell_quote(kDecayModel));
  EXPECT_EQ(file.exit_code, 1);
  EXPECT_NE(file.err.find("not a directory"), std::string::npos) << file.err;
  const CommandResult timeout =
      run_command(AFT_SERVER_PATH, shell_quote(kDecayModel) + " --timeout 0");
  EXPECT_EQ(timeout.exit_code, 2);
  EXPECT_NE(timeout.err.find("--timeout"), std::string::npos) << timeout.err;
}

// A client that sends half a request and stalls gets a 400 after --timeout and is disconnected
// as long after (the wait for a kept-alive connection's next request, at most 5 s, is bounded by
// --timeout too), while the server answers others. httplib's defaults would take 5 + 5 s.
TEST(Server, TimeoutDropsAStalledClient) {
  Server server(kDecayModel, {"--timeout", "1"});
  RawClient stalled(server.port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      stalled.send_text("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                        "{\"prompt\": "));
  const Reply other = complete(server, {{"prompt", "The jury"}, {"max_tokens", 4}});
  EXPECT_EQ(other.status, 200);
  bool closed = false;
  const std::string response = stalled.read_until_closed(std::chrono::seconds(10), &closed);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(closed);
  EXPECT_EQ(response.compare(0, 12, "HTTP/1.1 400"), 0) << response;
  EXPECT_NE(response.find("not received whole within --timeout (1 s)"), std::string::npos)
      << response;
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 3.5);
  EXPECT_EQ(complete(server, {{"prompt", "The jury"}, {"max_tokens", 4}}).status, 200);
}

// A stream whose client never reads fails a write once the socket's buffers are full and
// --timeout has passed: its sequence is cancelled and its slot freed.
TEST(Server, TimeoutCancelsAStreamNobodyReads) {
  Server server(kDecayModel, {"--timeout", "1", "--parallel", "1"});
  RawClient reader(server.port(), 4096);
  const std::string body =
      json({{"prompt", "a"}, {"max_tokens", 1 << 30}, {"stream", true}}).dump();
  ASSERT_TRUE(
      reader.send_text("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                       "Content-Type: application/json\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
  bool started = false, freed = false;
  // About 3 s on 2 cores (the buffers hold some 40,000 tokens' events); far more under sanitizers.
  for (int i = 0; i < 2400 && !freed; ++i) {
    const json slots = get_slots(server);
    ASSERT_TRUE(slots.is_array());
    if (slots[0]["is_processing"] == true) started = true;
    freed = started && slots[0]["is_processing"] == false;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(started);
  EXPECT_TRUE(freed) << server.log();
  EXPECT_NE(server.log().find("cancelled (the client went away)"), std::string::npos)
      << server.log();
}

// Sends a non-streamed completion of max_tokens over a raw connection (closed with the client).
bool send_completion(RawClient& client, int max_tokens) {
  const std::string body = json({{"prompt", "a"}, {"max_tokens", max_tokens}}).dump();
  return client.send_text(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
}

// Whether slot 0 reaches is_processing == want within about two minutes (sanitizer builds).
bool slot_processing_becomes(const Server& server, bool want) {
  for (int i = 0; i < 2400; ++i) {
    const json slots = get_slots(server);
    if (slots.is_array() && slots[0]["is_processing"] == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A non-streamed request writes nothing until its answer is whole: its client's leaving is seen on
// the socket, and the request (endless here) is cancelled and its slot freed.
TEST(Server, AClientGoneCancelsANonStreamedRequest) {
  Server server(kDecayModel, {"--parallel", "1"});
  {
    RawClient client(server.port());
    ASSERT_TRUE(send_completion(client, 1 << 30));
    ASSERT_TRUE(slot_processing_becomes(server, true)) << server.log();
  }
  EXPECT_TRUE(slot_processing_becomes(server, false)) << server.log();
  EXPECT_NE(server.log().find("cancelled (the client went away) after"), std::string::npos)
      << server.log();
  EXPECT_EQ(complete(server, {{"prompt", "The jury"}, {"max_tokens", 4}}).status, 200);
}

// A non-streamed request whose client leaves while it waits in the queue frees its place there.
TEST(Server, AClientGoneFreesANonStreamedRequestsPlaceInTheQueue) {
  Server server(kDecayModel, {"--parallel", "1", "--max-queue", "1"});
  EndlessStream running(server);
  ASSERT_TRUE(running.started()) << server.log();
  {
    RawClient queued(server.port());
    ASSERT_TRUE(send_completion(queued, 4));
    // Queued before the probe: a probe read first would take its place (the server's threads may
    // read a later connection first).
    ASSERT_TRUE(metric_reaches(server, "aft_queue_depth", 1)) << server.log();
    ASSERT_EQ(complete(server, {{"prompt", "a"}, {"max_tokens", 1}}).status, 503) << server.log();
  }
  bool dropped = false;
  for (int i = 0; i < 600 && !dropped; ++i) {
    dropped =
        server.log().find("cancelled (the client went away) while queued") != std::string::npos;
    if (!dropped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(dropped) << server.log();
  EndlessStream next(server);
  ASSERT_TRUE(next.started()) << server.log();
  EXPECT_EQ(next.hang_up().find("server_busy"), std::string::npos) << server.log();
}

// SIGTERM does not wait --timeout (600 s by default) for a client stalled mid-request.
TEST(Server, TerminateDoesNotWaitForAStalledClient) {
  Server server(kDecayModel);
  RawClient stalled(server.port());
  ASSERT_TRUE(
      stalled.send_text("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                        "100\r\n\r\n{\"prompt\": "));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its handler is reading
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.terminate(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(server.log().find("a client still holds a connection"), std::string::npos)
      << server.log();
}

// n choices: choice i is what a request with seed + i gets alone (from a server without a cache,
// which evaluates each prompt itself), while the prompt is evaluated once and the others start
// from its state; streamed, each choice's chunks carry its index and give the same text.
TEST(Server, SeveralChoicesAreEachTheirSeedsAndShareOnePrompt) {
  Server server(kDecayModel, {"--prefill-chunk", "8"});
  Server uncached(kDecayModel, {"--prefill-chunk", "8", "--state-cache-mib", "0"});
  const std::string prompt = "The jury said that the city of Atlanta";
  const json request = {{"prompt", prompt},
                        {"max_tokens", 16},
                        {"temperature", 0.9},
                        {"seed", 70},
                        {"return_tokens", true}};
  json several_request = request;
  several_request["n"] = 4;
  const Reply several = complete(server, several_request);
  ASSERT_EQ(several.status, 200) << several.body;
  ASSERT_EQ(several.body["choices"].size(), 4u);
  std::set<std::string> texts;
  for (int i = 0; i < 4; ++i) {
    const json& choice = several.body["choices"][i];
    EXPECT_EQ(choice["index"], i);
    json alone_request = request;
    alone_request["seed"] = 70 + i;
    const Reply alone = complete(uncached, alone_request);
    ASSERT_EQ(alone.status, 200) << alone.body;
    EXPECT_EQ(choice["tokens"], alone.body["choices"][0]["tokens"]) << "choice " << i;
    EXPECT_EQ(choice["text"], alone.body["choices"][0]["text"]) << "choice " << i;
    texts.insert(choice["text"].get<std::string>());
  }
  EXPECT_GE(texts.size(), 3u) << several.body;  // the seeds differ
  EXPECT_EQ(several.body["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(several.body["usage"]["completion_tokens"], 64);
  EXPECT_EQ(several.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(metric(server, "aft_prefill_tokens_total"), static_cast<double>(prompt.size()));
  EXPECT_EQ(metric(server, "aft_requests_total"), 1);
  EXPECT_EQ(metric(server, "aft_completion_tokens_total"), 64);
  EXPECT_NE(server.log().find("request 1 choice 3 answered | prompt 38 tokens, 38 cached"),
            std::string::npos)
      << server.log();

  several_request["stream"] = true;
  several_request["stream_options"] = {{"include_usage", true}};
  several_request["seed"] = 70;
  auto res = server.client().Post("/v1/completions", several_request.dump(), "application/json");
  ASSERT_TRUE(res);
  const std::vector<json> chunks = sse_chunks(res->body);
  ASSERT_FALSE(chunks.empty()) << res->body;
  std::vector<std::string> streamed(4);
  std::vector<int> ends(4, 0);
  for (size_t c = 0; c + 1 < chunks.size(); ++c) {
    ASSERT_EQ(chunks[c]["choices"].size(), 1u) << chunks[c];
    const json& choice = chunks[c]["choices"][0];
    const int index = choice["index"].get<int>();
    ASSERT_TRUE(index >= 0 && index < 4) << chunks[c];
    EXPECT_EQ(ends[index], 0) << "choice " << index << " goes on after its end";
    streamed[index] += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) ++ends[index];
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(streamed[i], several.body["choices"][i]["text"]) << "choice " << i;
    EXPECT_EQ(ends[i], 1) << "choice " << i;
  }
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 64);

  const Reply chat = post(
      server, "/v1/chat/completions",
      json({{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 6}, {"n", 2}})
          .dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  ASSERT_EQ(chat.body["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(chat.body["choices"][i]["index"], i);
    EXPECT_EQ(chat.body["choices"][i]["message"]["role"], "assistant");
  }
}

// best_of candidates, the n likeliest per token returned: the same as ranking by hand the requests
// of each candidate's seed alone, with their log-probabilities.
TEST(Server, BestOfReturnsTheLikeliestCandidatesPerToken) {
  Server server(kDecayModel);
  const json request = {{"prompt", "It was the first time"},
                        {"max_tokens", 12},
                        {"temperature", 1.2},
                        {"seed", 9},
                        {"logprobs", 0}};
  std::vector<std::pair<double, std::string>> candidates;
  int64_t completion_tokens = 0;
  for (int i = 0; i < 5; ++i) {
    json alone = request;
    alone["seed"] = 9 + i;
    const Reply r = complete(server, alone);
    ASSERT_EQ(r.status, 200) << r.body;
    const json& logprobs = r.body["choices"][0]["logprobs"]["token_logprobs"];
    double sum = 0;
    for (const json& logprob : logprobs) sum += logprob.get<double>();
    candidates.emplace_back(sum / static_cast<double>(logprobs.size()),
                            r.body["choices"][0]["text"].get<std::string>());
    completion_tokens += r.body["usage"]["completion_tokens"].get<int64_t>();
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  json best = request;
  best["n"] = 2;
  best["best_of"] = 5;
  const Reply r = complete(server, best);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.body["choices"][i]["index"], i);
    EXPECT_EQ(r.body["choices"][i]["text"], candidates[static_cast<size_t>(i)].second);
    EXPECT_EQ(r.body["choices"][i]["logprobs"]["tokens"].size(), 12u);
  }
  EXPECT_EQ(r.body["usage"]["completion_tokens"], completion_tokens);  // every candidate's
  // Without logprobs in the request the candidates are ranked the same.
  best.erase("logprobs");
  const Reply plain = complete(server, best);
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.body["choices"][0]["text"], candidates[0].second);
  EXPECT_TRUE(plain.body["choices"][0]["logprobs"].is_null());
}

// Choices that can never all fit the slots and the queue are refused with 400; those that fit
// run, a slot after the other, the later ones from the first's prompt.
TEST(Server, ChoicesBeyondTheSlotsAndQueueAreRefused) {
  Server server(kDecayModel, {"--parallel", "1", "--max-queue", "1"});
  const Reply too_many = complete(server, {{"prompt", "The jury"}, {"n", 3}});
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(too_many.body["error"]["param"], "n");
  const Reply too_many_candidates =
      complete(server, {{"prompt", "The jury"}, {"n", 1}, {"best_of", 3}});
  EXPECT_EQ(too_many_candidates.status, 400);
  EXPECT_EQ(too_many_candidates.body["error"]["param"], "best_of");
  const Reply fits = complete(server, {{"prompt", "The jury"}, {"n", 2}, {"max_tokens", 5}});
  ASSERT_EQ(fits.status, 200) << fits.body;
  EXPECT_EQ(fits.body["choices"].size(), 2u);
  EXPECT_EQ(metric(server, "aft_prefill_tokens_total"), 8);
}

// The token of one character of the shipped model.
int32_t token_of(const Server& server, const std::string& character) {
  const Reply r = post(server, "/tokenize", json({{"content", character}}).dump());
  return r.body["tokens"].size() == 1 ? r.body["tokens"][0].get<int32_t>() : -1;
}

// response_format json_object: a completion that ends is one JSON object (the shipped model,
// nudged to close its strings and objects); one cut by max_tokens is the start of one; streamed,
// the same text. Without the grammar, the nudged model writes quotes and braces anywhere. With a
// json_schema, the object has the schema's shape.
// A model whose "." (6) ends a text, with the characters of a JSON object.
class ServerEndOfText : public ::testing::Test {
 protected:
  void SetUp() override {
    json config = tiny_config("local");
    config["vocab_size"] = 7;
    json tokenizer = char_tokenizer({"{", "}", "\"", "a", ":", " ", "."});
    tokenizer["end_of_text"] = 6;
    write_model_file(model_.path(), config, tokenizer, random_tensors(config, 5, 0.5f));
  }
  TempFile model_;
};

TEST_F(ServerEndOfText, EndsTheCompletionUnwritten) {
  Server server(model_.path());
  json request = {{"prompt", "a a"},
                  {"max_tokens", 50},
                  {"temperature", 0},
                  {"return_tokens", true},
                  {"logit_bias", {{"6", 100}}}};
  const Reply first = complete(server, request);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body["choices"][0]["text"], "");
  EXPECT_EQ(first.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(first.body["choices"][0]["tokens"], json::array());
  EXPECT_EQ(first.body["usage"]["completion_tokens"], 0);
  request["stream"] = true;
  auto streamed = server.client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(streamed);
  const std::vector<json> chunks = sse_chunks(streamed->body);
  ASSERT_FALSE(chunks.empty()) << streamed->body;
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop") << streamed->body;
  for (const json& chunk : chunks) EXPECT_EQ(chunk["choices"][0]["text"], "") << chunk;

  // Likely but not certain: where it comes, the completion stops short of max_tokens.
  request = {{"prompt", "a a"}, {"max_tokens", 300}, {"logit_bias", {{"6", 2}}}};
  int ended = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    request["seed"] = seed;
    const Reply r = complete(server, request);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.body["choices"][0]["text"];
    EXPECT_EQ(text.find('.'), std::string::npos) << text;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], text.size()) << r.body;
    if (r.body["choices"][0]["finish_reason"] == "stop") {
      ++ended;
      EXPECT_LT(text.size(), 300u);
    }
  }
  EXPECT_GT(ended, 0);

  // llama-server's ignore_eos: banned, so the completion runs to max_tokens.
  const Reply ignored = complete(server, {{"prompt", "a a"},
                                          {"max_tokens", 30},
                                          {"temperature", 0},
                                          {"ignore_eos", true},
                                          {"logit_bias", {{"6", 100}}}});
  ASSERT_EQ(ignored.status, 200) << ignored.body;
  const std::string text = ignored.body["choices"][0]["text"];
  EXPECT_EQ(text.size(), 30u) << text;
  EXPECT_EQ(text.find('.'), std::string::npos) << text;
  EXPECT_EQ(ignored.body["choices"][0]["finish_reason"], "length");
  const Reply bad = complete(server, {{"prompt", "a"}, {"ignore_eos", 1}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.body["error"]["param"], "ignore_eos") << bad.body;
}

// Inside a JSON string "." is text the grammar takes; as the end of text it never comes before
// the object is whole.
TEST_F(ServerEndOfText, NeverCutsAJsonObject) {
  Server server(model_.path());
  const Reply r = complete(server, {{"prompt", "a a"},
                                    {"max_tokens", 50},
                                    {"temperature", 0},
                                    {"logit_bias", {{"2", 50}, {"6", 100}}},
                                    {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.body["choices"][0]["text"];
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
  EXPECT_NE(text.find("\"\""), std::string::npos) << "a string was opened: " << text;
}

TEST(Server, JsonObjectResponsesAreObjects) {
  Server server(kDecayModel);
  const int32_t quote = token_of(server, "\"");
  const int32_t brace = token_of(server, "}");
  ASSERT_GE(quote, 0);
  ASSERT_GE(brace, 0);
  json request = {{"prompt", "The jury said"},
                  {"max_tokens", 400},
                  {"logit_bias", {{std::to_string(quote), 5}, {std::to_string(brace), 5}}},
                  {"response_format", {{"type", "json_object"}}}};
  for (int seed = 1; seed <= 6; ++seed) {
    request["seed"] = seed;
    const Reply r = complete(server, request);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.body["choices"][0]["text"];
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop") << text;
    EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
    if (seed == 1) {
      json streamed_request = request;
      streamed_request["stream"] = true;
      auto res =
          server.client().Post("/v1/completions", streamed_request.dump(), "application/json");
      ASSERT_TRUE(res);
      std::string streamed;
      for (const json& chunk : sse_chunks(res->body)) {
        streamed += chunk["choices"][0]["text"].get<std::string>();
      }
      EXPECT_EQ(streamed, text);
      json free_request = request;
      free_request.erase("response_format");
      const Reply free = complete(server, free_request);
      EXPECT_FALSE(json::parse(free.body["choices"][0]["text"].get<std::string>(), nullptr, false)
                       .is_object())
          << free.body;
    }
  }
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
               {"max_tokens", 400},
               {"seed", 2},
               {"logit_bias", request["logit_bias"]},
               {"response_format", {{"type", "json_object"}}}};
  const Reply answer = post(server, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_TRUE(json::parse(answer.body["choices"][0]["message"]["content"].get<std::string>(),
                          nullptr, false)
                  .is_object())
      << answer.body;

  // Cut short: the beginning of an object.
  const Reply cut = complete(server, {{"prompt", "The jury said"},
                                      {"max_tokens", 40},
                                      {"seed", 1},
                                      {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(server::JsonGrammar().push(cut.body["choices"][0]["text"].get<std::string>()))
      << cut.body;

  // A schema: its properties in its order, the enum's values, the types, the strings' lengths.
  const std::string schema_request = R"({"prompt": "The jury said", "max_tokens": 400, "seed": 3,
      "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "strict": true,
        "schema": {"type": "object", "additionalProperties": false,
          "properties": {"verdict": {"enum": ["guilty", "not guilty"]},
                         "count": {"type": "integer", "minimum": 1, "maximum": 12},
                         "notes": {"type": "array", "maxItems": 2,
                                   "items": {"type": "string", "minLength": 2, "maxLength": 8}},
                         "ok": {"type": "boolean"}},
          "required": ["verdict", "count", "notes", "ok"]}}}})";
  // Sent in the schema's order (json, a std::map, would sort the properties).
  auto with_bias = nlohmann::ordered_json::parse(schema_request);
  with_bias["logit_bias"] = {{std::to_string(quote), 3}};
  const Reply shaped = post(server, "/v1/completions", with_bias.dump());
  ASSERT_EQ(shaped.status, 200) << shaped.body;
  EXPECT_EQ(shaped.body["choices"][0]["finish_reason"], "stop");
  const auto verdict = nlohmann::ordered_json::parse(
      shaped.body["choices"][0]["text"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(verdict.is_object()) << shaped.body;
  std::vector<std::string> keys;
  for (const auto& item : verdict.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, std::vector<std::string>({"verdict", "count", "notes", "ok"})) << verdict;
  EXPECT_TRUE(verdict["verdict"] == "guilty" || verdict["verdict"] == "not guilty") << verdict;
  EXPECT_TRUE(verdict["count"].is_number_integer() && verdict["count"] >= 1 &&
              verdict["count"] <= 12)
      << verdict;
  EXPECT_TRUE(verdict["notes"].is_array() && verdict["notes"].size() <= 2) << verdict;
  for (const auto& note : verdict["notes"]) {
    EXPECT_TRUE(note.is_string() && note.get<std::string>().size() >= 2 &&
                note.get<std::string>().size() <= 8)
        << verdict;
  }
  EXPECT_TRUE(verdict["ok"].is_boolean()) << verdict;

  json unsupported = json::parse(schema_request);
  unsupported["response_format"]["json_schema"]["schema"]["properties"]["count"]["pattern"] = "1";
  const Reply refused_schema = complete(server, unsupported);
  EXPECT_EQ(refused_schema.status, 400);
  EXPECT_EQ(refused_schema.body["error"]["param"], "response_format");
  EXPECT_NE(refused_schema.body["error"]["message"].get<std::string>().find("pattern"),
            std::string::npos)
      << refused_schema.body;

  for (const json& format : {json("json_object"), json({{"type", "json_schema"}}),
                             json({{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}),
                             json({{"type", "xml"}})}) {
    const Reply refused = complete(server, {{"prompt", "a"}, {"response_format", format}});
    EXPECT_EQ(refused.status, 400) << format;
    EXPECT_EQ(refused.body["error"]["param"], "response_format") << refused.body;
  }
  EXPECT_EQ(complete(server, {{"prompt", "a"}, {"response_format", {{"type", "text"}}}}).status,
            200);
}

}  // namespace
}  // namespace aft::testing
