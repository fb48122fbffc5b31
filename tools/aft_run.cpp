// aft-run: generate text from a model, streaming it to stdout; timings on stderr.
// Exit codes: 0 success, 1 a runtime error (file, model, prompt), 2 bad usage.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
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
#include "tools/cli/elapsed.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/prefix_state.h"
#include "tools/cli/text_file.h"

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
    "      --prompt-cache FILE      keep the state after the prompt in FILE; a later run whose\n"
    "                               prompt starts with the same tokens restores it and\n"
    "                               evaluates only the rest\n"
    "  -i, --interactive            after the continuation, read lines from stdin: each is fed\n"
    "                               to the same sequence and continued with -n tokens\n"
    "      --no-checksum            skip verifying tensor checksums when loading\n"
    "      --matmul-precision P     f32 (default) or bf16: a prompt's products of f32 weights\n"
    "                               on the matrix units (if the CPU has them), weights and\n"
    "                               inputs rounded to bf16; decoding stays f32\n"
    "      --no-mmap                no effect: every weight matrix is packed into memory at load\n"
    "                               rather than read the mapped file: slower to load, faster\n"
    "                               to decode where the file's pages are 4 KiB ones\n"
    "  -v, --verbose                also report the sequence's state: its size, and save +\n"
    "                               restore time\n"
    "  -h, --help                   show this help\n"
    "\n"
    "sampling, applied in this order (llama.cpp's):\n"
    "  -l, --logit-bias ID(+|-)B    add B to token ID's logit; repeatable (15-inf bans token 15)\n"
    "      --ignore-eos             never sample the model's end-of-text token, which otherwise\n"
    "                               ends the text unprinted\n"
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
  std::optional<std::string> prompt_cache;
  bool interactive = false;
  bool ignore_eos = false;
  cli::ModelFlags load;
  bool verbose = false;
};

