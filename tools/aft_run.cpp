// aft-run: generate text from a model, streaming it to stdout; timings on stderr.
// Exit codes: 0 success, 1 a runtime error (file, model, prompt), 2 bad usage.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/cli/api_call.h"
#include "tools/cli/arguments.h"

namespace {

using aft::cli::check;
using aft::cli::parse_float;
using aft::cli::parse_integer;
using aft::cli::parse_logit_bias;
using aft::cli::UsageError;
namespace cli = aft::cli;

const char kUsage[] =
    "usage: aft-run MODEL [options]\n"
    "\n"
    "Generates text with an AFT language model: the prompt, then the continuation, on stdout.\n"
    "\n"
    "options:\n"
    "  -m, --model PATH             model file (or give it as the first argument)\n"
    "  -p, --prompt TEXT            prompt text\n"
    "  -f, --file PATH              read the prompt from a file\n"
    "  -n, --n-predict N            tokens to generate (default 128)\n"
    "  -s, --seed N                 random seed (default: chosen at random and printed)\n"
    "  -t, --threads N              threads; 0 = one per physical core (default 0)\n"
    "      --no-checksum            skip verifying tensor checksums when loading\n"
    "  -v, --verbose                also report the sequence's state: its size, and save +\n"
    "                               restore time\n"
    "  -h, --help                   show this help\n"
    "\n"
    "sampling, applied in this order (llama.cpp's):\n"
    "  -l, --logit-bias ID(+|-)B    add B to token ID's logit; repeatable (15-inf bans token 15)\n"
    "      --repeat-last-n N        the recent tokens penalised, the prompt's included: the last\n"
    "                               N; -1 = all, 0 = none (default 64)\n"
    "      --repeat-penalty F       divide a recent token's logit by F if positive, multiply it\n"
    "                               if negative; 1 = off (default 1)\n"
    "      --frequency-penalty F    lower a recent token's logit by F x its count; 0 = off\n"
    "                               (default 0)\n"
    "      --presence-penalty F     lower a recent token's logit by F; 0 = off (default 0)\n"
    "      --top-k K                keep the K most likely tokens; 0 = all (default 40)\n"
    "      --top-p P                keep the smallest set with probability >= P (default 0.95)\n"
    "      --min-p P                drop tokens less likely than P x the most likely; 0 = off\n"
    "                               (default 0.05)\n"
    "      --temp T                 temperature, after the filters; 0 = greedy (default 0.8)\n";

struct Options {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_file;
  long long n_predict = 128;
  aft_sampler_params sampling = aft_sampler_default_params();  // logit_bias: the vector below
  std::vector<aft_logit_bias> logit_bias;
  std::optional<uint64_t> seed;
  long long threads = 0;
  bool verify_checksums = true;
  bool verbose = false;
};

// Returns nullopt when --help was asked for.
std::optional<Options> parse_args(int argc, char** argv) {
  Options options;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (arg == "-h" || arg == "--help") return std::nullopt;
    if (arg == "-m" || arg == "--model") {
      options.model = value();
    } else if (arg == "-p" || arg == "--prompt") {
      options.prompt = value();
    } else if (arg == "-f" || arg == "--file") {
      options.prompt_file = value();
    } else if (arg == "-n" || arg == "--n-predict") {
      options.n_predict = parse_integer(arg, value(), 0, std::numeric_limits<int32_t>::max());
    } else if (arg == "--temp") {
      options.sampling.temperature = parse_float(arg, value(), 0.0f, 100.0f);
    } else if (arg == "--top-k") {
      options.sampling.top_k =
          static_cast<int32_t>(parse_integer(arg, value(), 0, std::numeric_limits<int32_t>::max()));
    } else if (arg == "--top-p") {
      options.sampling.top_p = parse_float(arg, value(), 1e-6f, 1.0f);
    } else if (arg == "--min-p") {
      options.sampling.min_p = parse_float(arg, value(), 0.0f, 1.0f);
    } else if (arg == "--repeat-last-n") {
      options.sampling.repeat_last_n = static_cast<int32_t>(
          parse_integer(arg, value(), -1, std::numeric_limits<int32_t>::max()));
    } else if (arg == "--repeat-penalty") {
      options.sampling.repeat_penalty = parse_float(arg, value(), 0.01f, 100.0f);
    } else if (arg == "--frequency-penalty") {
      options.sampling.frequency_penalty = parse_float(arg, value(), -100.0f, 100.0f);
    } else if (arg == "--presence-penalty") {
      options.sampling.presence_penalty = parse_float(arg, value(), -100.0f, 100.0f);
    } else if (arg == "-l" || arg == "--logit-bias") {
      options.logit_bias.push_back(parse_logit_bias(arg, value()));
    } else if (arg == "-s" || arg == "--seed") {
      options.seed = static_cast<uint64_t>(
          parse_integer(arg, value(), 0, std::numeric_limits<long long>::max()));
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = parse_integer(arg, value(), 0, 1024);
    } else if (arg == "--no-checksum") {
      options.verify_checksums = false;
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else {
      args.model(options.model);
    }
  }
  if (options.model.empty()) throw UsageError("no model given");
  if (options.prompt && options.prompt_file) {
    throw UsageError("give the prompt with --prompt or --file, not both");
  }
  if (!options.prompt && !options.prompt_file)
    throw UsageError("no prompt: use --prompt or --file");
  return options;
}

std::string read_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw std::runtime_error(path + ": is a directory, not a prompt file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the prompt file");
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad()) throw std::runtime_error(path + ": cannot read the prompt file");
  return text;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Text to stdout, now: a full disk or a closed pipe (with SIGPIPE ignored) stops the run with an
