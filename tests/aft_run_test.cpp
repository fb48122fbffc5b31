// aft-run as a user meets it: text on stdout, exit codes, clear messages for bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

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

TEST_F(AftRun, SameSeedSameTextWhateverTheThreads) {
  const Result one = run(model() + " -p abc -n 30 -s 11 -t 1 --temp 1.5");
  const Result two = run(model() + " -p abc -n 30 -s 11 -t 2 --temp 1.5");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, two.out);
}

TEST_F(AftRun, PromptFromAFile) {
  TempFile prompt("prompt");
  std::ofstream(prompt.path()) << "ba";
  const Result r = run(model() + " -f " + quote(prompt.path()) + " -n 2 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 2), "ba");
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
        model() + " -p a -f x"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("usage: aft-run"), std::string::npos) << args;
  }
  EXPECT_NE(run(model() + " -p a --temp abc").err.find("--temp: expected a number"),
            std::string::npos);
}

TEST_F(AftRun, HelpExitsWithZero) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--top-p"), std::string::npos);
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

  const Result no_file = run(model() + " -f no-such-prompt.txt");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_NE(no_file.err.find("no-such-prompt.txt"), std::string::npos) << no_file.err;
}

}  // namespace
}  // namespace aft::testing