// Returns nullopt when --help was asked for.
std::optional<Options> parse_args(int argc, char** argv) {
  Options options;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (args.help()) return std::nullopt;
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
    } else if (arg == "--ignore-eos") {
      options.ignore_eos = true;
    } else if (arg == "-s" || arg == "--seed") {
      options.seed = static_cast<uint64_t>(
          parse_integer(arg, value(), 0, std::numeric_limits<long long>::max()));
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = parse_integer(arg, value(), 0, 1024);
    } else if (arg == "--prompt-cache") {
      options.prompt_cache = value();
    } else if (arg == "-i" || arg == "--interactive") {
      options.interactive = true;
    } else if (options.load.parse(args)) {
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

using cli::Clock;
using cli::ms_since;

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
// --ignore-eos: end_of_text (if any) banned.
cli::Sampler create_sampler(const Options& options, uint64_t seed, int32_t vocab_size,
                            int32_t end_of_text) {
  std::vector<aft_logit_bias> logit_bias = options.logit_bias;
  if (options.ignore_eos && end_of_text >= 0) {
    logit_bias.push_back({end_of_text, -std::numeric_limits<float>::infinity()});
  }
  for (const aft_logit_bias& bias : logit_bias) {
    if (bias.token >= vocab_size) {
      throw std::runtime_error("--logit-bias: token " + std::to_string(bias.token) +
                               " is outside the model's vocabulary of " +
                               std::to_string(vocab_size) + " tokens");
    }
  }
  aft_sampler_params params = options.sampling;
  params.logit_bias = logit_bias.data();
  params.n_logit_bias = logit_bias.size();
  params.seed = seed;
  aft_sampler* sampler = nullptr;
  check(aft_sampler_create(&params, &sampler), "creating the sampler");
  return cli::Sampler(sampler);
}

std::vector<int32_t> tokenize(const aft_model* model, const std::string& text, const char* what) {
  size_t n = 0;
  const aft_status sized = aft_tokenize(model, text.data(), text.size(), nullptr, 0, &n);
  if (sized != AFT_ERR_BUFFER_TOO_SMALL) check(sized, std::string("tokenizing ") + what);
  std::vector<int32_t> tokens(n);
  check(aft_tokenize(model, text.data(), text.size(), tokens.data(), tokens.size(), &n),
        std::string("tokenizing ") + what);
  return tokens;
}

// A process's first evaluation pays a one-time set-up (the thread team, oneDNN's generated
// kernels, scratch buffers): about 30 ms on the shipped models, 20 times a short prompt's
// evaluation, whatever the prompt's length (a new length adds under 1 ms for its matrix-product
// primitives). aft-run pays it first on a scratch session, evaluating up to the prompt's first 16
// tokens (more than the 8 rows up to which matrix products take another path), and reports it
// apart, so that the prompt's figure is its evaluation alone.
constexpr std::size_t kSetUpTokens = 16;

double set_up(const aft_model* model, const aft_session_params& params, const int32_t* tokens,
              std::size_t count) {
  if (count == 0) return 0.0;
  const auto start = Clock::now();
  aft_session* raw = nullptr;
  check(aft_session_create(model, &params, &raw), "creating a session");
  const cli::Session scratch(raw);
  check(aft_session_eval(scratch.get(), tokens, std::min(count, kSetUpTokens), AFT_LOGITS_NONE,
                         nullptr),
        "evaluating the prompt");
  return ms_since(start);
}

struct PromptEvaluation {
  std::size_t cached = 0;  // tokens the prompt cache gave
  double set_up_ms = 0.0;
  double ms = 0.0;  // the evaluation, set-up excluded
};

// Evaluates the prompt for its last logits. With a prompt cache, first restores the longest
// cached prefix (all but the last token at most: the last one's logits are not cached) and
// afterwards caches the prompt but its last token.
PromptEvaluation evaluate_prompt(const Options& options, const aft_model* model,
                                 const aft_session_params& params, aft_session* session,
                                 const std::vector<int32_t>& tokens, std::vector<float>& logits) {
  PromptEvaluation result;
  const std::size_t n = tokens.size();
  std::size_t reused = 0;
  if (options.prompt_cache) {
    std::string why;
    if (const auto cache = cli::read_prefix_state_file(*options.prompt_cache, &why)) {
      const bool prefix = cache->tokens.size() < n &&
                          std::equal(cache->tokens.begin(), cache->tokens.end(), tokens.begin());
      if (!prefix)
        why = "its " + std::to_string(cache->tokens.size()) + " tokens do not start this prompt";
      try {
        if (prefix) {
          check(aft_session_state_load(session, cache->state.data(), cache->state.size()),
                "restoring its state");
          reused = cache->tokens.size();
        }
      } catch (const cli::ApiError& error) {
        why = error.what();
      }
    }
    if (reused == 0) {
      std::fprintf(stderr, "aft-run: --prompt-cache %s: not used: %s\n",
                   options.prompt_cache->c_str(), why.c_str());
    }
  }
  const bool write_cache = options.prompt_cache && n - 1 > reused;
  result.cached = reused;
  result.set_up_ms =
      set_up(model, params, tokens.data() + reused, write_cache ? n - 1 - reused : n - reused);
  const auto start = Clock::now();
  if (write_cache) {
    check(
        aft_session_eval(session, tokens.data() + reused, n - 1 - reused, AFT_LOGITS_NONE, nullptr),
        "evaluating the prompt");
    cli::PrefixState prefix;
    prefix.tokens.assign(tokens.begin(), tokens.end() - 1);
    prefix.state = cli::save_session_state(session);
    cli::write_prefix_state_file(*options.prompt_cache, prefix);
    check(aft_session_eval(session, &tokens[n - 1], 1, AFT_LOGITS_LAST, logits.data()),
          "evaluating the prompt");
  } else {
    check(aft_session_eval(session, tokens.data() + reused, n - reused, AFT_LOGITS_LAST,
                           logits.data()),
          "evaluating the prompt");
  }
  result.ms = ms_since(start);
  return result;
}

struct Generated {
  long long tokens = 0;
  double decode_ms = 0.0;  // the evaluations of the tokens after the first
};

// What generation needs of the model.
struct Limits {
  int64_t max_positions = 0;  // 0: none
  int32_t end_of_text = -1;   // -1: none
};

// Samples up to n tokens from `logits` on, printing each; stops early at the model's end of text
// (neither printed nor counted) or position limit. Leaves the last sampled token unevaluated:
// `pending` is set to it.
Generated generate(const Limits& limits, aft_session* session, aft_sampler* sampler,
                   TokenPrinter& printer, std::vector<float>& logits, long long n,
                   std::optional<int32_t>& pending) {
  Generated g;
  while (g.tokens < n) {
    int32_t token = 0;
    check(aft_sampler_sample(sampler, logits.data(), logits.size(), &token), "sampling");
    if (token == limits.end_of_text) {
      std::fputs("\naft-run: [end of text]\n", stderr);
      break;
    }
    printer.token(token);
    ++g.tokens;
    pending = token;
    if (g.tokens == n) break;
    if (limits.max_positions > 0 && aft_session_position(session) >= limits.max_positions) {
      std::fprintf(stderr, "\naft-run: stopped at the model's limit of %lld positions\n",
                   static_cast<long long>(limits.max_positions));
      break;
    }
    const auto step_start = Clock::now();
    check(aft_session_eval(session, &token, 1, AFT_LOGITS_LAST, logits.data()), "generating");
    pending.reset();
    g.decode_ms += ms_since(step_start);
  }
  return g;
}

// -i: each line of stdin (its newline included) continues the sequence, then -n tokens follow.
void interact(const Options& options, const aft_model* model, const Limits& limits,
              aft_session* session, aft_sampler* sampler, TokenPrinter& printer,
              std::vector<float>& logits, std::optional<int32_t> pending) {
  const bool terminal = isatty(fileno(stdin)) != 0;
  std::string line;
  for (;;) {
    if (terminal) std::fputs("\n> ", stderr);
    if (!std::getline(std::cin, line)) break;
    // The line's newline too, where the vocabulary has one; a line it cannot encode is skipped.
    std::vector<int32_t> turn;
    try {
      turn = tokenize(model, line + "\n", "the line");
      line += "\n";
    } catch (const cli::ApiError&) {
      try {
        turn = tokenize(model, line, "the line");
      } catch (const cli::ApiError& error) {
        std::fprintf(stderr, "aft-run: %s; skipped\n", error.what());
        continue;
      }
    }
    if (pending) turn.insert(turn.begin(), *pending);  // the last sampled token, not yet fed
    pending.reset();
    if (turn.empty()) continue;
    if (limits.max_positions > 0 &&
        aft_session_position(session) + static_cast<int64_t>(turn.size()) > limits.max_positions) {
      std::fprintf(stderr, "aft-run: the model's limit of %lld positions is reached\n",
                   static_cast<long long>(limits.max_positions));
      break;
    }
    for (int32_t token : turn) check(aft_sampler_accept(sampler, token), "recording the line");
    check(aft_session_eval(session, turn.data(), turn.size(), AFT_LOGITS_LAST, logits.data()),
          "evaluating the line");
    write_out(line.data(), line.size());
    generate(limits, session, sampler, printer, logits, options.n_predict, pending);
    printer.finish();
    write_out("\n", 1);
  }
}

int run(const Options& options) {
  const std::string prompt = options.prompt
                                 ? *options.prompt
                                 : cli::read_text_file(*options.prompt_file, "the prompt file");
  if (prompt.empty()) throw std::runtime_error("the prompt is empty: give at least one character");
  if (options.prompt_cache) cli::check_prefix_state_target(*options.prompt_cache);

  const auto load_start = Clock::now();
  const aft_model_params model_params = options.load.params();
  aft_model* raw_model = nullptr;
  check(aft_model_load(options.model.c_str(), &model_params, &raw_model), "loading the model");
  const cli::Model model(raw_model);
  const double load_ms = ms_since(load_start);
  aft_model_info info;
  check(aft_model_get_info(model.get(), &info), "reading the model");

  const std::vector<int32_t> tokens = tokenize(model.get(), prompt, "the prompt");

  aft_session_params session_params = aft_session_default_params();
  session_params.n_threads = static_cast<int32_t>(options.threads);
  aft_session* raw_session = nullptr;
  check(aft_session_create(model.get(), &session_params, &raw_session), "creating a session");
  const cli::Session session(raw_session);

  const uint64_t seed = options.seed ? *options.seed : std::random_device{}();
  const int32_t end_of_text = aft_model_end_of_text(model.get());
  const cli::Sampler sampler = create_sampler(options, seed, info.vocab_size, end_of_text);
  const Limits limits{info.max_positions, options.ignore_eos ? -1 : end_of_text};
  // The prompt counts among the recent tokens the penalties look at, as in llama.cpp.
  for (int32_t token : tokens)
    check(aft_sampler_accept(sampler.get(), token), "recording the prompt");

  const bool units = *aft_matrix_units() != '\0';
  const char* precision = options.load.matmul_precision != AFT_MATMUL_PRECISION_BF16 ? ""
                          : units ? " (f32 weights too: --matmul-precision bf16)"
                                  : " (--matmul-precision bf16 does nothing without them)";
  std::fprintf(stderr,
               "aft-run: %s model, %d layers x %d, %lld parameters, kernels %s, matrix units "
               "%s%s, seed %llu\n",
               info.mixer, info.n_layers, info.d_model, static_cast<long long>(info.n_parameters),
               aft_kernel_isa(), units ? aft_matrix_units() : "none", precision,
               static_cast<unsigned long long>(seed));

  std::vector<float> logits(static_cast<size_t>(info.vocab_size));
  const PromptEvaluation prompt_run =
      evaluate_prompt(options, model.get(), session_params, session.get(), tokens, logits);
  // Echoed once evaluated: a prompt the model refuses (past its positions) is not printed first.
  write_out(prompt.data(), prompt.size());

  TokenPrinter printer(model.get());
  std::optional<int32_t> pending;
  const Generated g =
      generate(limits, session.get(), sampler.get(), printer, logits, options.n_predict, pending);
  printer.finish();
  write_out("\n", 1);  // flushed: the text ends before the summary starts on a shared terminal

  const std::size_t evaluated = tokens.size() - prompt_run.cached;
  const long long decoded = g.tokens > 0 ? g.tokens - 1 : 0;
  std::fprintf(stderr,
               "aft-run: load %.1f ms | set-up %.1f ms | prompt %zu tokens (%zu from the prompt "
               "cache), %.1f ms, %.1f tokens/s | generated %lld tokens, decode %.1f ms, %.1f "
               "tokens/s\n",
               load_ms, prompt_run.set_up_ms, tokens.size(), prompt_run.cached, prompt_run.ms,
               evaluated * 1000.0 / prompt_run.ms, g.tokens, g.decode_ms,
               decoded > 0 ? decoded * 1000.0 / g.decode_ms : 0.0);
  if (options.interactive) {
    interact(options, model.get(), limits, session.get(), sampler.get(), printer, logits, pending);
  }
  if (options.verbose) report_state(session.get());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return aft::cli::tool_main(
      "aft-run", kUsage, [&] { return parse_args(argc, argv); }, run);
}
