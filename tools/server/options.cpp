#include "tools/server/options.h"

#include <cstdlib>
#include <stdexcept>

#include "tools/cli/arguments.h"
#include "tools/cli/text_file.h"
#include "tools/server/chat_template.h"

namespace aft::server {

using cli::parse_integer;
using cli::UsageError;

const char kUsage[] =
    "usage: aft-server MODEL [options]\n"
    "\n"
    "Serves an AFT language model over HTTP with OpenAI's completions API (docs/server.md).\n"
    "\n"
    "options:\n"
    "      --host HOST              address to listen on (default 127.0.0.1)\n"
    "      --port N                 port to listen on (default 8080)\n"
    "      --parallel N             requests generating at once, decoded as one batch (default 4)\n"
    "      --max-queue N            requests waiting for a slot; more get 503 (default 64)\n"
    "  -t, --threads N              threads; 0 = one per physical core (default 0)\n"
    "      --api-key KEY            require \"Authorization: Bearer KEY\" (not on /health); also\n"
    "                               from the environment, AFT_API_KEY\n"
    "      --api-key-file FILE      the key is FILE's first line (kept out of the process list)\n"
    "      --state-cache-mib N      memory for saved prompt states; 0 = no cache (default 256)\n"
    "      --max-body-bytes N       largest request body; larger gets 413 (default 1048576)\n"
    "      --prefill-chunk N        prompt tokens evaluated between two decode steps (default "
    "128)\n"
    "      --cache-every N          inside long prompts, also cache the state every N tokens\n"
    "                               (default 2048)\n"
    "      --chat-template NAME|JSON  how chat messages become a prompt: plain, rwkv, chatml or\n"
    "                               a JSON object (docs/server.md); default: the model file's\n"
    "                               own (its metadata's chat_template), else plain\n"
    "      --chat-template-file F   the same, read from a file\n"
    "      --redis URL              share cached states with other replicas through Redis:\n"
    "                               redis://[[user]:password@]host[:port][/db] or\n"
    "                               unix://[[user]:password@]/path/to.sock[?db=N]\n"
    "      --redis-ttl SECONDS      how long a state stays in Redis after it is written (default\n"
    "                               86400, a day: longer than a conversation's pauses, and Redis\n"
    "                               then holds about a day of states, not every one ever written)\n"
    "      --slot-save-path DIR     enable POST /slots/ID?action=save|restore|erase, with files\n"
    "                               in DIR (docs/server.md)\n"
    "      --timeout N              HTTP read and write timeout in seconds (default 600)\n"
    "      --no-checksum            skip verifying tensor checksums when loading\n"
    "      --matmul-precision P     f32 (default) or bf16: prompts' products of f32 weights on\n"
    "                               the matrix units, if the CPU has them (aft-run --help)\n"
    "      --no-mmap                no effect: every weight matrix is packed into memory at load\n"
    "                               rather than read the mapped file (aft-run --help)\n"
    "  -v, --verbose                log each request's sampling settings and cache lookups\n"
    "  -h, --help                   show this help\n";

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (args.help()) return std::nullopt;
    if (arg == "-m" || arg == "--model") {
      options.model = value();
    } else if (arg == "--host") {
      options.host = value();
      if (options.host.empty()) throw UsageError("--host: expected an address, found \"\"");
    } else if (arg == "--port") {
      options.port = static_cast<int>(parse_integer(arg, value(), 0, 65535));
    } else if (arg == "--parallel" || arg == "-np") {
      options.parallel = static_cast<int>(parse_integer(arg, value(), 1, 256));
    } else if (arg == "--max-queue") {
      options.max_queue = static_cast<int>(parse_integer(arg, value(), 0, 4096));
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = static_cast<int>(parse_integer(arg, value(), 0, 1024));
    } else if (arg == "--api-key") {
      options.api_key = value();
      if (options.api_key.empty()) throw UsageError("--api-key: the key is empty");
    } else if (arg == "--api-key-file") {
      const std::string path = value();
      const std::string text = cli::read_text_file(path, "an API key file");
      options.api_key = text.substr(0, text.find_first_of("\r\n"));
      if (options.api_key.empty())
        throw UsageError("--api-key-file: " + path + ": no key on its first line");
    } else if (arg == "--state-cache-mib") {
      options.state_cache_bytes = static_cast<size_t>(parse_integer(arg, value(), 0, 1 << 20))
                                  << 20;
    } else if (arg == "--max-body-bytes") {
      options.max_body_bytes = static_cast<size_t>(parse_integer(arg, value(), 1, 1LL << 32));
    } else if (arg == "--cache-every") {
      options.cache_every = static_cast<int>(parse_integer(arg, value(), 1, 1 << 30));
    } else if (arg == "--prefill-chunk") {
      options.prefill_chunk = static_cast<int>(parse_integer(arg, value(), 1, 4096));
    } else if (arg == "--chat-template" || arg == "--chat-template-file") {
      const std::string text =
          arg == "--chat-template" ? value() : cli::read_text_file(value(), "a chat template");
      try {
        parse_chat_template(text);
      } catch (const std::invalid_argument& error) {
        throw UsageError(arg + ": " + error.what());
      }
      options.chat_template = text;
    } else if (arg == "--redis") {
      options.redis = parse_redis_url(value());
#ifndef AFT_SERVER_REDIS
      throw UsageError(
          "--redis: this aft-server is built without Redis (hiredis was not found: "
          "tools/install-deps.sh installs libhiredis-dev)");
#endif
    } else if (arg == "--redis-ttl") {
      options.redis_ttl = static_cast<int>(parse_integer(arg, value(), 1, 1 << 30));
    } else if (arg == "--slot-save-path") {
      options.slot_save_path = value();
      if (options.slot_save_path.empty()) throw UsageError("--slot-save-path: the path is empty");
    } else if (arg == "--timeout" || arg == "-to") {
      options.timeout_seconds = static_cast<int>(parse_integer(arg, value(), 1, 86400));
    } else if (options.load.parse(args)) {
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else {
      args.model(options.model);
    }
  }
  if (options.model.empty()) throw UsageError("no model given");
  if (options.api_key.empty()) {
    const char* key = std::getenv("AFT_API_KEY");
    if (key != nullptr && *key != '\0') options.api_key = key;
  }
  return options;
}

}  // namespace aft::server
