// aft-server as a client meets it: the real binary on a free loopback port, spoken to over HTTP.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model_file_writer.h"
#include "run_command.h"
#include "tools/server/routes.h"

namespace aft::testing {
namespace {

using nlohmann::json;

const std::string kDecayModel = AFT_SHIPPED_DECAY_MODEL;  // char tokens: text is its tokens
const std::string kFixtures = AFT_FIXTURES_DIR;

// The server as a child process, its stderr in a file; stopped with SIGTERM.
class Server {
 public:
  // Started on --port 0: the kernel picks a free port, which the server's ready line names.
  explicit Server(const std::string& model, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {AFT_SERVER_PATH, model, "--port", "0", "--threads", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;  // built before fork: the child only calls what is safe there
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    const std::string log_path = log_.path();
    pid_ = fork();
    if (pid_ == 0) {
      const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, STDERR_FILENO);
      dup2(log, STDOUT_FILENO);
      execv(raw[0], raw.data());
      _exit(127);
    }
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

  const std::string follow_up =
      prompt + a.body["choices"][0]["text"].get<std::string>() + " and the county";
  json second = first;
  second["prompt"] = follow_up;
  const Reply b = complete(cached, second);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.body["usage"]["prompt_tokens_details"]["cached_tokens"], prompt.size() + 20);
  const Reply c = complete(uncached, second);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(b.body["choices"][0]["text"], c.body["choices"][0]["text"]);

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
      {{{"prompt", "a"}, {"stop", {1}}}, "stop"},
      {{{"prompt", "a"}, {"stop", std::string(1025, 'x')}}, "stop"},
      {{{"prompt", "a"}, {"stream", "yes"}}, "stream"},
      {{{"prompt", "a"}, {"seed", 1.5}}, "seed"},
      {{{"prompt", "a"}, {"logprobs", 2}}, "logprobs"},
      {{{"prompt", "a"}, {"echo", true}}, "echo"},
      {{{"prompt", "a"}, {"n", 2}}, "n"},
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

}  // namespace
}  // namespace aft::testing