// error instead of generating into the void.
void write_out(const char* text, size_t length) {
  if (std::fwrite(text, 1, length, stdout) != length || std::fflush(stdout) != 0) {
    throw std::runtime_error(std::string("writing the output: ") + std::strerror(errno));
  }
}

// Tokens printed as whole characters (aft_detokenizer): a character whose bytes span tokens is
// printed once complete, bytes that cannot form one as U+FFFD.
class TokenPrinter {
 public:
  explicit TokenPrinter(const aft_model* model) {
    aft_detokenizer* raw = nullptr;
    check(aft_detokenizer_create(model, &raw), "creating a detokenizer");
    detokenizer_.reset(raw);
  }
  void token(int32_t token) {
    print([&](size_t* length) {
      return aft_detokenizer_push(detokenizer_.get(), token, text_.data(), text_.size(), length);
    });
  }
  // The end of the text: an unfinished character's bytes.
  void finish() {
    print([&](size_t* length) {
      return aft_detokenizer_flush(detokenizer_.get(), text_.data(), text_.size(), length);
    });
  }

 private:
  template <typename Call>
  void print(const Call& call) {
    size_t length = 0;
    aft_status status = call(&length);
    if (status == AFT_ERR_BUFFER_TOO_SMALL) {  // a long token: nothing consumed, again with room
      text_.resize(length);
      status = call(&length);
    }
    check(status, "decoding a token");
    write_out(text_.data(), length);
  }

  cli::Detokenizer detokenizer_;
  std::vector<char> text_ = std::vector<char>(64);
};

// The sequence's state (what aft_session_state_save writes) and a save + restore round trip.
void report_state(aft_session* session) {
  const size_t size = aft_session_state_size(session);
  std::vector<unsigned char> saved(size);
  const auto start = Clock::now();
  check(aft_session_state_save(session, saved.data(), saved.size(), nullptr), "saving the state");
  check(aft_session_state_load(session, saved.data(), saved.size()), "restoring the state");
  std::fprintf(stderr, "aft-run: state %zu bytes at position %lld, saved and restored in %.3f ms\n",
               size, static_cast<long long>(aft_session_position(session)), ms_since(start));
}

// Options are parsed before the model is known: biased tokens are checked against its vocabulary
// here, before anything is printed.
cli::Sampler create_sampler(const Options& options, uint64_t seed, int32_t vocab_size) {
  for (const aft_logit_bias& bias : options.logit_bias) {
    if (bias.token >= vocab_size) {
      throw std::runtime_error("--logit-bias: token " + std::to_string(bias.token) +
                               " is outside the model's vocabulary of " +
                               std::to_string(vocab_size) + " tokens");
    }
  }
  aft_sampler_params params = options.sampling;
  params.logit_bias = options.logit_bias.data();
  params.n_logit_bias = options.logit_bias.size();
  params.seed = seed;
  aft_sampler* sampler = nullptr;
  check(aft_sampler_create(&params, &sampler), "creating the sampler");
  return cli::Sampler(sampler);
}

