// aft-server: an OpenAI-compatible HTTP server over the engine (docs/server.md). Listens first,
// answering 503 while the model loads and warms up, then serves until SIGINT or SIGTERM.
// Exit codes: 0 stopped by a signal, 1 a runtime error (model, address), 2 bad usage.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <httplib.h>

#include "aft.h"
#include "tools/cli/api_call.h"
#include "tools/cli/arguments.h"
#include "tools/cli/progress.h"
#include "tools/server/chat_template.h"
#include "tools/server/options.h"
#include "tools/server/routes.h"
#include "tools/server/scheduler.h"
#include "tools/server/slot_files.h"
#ifdef AFT_SERVER_REDIS
#include "tools/server/redis_store.h"
#endif

namespace {

using aft::server::Options;
namespace cli = aft::cli;

// --chat-template's, else the model file's own (its metadata's chat_template), else plain.
aft::server::ChatTemplate chat_template(const Options& options, const aft_model* model) {
  if (!options.chat_template.empty())
    return aft::server::parse_chat_template(options.chat_template);
  const char* own = aft_model_metadata_get(model, "metadata.chat_template");
  if (own == nullptr) return aft::server::parse_chat_template("plain");
  try {
    return aft::server::parse_chat_template(own);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(options.model + ": its metadata's chat_template: " + error.what() +
                             " (--chat-template NAME uses another)");
  }
}

int serve(const Options& options) {
  // The signals are taken by sigwait below, not delivered to whichever thread runs; a client gone
  // away must fail a write, not end the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  aft::server::check_slot_save_path(options);
  aft::server::ServerState state(options);
  state.model_name = std::filesystem::path(options.model).filename().string();
  httplib::Server http;
  http.set_payload_max_length(options.max_body_bytes);
  // A client that stalls mid-request, or stops reading a response, holds a thread until then.
  http.set_read_timeout(options.timeout_seconds);
  http.set_write_timeout(options.timeout_seconds);
  // An idle kept-alive connection waits httplib's 5 s for its next request, a shorter --timeout
  // bounds that too: a client that stalls is gone after about --timeout, not 5 s later.
  http.set_keep_alive_timeout(std::min(options.timeout_seconds, 5));
  // httplib's default, SO_REUSEPORT, would let a second server share a port in use silently.
  int listening_socket = -1;
  http.set_socket_options([&listening_socket](int socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening_socket = socket;
  });
  // httplib closes a connection after 5 requests: clients that keep theirs open (OpenAI's, load
  // generators) would reconnect all the time, in bursts its backlog drops (below).
  http.set_keep_alive_max_count(1000);
  // Each streaming request holds a thread: enough for every slot and the queue, and a few more.
  const size_t threads = static_cast<size_t>(options.parallel + options.max_queue + 4);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  aft::server::install_routes(http, state);
  int port = options.port;
  if (port == 0) port = http.bind_to_any_port(options.host);
  if (port <= 0 || (options.port != 0 && !http.bind_to_port(options.host, port))) {
    throw std::runtime_error("cannot listen on " + options.host + ":" +
                             std::to_string(options.port) +
                             " (in use, or not an address of this machine)");
  }
  // httplib listens with a backlog of 5: 32 clients connecting at once lost connections, each
  // retried by the kernel a second later. listen() again sets the backlog of a listening socket.
  if (listening_socket >= 0) listen(listening_socket, SOMAXCONN);
  std::atomic<bool> listener_done{false};
  std::thread listener([&http, &listener_done] {
    http.listen_after_bind();
    listener_done = true;
  });
  struct StopListener {
    httplib::Server& http;
    std::thread& listener;
    void stop() {
      if (!listener.joinable()) return;
      // httplib's stop() does nothing before the listener runs, which then runs for ever: a
      // model refused at once must not leave the process hanging.
      for (int i = 0; i < 1000 && !http.is_running(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      http.stop();
      listener.join();
    }
    ~StopListener() { stop(); }
  } stop_listener{http, listener};

  cli::Progress progress("aft-server");
  progress.show("loading " + options.model);
  const aft_model_params model_params = options.load.params();
  aft_model* raw_model = nullptr;
  cli::check(aft_model_load(options.model.c_str(), &model_params, &raw_model), "loading the model");
  const cli::Model model(raw_model);
  aft_model_info info;
  cli::check(aft_model_get_info(model.get(), &info), "reading the model");
  state.limits = {model.get(), info.vocab_size, info.max_positions};
  state.chat_template = chat_template(options, model.get());
#ifdef AFT_SERVER_REDIS
  std::unique_ptr<aft::server::RedisCache> redis;  // outlives the scheduler, which writes to it
  if (options.redis) {
    progress.clear();  // the cache logs a line
    aft::server::RedisCache::Settings settings;
    settings.url = *options.redis;
    settings.ttl_seconds = options.redis_ttl;
    settings.model_fingerprint = aft_model_fingerprint(model.get());
    settings.cache_every = static_cast<size_t>(options.cache_every);
    redis = std::make_unique<aft::server::RedisCache>(std::move(settings), state.metrics);
    state.shared_cache = redis.get();
  }
#endif
  progress.show("warming up");
  aft::server::Scheduler scheduler(model.get(), options, state.metrics, state.shared_cache);
  progress.clear();
  state.scheduler = &scheduler;
  state.ready = true;
  std::fprintf(stderr,
               "aft-server: %s (%s, %lld parameters, kernels %s), %d slots, chat template %s, "
               "listening on http://%s:%d\n",
               state.model_name.c_str(), info.mixer, static_cast<long long>(info.n_parameters),
               aft_kernel_isa(), options.parallel, state.chat_template.name.c_str(),
               options.host.c_str(), port);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "aft-server: stopping (%s)\n",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  state.ready = false;
  // Requests in flight end with an error (an endless stream would otherwise hold its handler's
  // thread, which http.stop() waits for), then the listener stops.
  scheduler.shutdown();
  // httplib stops calling a stream's provider once stopping: let the streams send their end first.
  for (int i = 0; i < 500 && state.open_streams > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http.stop();
  // httplib waits for every connection, and one whose client stalls mid-request holds on until
  // --timeout (600 s by default) passes: after a grace period, exit without it.
  for (int i = 0; i < 500 && !listener_done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!listener_done) {
    std::fprintf(stderr, "aft-server: a client still holds a connection: exiting without it\n");
    std::_Exit(0);  // the threads still in httplib's pool use objects that destructors would free
  }
  listener.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::tool_main(
      "aft-server", aft::server::kUsage, [&] { return aft::server::parse_options(argc, argv); },
      serve);
}
