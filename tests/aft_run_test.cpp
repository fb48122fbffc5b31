// aft-run as a user meets it: text on stdout, exit codes, clear messages for bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/format/utf8.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace aft::testing {
namespace {

using Result = CommandResult;

std::string quote(const std::string& s) { return shell_quote(s); }

Result run(const std::string& args) { return run_command(AFT_RUN_PATH, args); }

class AftRun : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json config = tiny_config("local");
    config["vocab_size"] = 4;
    write_model_file(model_.path(), config, char_tokenizer({"a", "b", "c", " "}),
                     random_tensors(config, 5, 0.5f));
  }
  std::string model() const { return quote(model_.path()); }
  TempFile model_;
};

TEST_F(AftRun, GeneratesAfterThePrompt) {
  const Result r = run(model() + " --prompt 'abc ab' -n 20 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 6u + 20u + 1u) << r.out;  // prompt, 20 one-byte tokens, newline
  EXPECT_EQ(r.out.substr(0, 6), "abc ab");
  EXPECT_EQ(r.out.find_first_not_of("abc \n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// The summary's set-up: a process's first evaluation, paid on a scratch sequence and reported
// apart from the prompt's, short or long.
double set_up_ms(const std::string& summary) {
  const size_t at = summary.find("| set-up ");
  return at == std::string::npos ? -1.0 : std::atof(summary.c_str() + at + 9);
}

TEST_F(AftRun, SummaryTellsSetUpApartFromThePrompt) {
  const Result short_prompt = run(model() + " --prompt 'abc ab' -n 2 --seed 3");
  ASSERT_EQ(short_prompt.exit_code, 0) << short_prompt.err;
  EXPECT_GT(set_up_ms(short_prompt.err), 0.0) << short_prompt.err;
  TempFile unlimited;  // the fixture's model stops at 64 positions
  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 4;
  write_model_file(unlimited.path(), config, char_tokenizer({"a", "b", "c", " "}),
                   random_tensors(config, 5, 0.5f));
  const Result long_prompt =
      run(quote(unlimited.path()) + " --prompt '" + std::string(300, 'a') + "' -n 2");
  ASSERT_EQ(long_prompt.exit_code, 0) << long_prompt.err;
  EXPECT_GT(set_up_ms(long_prompt.err), 0.0) << long_prompt.err;
  EXPECT_NE(long_prompt.err.find("prompt 300 tokens"), std::string::npos) << long_prompt.err;
}

TEST_F(AftRun, SameSeedSameTextWhateverTheThreads) {
  const Result one = run(model() + " -p abc -n 30 -s 11 -t 1 --temp 1.5");
  const Result two = run(model() + " -p abc -n 30 -s 11 -t 2 --temp 1.5");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, two.out);
}

// --no-mmap is still accepted (it no longer changes anything): the same text.
TEST_F(AftRun, NoMmapGivesTheSameText) {
  const Result mapped = run(model() + " -p abc -n 30 -s 11 --temp 1.5");
  const Result copied = run(model() + " -p abc -n 30 -s 11 --temp 1.5 --no-mmap");
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_EQ(mapped.out, copied.out);
}

// The state after a prompt is kept in the file; a run whose prompt starts with the same tokens
// restores it and evaluates only the rest, with the text of a run without it. A file that is no
// cache, of another prompt or of another model is said not to be used, and the run goes on.
TEST_F(AftRun, PromptCacheReusesTheStateWithTheSameText) {
  TempFile cache;
  std::remove(cache.path().c_str());
  const std::string with_cache = " --prompt-cache " + quote(cache.path());
  const Result plain = run(model() + " --prompt 'abc ab' -n 20 --seed 3");
  const Result first = run(model() + " --prompt 'abc ab' -n 20 --seed 3" + with_cache);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("not used: no such file"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("prompt 6 tokens (0 from the prompt cache)"), std::string::npos);
  const Result second = run(model() + " --prompt 'abc ab' -n 20 --seed 3" + with_cache);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("prompt 6 tokens (5 from the prompt cache)"), std::string::npos)
      << second.err;
  EXPECT_EQ(second.out, plain.out);
  EXPECT_EQ(first.out, plain.out);

  const Result longer = run(model() + " --prompt 'abc abc' -n 20 --seed 3" + with_cache);
  EXPECT_NE(longer.err.find("prompt 7 tokens (5 from the prompt cache)"), std::string::npos)
      << longer.err;
  EXPECT_EQ(longer.out, run(model() + " --prompt 'abc abc' -n 20 --seed 3").out);

  const Result other = run(model() + " --prompt 'cab' -n 5 --seed 3" + with_cache);
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.err.find("not used: its 6 tokens do not start this prompt"), std::string::npos)
      << other.err;

  // Another model with the same vocabulary: its state is refused by the model's fingerprint.
  run(model() + " --prompt 'abc ab' -n 1 --seed 3" + with_cache);
  TempFile other_model;
  nlohmann::json config = tiny_config("local");
  config["vocab_size"] = 4;
  write_model_file(other_model.path(), config, char_tokenizer({"a", "b", "c", " "}),
                   random_tensors(config, 6, 0.5f));
  const Result refused =
      run(quote(other_model.path()) + " --prompt 'abc ab' -n 5 --seed 3" + with_cache);
  ASSERT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_NE(refused.err.find("not used: restoring its state: "), std::string::npos) << refused.err;

  // A record cut short is not used, and written again.
  std::ofstream(cache.path(), std::ios::trunc) << "AFTPREFX";
  const Result cut = run(model() + " --prompt 'abc ab' -n 5 --seed 3" + with_cache);
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_NE(cut.err.find("not used: prefix state version 0"), std::string::npos) << cut.err;
  EXPECT_NE(run(model() + " --prompt 'abc ab' -n 5 --seed 3" + with_cache)
                .err.find("(5 from the prompt cache)"),
            std::string::npos);
}

// The cache's path names another file (the model, the prompt) or no regular file: refused before
// anything runs, the file untouched.
TEST_F(AftRun, PromptCacheNeverWritesOverAnotherFile) {
  TempFile prompt("prompt");
  std::ofstream(prompt.path()) << "abc ab";
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  };
  for (const std::string& target : {model_.path(), prompt.path()}) {
    const std::string before = bytes(target);
    const Result r =
        run(model() + " -f " + quote(prompt.path()) + " -n 5 --prompt-cache " + quote(target));
    EXPECT_EQ(r.exit_code, 1) << target;
    EXPECT_NE(r.err.find(target + ": exists and is not a prefix state of aft"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(bytes(target), before) << target;
  }
  const std::string dir = std::filesystem::temp_directory_path().string();
  const Result directory = run(model() + " -p abc -n 5 --prompt-cache " + quote(dir));
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_NE(directory.err.find(dir + ": not a regular file"), std::string::npos) << directory.err;
  const Result device = run(model() + " -p abc -n 5 --prompt-cache /dev/null");
  EXPECT_EQ(device.exit_code, 1);
  EXPECT_NE(device.err.find("/dev/null: not a regular file"), std::string::npos) << device.err;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

// -i: each line of stdin joins the sequence (its newline too, where the vocabulary has one; a
// line it cannot encode is skipped with a message) and is continued.
TEST_F(AftRun, InteractiveLinesContinueTheSequence) {
  TempFile with_newline;
  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 5;
  write_model_file(with_newline.path(), config, char_tokenizer({"a", "b", "c", " ", "\n"}),
                   random_tensors(config, 5, 0.5f));
  TempFile lines;
  std::ofstream(lines.path()) << "ab\nxyz\nc a\n";
  const std::string args = quote(with_newline.path()) + " --prompt 'abc' -n 4 --seed 3 --temp 0" +
                           " --logit-bias 4-inf -i < " + quote(lines.path());
  const Result r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The prompt and 4 tokens and a newline, then each line with its newline, 4 tokens, a newline.
  ASSERT_EQ(r.out.size(), (3u + 4 + 1) + (3 + 4 + 1) + (4 + 4 + 1)) << r.out;
  EXPECT_EQ(r.out.substr(0, 3), "abc");
  EXPECT_EQ(r.out.substr(8, 3), "ab\n");
  EXPECT_EQ(r.out.substr(16, 4), "c a\n");
  EXPECT_NE(r.err.find("character 'x' (U+0078) at byte 0 is not in the model's vocabulary"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("; skipped"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, run(args).out);  // the same seed, the same text
}

// A line that ends at the model's last position is taken; one past it ends the session.
TEST_F(AftRun, InteractiveLineUpToTheLastPosition) {
  // max_seq_len 64: a prompt of 58, one token sampled (not yet fed), then a line of 5 characters
  // (no newline in the vocabulary): 58 + 1 + 5 = 64 positions.
  const std::string prompt = quote(std::string(58, 'a'));
  TempFile lines;
  std::ofstream(lines.path()) << "abcab\n";
  const Result r = run(model() + " -p " + prompt + " -n 1 --temp 0 -i < " + quote(lines.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("limit of 64 positions is reached"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("abcab"), std::string::npos) << r.out;
  std::ofstream(lines.path(), std::ios::trunc) << "abcabc\n";
  const Result past = run(model() + " -p " + prompt + " -n 1 --temp 0 -i < " + quote(lines.path()));
  ASSERT_EQ(past.exit_code, 0) << past.err;
  EXPECT_NE(past.err.find("limit of 64 positions is reached"), std::string::npos) << past.err;
}

TEST_F(AftRun, PromptFromAFile) {
  TempFile prompt("prompt");
  std::ofstream(prompt.path()) << "ba";
  const Result r = run(model() + " -f " + quote(prompt.path()) + " -n 2 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 2), "ba");
}

// A World vocabulary whose tokens are parts of characters: whatever the model samples, the output
// is whole characters (a split character held until complete, the rest as U+FFFD).
TEST(AftRunWorld, PrintsOnlyWholeCharacters) {
  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 6;
  const nlohmann::json tokenizer = {{"type", "world"},
                                    {"vocab", {nullptr, "61", "e4b8", "ad", "e4", "b8"}}};
  TempFile model;
  write_model_file(model.path(), config, tokenizer, random_tensors(config, 9, 2.0f));
  for (const char* seed : {"1", "2", "3"}) {
    const Result r = run(quote(model.path()) + " -p a -n 60 --temp 2 -s " + seed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (std::size_t pos = 0; pos < r.out.size();) {
      const aft::DecodedChar c = aft::decode_utf8(r.out, pos);
      ASSERT_GT(c.length, 0u) << "invalid UTF-8 at byte " << pos << " of the output";
      pos += c.length;
    }
    EXPECT_EQ(r.out.back(), '\n');
  }
}

// "." (4) ends the text: generation stops there without printing it, unless --ignore-eos.
class AftRunEndOfText : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json config = tiny_config("local");
    config["vocab_size"] = 5;
    nlohmann::json tokenizer = char_tokenizer({"a", "b", "c", " ", "."});
    tokenizer["end_of_text"] = 4;
    write_model_file(model_.path(), config, tokenizer, random_tensors(config, 5, 0.5f));
  }
  std::string model() const { return quote(model_.path()); }
  TempFile model_;
};

TEST_F(AftRunEndOfText, StopsThereUnprinted) {
  const Result first = run(model() + " -p ab -n 20 --temp 0 -l 4+100");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "ab\n");
  EXPECT_NE(first.err.find("[end of text]"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("generated 0 tokens"), std::string::npos) << first.err;

  int ended = 0;
  for (const char* seed : {"1", "2", "3", "4"}) {
    const Result r = run(model() + " -p ab -n 300 --temp 1 -l 4+1 -s " + seed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('.'), std::string::npos) << r.out;
    const std::string generated =
        "generated " + std::to_string(r.out.size() - 3) + " tokens";  // less "ab" and "\n"
    EXPECT_NE(r.err.find(generated), std::string::npos) << r.err << "\nlacks: " << generated;
    if (r.err.find("[end of text]") != std::string::npos) {
      ++ended;
      EXPECT_LT(r.out.size(), 3u + 300u);
    }
  }
  EXPECT_GT(ended, 0) << "a likely end of text never came";
}

TEST_F(AftRunEndOfText, IgnoreEosGoesOnWithoutIt) {
  const Result r = run(model() + " -p ab -n 20 --temp 0 -l 4+100 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 2u + 20u + 1u) << r.out;
  EXPECT_EQ(r.out.find('.'), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("[end of text]"), std::string::npos) << r.err;
}

TEST_F(AftRun, StopsAtTheModelsPositionLimit) {
  const Result r = run(model() + " -p abc -n 100 --temp 0");  // max_seq_len 64
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 64 positions hold the prompt and 61 generated tokens; the 62nd is sampled from the last
  // position's logits and needs no position of its own.
  EXPECT_EQ(r.out.size(), 3u + 62u + 1u);
  EXPECT_NE(r.err.find("limit of 64 positions"), std::string::npos) << r.err;
}

TEST_F(AftRun, UsageErrorsExitWithTwo) {
  for (const std::string& args :
       {std::string(""), model(), model() + " -p a --temp abc", model() + " -p a -n -3",
        model() + " -p a --top-p 2", model() + " -p a --bogus", model() + " -p a -t",
        model() + " -p a -f x", model() + " -p a -s ' 5'", model() + " -p a --temp ' 1'",
        model() + " -p a --matmul-precision f16", model() + " -p a --matmul-precision"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("usage: aft-run"), std::string::npos) << args;
  }
  EXPECT_NE(run(model() + " -p a --temp abc").err.find("--temp: expected a number"),
            std::string::npos);
  EXPECT_NE(run(model() + " -p a --matmul-precision f16")
                .err.find("--matmul-precision: \"f16\" is not a precision (f32 or bf16)"),
            std::string::npos);
}

// The fixture's vocabulary: token ids of "a", "b", "c", " ".
const std::string kVocabulary = "abc ";

// The text generated after a prompt of n_prompt characters (one character per token).
std::string generated(const Result& r, std::size_t n_prompt) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(r.out.size(), n_prompt + 1) << r.out;
  return r.out.substr(n_prompt, r.out.size() - n_prompt - 1);  // without the final newline
}

TEST_F(AftRun, LogitBiasBansOrForcesTokens) {
  const std::string greedy = generated(run(model() + " -p abc -n 20 --temp 0"), 3);
  ASSERT_EQ(greedy.size(), 20u);
  const std::size_t first = kVocabulary.find(greedy[0]);
  const std::string ban = std::to_string(first) + "-inf";
  const std::string banned = generated(run(model() + " -p abc -n 20 --temp 0 -l " + ban), 3);
  EXPECT_EQ(banned.find(greedy[0]), std::string::npos) << banned;
  EXPECT_NE(banned, greedy);

  // Two flags, the long and the short name; at temperature 1.5 every other token is out of reach.
  const std::string forced =
      generated(run(model() + " -p abc -n 20 --temp 1.5 -s 4 --logit-bias 2+100 -l 1-3"), 3);
  EXPECT_EQ(forced, std::string(20, 'c'));
}

// A presence penalty of 100 outweighs any difference between this model's logits, so every token
// among the recent ones loses to any other.
TEST_F(AftRun, PenaltiesSteerAwayFromTheRecentTokensThePromptIncluded) {
  const std::string penalise_all = " --temp 0 --repeat-last-n -1 --presence-penalty 100";
  // The prompt holds a, b and c, and the greedy choice is c: with the penalty only the space can
  // follow.
  EXPECT_EQ(generated(run(model() + " -p bcaaaa -n 1 --temp 0"), 6), "c");
  EXPECT_EQ(generated(run(model() + " -p bcaaaa -n 1" + penalise_all), 6), " ");
  // With a window of one token no token follows itself, the prompt's last included (the greedy
  // text has runs of spaces).
  const std::string alternating = generated(
      run(model() + " -p aaaa -n 40 --temp 0 --repeat-last-n 1 --presence-penalty 100"), 4);
  ASSERT_EQ(alternating.size(), 40u);
  EXPECT_NE(alternating[0], 'a');
  for (std::size_t i = 1; i < alternating.size(); ++i) {
    EXPECT_NE(alternating[i], alternating[i - 1]) << alternating;
  }
  // --repeat-last-n 0 turns the penalties off: the greedy text.
  EXPECT_EQ(run(model() + " -p aaaa -n 40 --temp 0 --repeat-last-n 0 --presence-penalty 100").out,
            run(model() + " -p aaaa -n 40 --temp 0").out);
}

// The shipped model, greedy, keeps a repeated phrase going ("... of the state of the state" goes on
// with " of the" again and again); a repeat penalty of 1.5 (over the last 64 tokens, the prompt's
// included) steers away from the prompt's words at once.
TEST(AftRunShippedModel, RepeatPenaltyBreaksARepetitionLoop) {
  const std::string prompt = "the state of the state of the state of the state";
  const std::string args = quote(AFT_SHIPPED_MODEL) + " -p '" + prompt + "' -n 52 --temp 0";
  auto repeats = [](const std::string& text) {
    std::size_t count = 0;
    for (std::size_t at = text.find(" of the"); at != std::string::npos;
         at = text.find(" of the", at + 1)) {
      ++count;
    }
    return count;
  };
  const std::string greedy = generated(run(args), prompt.size());
  EXPECT_GE(repeats(greedy), 2u) << greedy;
  const std::string penalised = generated(run(args + " --repeat-penalty 1.5"), prompt.size());
  ASSERT_EQ(penalised.size(), 52u);
  EXPECT_LT(repeats(penalised), repeats(greedy)) << penalised;
  EXPECT_NE(penalised.substr(0, 10), greedy.substr(0, 10)) << penalised;
  EXPECT_EQ(generated(run(args + " --repeat-penalty 1"), prompt.size()), greedy) << "1 = off";
}

TEST_F(AftRun, BadSamplingValuesAreUsageErrorsNamingTheFlag) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"--min-p 1.5", "--min-p: expected a number in [0, 1]"},
      {"--min-p -0.1", "--min-p:"},
      {"--repeat-penalty 0", "--repeat-penalty: expected a number"},
      {"--repeat-penalty nan", "--repeat-penalty:"},
      {"--repeat-last-n -2", "--repeat-last-n: expected an integer in [-1, "},
      {"--repeat-last-n 1.5", "--repeat-last-n:"},
      {"--frequency-penalty abc", "--frequency-penalty: expected a number"},
      {"--presence-penalty inf", "--presence-penalty:"},
      {"--logit-bias 5", "--logit-bias: expected TOKEN_ID+BIAS or TOKEN_ID-BIAS"},
      {"--logit-bias +5", "--logit-bias:"},
      {"--logit-bias x+1", "--logit-bias:"},
      {"--logit-bias 1+", "a number for the bias"},
      {"--logit-bias 1+2x", "a number for the bias"},
      {"--logit-bias 1+nan", "a number for the bias"},
      {"--logit-bias '1+ 1'", "a number for the bias"},
      {"--logit-bias 1+-1", "a number for the bias"},
      {"-l 1+inf", "-l: expected TOKEN_ID+BIAS"},
      {"-l 99999999999+1", "a token id up to 2147483647"},
      {"-l", "-l: missing value"},
  };
  for (const auto& c : cases) {
    const Result r = run(model() + " -p a " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find("usage: aft-run"), std::string::npos) << c.args;
  }
}

TEST_F(AftRun, LogitBiasOutsideTheVocabularyIsAnError) {
  const Result r = run(model() + " -p a -l 4+1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--logit-bias: token 4 is outside the model's vocabulary of 4 tokens"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "") << "nothing is printed before the options are known to fit the model";
}

TEST_F(AftRun, HelpExitsWithZero) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--top-p", "--min-p P", "--repeat-penalty F", "--repeat-last-n N",
                           "--frequency-penalty F", "--presence-penalty F", "-l, --logit-bias"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// Output that cannot be written stops the run with an error: a full disk, and a reader gone while
// SIGPIPE is ignored (which would otherwise let it generate every token into the void).
TEST_F(AftRun, OutputErrorsExitWithOne) {
  const Result full = run(model() + " -p abc -n 100 > /dev/full");
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_NE(full.err.find("writing the output: No space left on device"), std::string::npos)
      << full.err;

  // AFT-simple has no position limit: without the error it would write all 10^6 tokens.
  TempFile unlimited("simple");
  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 4;
  write_model_file(unlimited.path(), config, char_tokenizer({"a", "b", "c", " "}),
                   random_tensors(config, 5, 0.5f));
  const std::string pipeline = "trap '' PIPE; " + quote(AFT_RUN_PATH) + " " +
                               quote(unlimited.path()) +
                               " -p abc -n 1000000 --temp 0 | head -c 10 > /dev/null; "
                               "exit ${PIPESTATUS[0]}";
  const Result closed = run_command("bash", "-c " + quote(pipeline));
  EXPECT_EQ(closed.exit_code, 1);
  EXPECT_NE(closed.err.find("writing the output"), std::string::npos) << closed.err;
  EXPECT_EQ(closed.err.find("generated 1000000"), std::string::npos) << closed.err;
}

// A prompt past the model's positions is refused before anything is printed.
TEST_F(AftRun, ARefusedPromptIsNotEchoed) {
  const Result r = run(model() + " -p " + quote(std::string(100, 'a')));  // max_seq_len 64
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("position"), std::string::npos) << r.err;
}

TEST_F(AftRun, RuntimeErrorsExitWithOneAndSayWhy) {
  const Result missing = run("no-such-model.aft -p a");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no-such-model.aft"), std::string::npos) << missing.err;

  const Result empty = run(model() + " -p ''");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("prompt is empty"), std::string::npos) << empty.err;

  const Result outside = run(model() + " -p abz");
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_NE(outside.err.find("U+007A"), std::string::npos) << outside.err;
  EXPECT_EQ(outside.out, "") << "nothing is printed before the prompt is known to be valid";

  const std::string dir = std::filesystem::temp_directory_path().string();
  const Result directory = run(model() + " -f " + quote(dir));
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_NE(directory.err.find(dir + ": is a directory"), std::string::npos) << directory.err;

  const Result no_file = run(model() + " -f no-such-prompt.txt");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_NE(no_file.err.find("no-such-prompt.txt"), std::string::npos) << no_file.err;
}

}  // namespace
}  // namespace aft::testing