int run(const Options& options) {
  const std::string prompt = options.prompt ? *options.prompt : read_file(*options.prompt_file);
  if (prompt.empty()) throw std::runtime_error("the prompt is empty: give at least one character");

  const auto load_start = Clock::now();
  aft_model_params model_params = aft_model_default_params();
  model_params.verify_checksums = options.verify_checksums ? 1 : 0;
  aft_model* raw_model = nullptr;
  check(aft_model_load(options.model.c_str(), &model_params, &raw_model), "loading the model");
  const cli::Model model(raw_model);
  const double load_ms = ms_since(load_start);
  aft_model_info info;
  check(aft_model_get_info(model.get(), &info), "reading the model");

  size_t n_prompt = 0;
  const aft_status sized =
      aft_tokenize(model.get(), prompt.data(), prompt.size(), nullptr, 0, &n_prompt);
  if (sized != AFT_ERR_BUFFER_TOO_SMALL) check(sized, "tokenizing the prompt");
  std::vector<int32_t> tokens(n_prompt);
  check(aft_tokenize(model.get(), prompt.data(), prompt.size(), tokens.data(), tokens.size(),
                     &n_prompt),
        "tokenizing the prompt");

  aft_session_params session_params = aft_session_default_params();
  session_params.n_threads = static_cast<int32_t>(options.threads);
  aft_session* raw_session = nullptr;
  check(aft_session_create(model.get(), &session_params, &raw_session), "creating a session");
  const cli::Session session(raw_session);

  const uint64_t seed = options.seed ? *options.seed : std::random_device{}();
  const cli::Sampler sampler = create_sampler(options, seed, info.vocab_size);
  // The prompt counts among the recent tokens the penalties look at, as in llama.cpp.
  for (int32_t token : tokens)
    check(aft_sampler_accept(sampler.get(), token), "recording the prompt");

  std::fprintf(stderr,
               "aft-run: %s model, %d layers x %d, %lld parameters, kernels %s, seed %llu\n",
               info.mixer, info.n_layers, info.d_model, static_cast<long long>(info.n_parameters),
               aft_kernel_isa(), static_cast<unsigned long long>(seed));

  std::vector<float> logits(static_cast<size_t>(info.vocab_size));
  const auto prefill_start = Clock::now();
  check(
      aft_session_eval(session.get(), tokens.data(), tokens.size(), AFT_LOGITS_LAST, logits.data()),
      "evaluating the prompt");
  const double prefill_ms = ms_since(prefill_start);
  // Echoed once evaluated: a prompt the model refuses (past its positions) is not printed first.
  write_out(prompt.data(), prompt.size());

  TokenPrinter printer(model.get());
  long long generated = 0;
  double decode_ms = 0.0;
  while (generated < options.n_predict) {
    int32_t token = 0;
    check(aft_sampler_sample(sampler.get(), logits.data(), logits.size(), &token), "sampling");
    printer.token(token);
    ++generated;
    if (generated == options.n_predict) break;
    if (info.max_positions > 0 && aft_session_position(session.get()) >= info.max_positions) {
      std::fprintf(stderr, "\naft-run: stopped at the model's limit of %lld positions\n",
                   static_cast<long long>(info.max_positions));
      break;
    }
    const auto step_start = Clock::now();
    check(aft_session_eval(session.get(), &token, 1, AFT_LOGITS_LAST, logits.data()), "generating");
    decode_ms += ms_since(step_start);
  }
  printer.finish();
  write_out("\n", 1);  // flushed: the text ends before the summary starts on a shared terminal

  const long long decoded = generated > 0 ? generated - 1 : 0;
  std::fprintf(stderr,
               "aft-run: load %.1f ms | prompt %zu tokens, %.1f ms, %.1f tokens/s | "
               "generated %lld tokens, decode %.1f ms, %.1f tokens/s\n",
               load_ms, tokens.size(), prefill_ms, tokens.size() * 1000.0 / prefill_ms, generated,
               decode_ms, decoded > 0 ? decoded * 1000.0 / decode_ms : 0.0);
  if (options.verbose) report_state(session.get());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return aft::cli::tool_main(
      "aft-run", kUsage, [&] { return parse_args(argc, argv); }, run);
}
