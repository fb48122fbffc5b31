// aft-eval as a user meets it: its figures equal the PyTorch reference's on the fixture text
// (aft.eval_reference, python/aft/eval_reference.py, written by tests/fixtures/make_fixtures.py
// into eval_text.measures.json) for windowed and one-stream models, byte and char tokenizers; a
// model against itself diverges by 0; bad files and command lines are refused with clear messages.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace aft::testing {
namespace {

using Result = CommandResult;
using nlohmann::json;

constexpr double kBitsTolerance = 1e-4;  // the engine's float32 logits vs the float64 reference

std::string fixture_path(const std::string& file) {
  return std::string(AFT_FIXTURES_DIR) + "/" + file;
}
std::string model(const std::string& name) { return shell_quote(fixture_path(name + ".aft")); }
std::string text() { return shell_quote(fixture_path("eval_text.txt")); }

Result run(const std::string& args) { return run_command(AFT_EVAL_PATH, args); }

json expected() {
  std::ifstream in(fixture_path("eval_text.measures.json"));
  return json::parse(in);
}

json run_json(const std::string& args) {
  const Result r = run(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "stderr is not a terminal: no progress line";
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

// A file holding text, removed at the end of the test.
class TextFile {
 public:
  explicit TextFile(const std::string& content) : file_("text") {
    std::ofstream(file_.path(), std::ios::binary) << content;
  }
  std::string arg() const { return shell_quote(file_.path()); }
  const std::string& path() const { return file_.path(); }

 private:
  TempFile file_;
};

TEST(AftEval, MatchesTheReferenceForEveryWindowing) {
  const json all = expected();
  for (const char* name : {"local_learned_char", "local", "conv_sinusoidal_gelu", "simple"}) {
    SCOPED_TRACE(name);
    const json& want = all.at(name);
    const json got = run_json(model(name) + " " + text() + " -t 1");
    EXPECT_NEAR(got["bits_per_char"].get<double>(), want["bits_per_char"].get<double>(),
                kBitsTolerance);
    EXPECT_EQ(got["tokens"], want["tokens"]);
    EXPECT_EQ(got["characters"], want["characters"]);
    EXPECT_EQ(got["window"], want["window"]);
    EXPECT_EQ(got["windows"], want["windows"]);
    // One character per token for both tokenizers: the two figures agree.
    EXPECT_DOUBLE_EQ(got["bits_per_token"].get<double>(), got["bits_per_char"].get<double>());
    EXPECT_NEAR(got["perplexity"].get<double>(), std::exp2(got["bits_per_token"].get<double>()),
                1e-9 * got["perplexity"].get<double>());
    EXPECT_GT(got["tokens_per_s"].get<double>(), 0.0);
    EXPECT_FALSE(got.contains("kld_mean"));
  }
}

// Every character but the first is scored: bytes for a byte model, code points for a char model
// (the fixture text has characters of 2, 3 and 4 bytes).
TEST(AftEval, CountsBytesOrCodePoints) {
  std::ifstream in(fixture_path("eval_text.txt"), std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  long long code_points = 0;
  for (const char c : content) code_points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  ASSERT_LT(code_points, static_cast<long long>(content.size()));
  EXPECT_EQ(run_json(model("simple") + " " + text())["characters"].get<long long>(),
            static_cast<long long>(content.size()) - 1);
  EXPECT_EQ(run_json(model("conv_sinusoidal_gelu") + " " + text())["characters"].get<long long>(),
            code_points - 1);
}

// A token of many characters (World and BPE vocabularies): each of its code points counts once.
TEST(AftEval, CountsTheCharactersOfLongTokens) {
  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 4;
  const std::string long_token = "abcdefghijklmnopqrstuvwx";  // 24 bytes, past any small buffer
  std::string hex;
  for (const unsigned char c : long_token) {
    hex += "0123456789abcdef"[c >> 4];
    hex += "0123456789abcdef"[c & 15];
  }
  const json tokenizer = {{"type", "world"}, {"vocab", {nullptr, "61", hex, "c3a9"}}};
  TempFile world;
  write_model_file(world.path(), config, tokenizer, random_tensors(config, 3, 0.5f));
  const TextFile file("a" + long_token +
                      "\xc3\xa9"
                      "a" +
                      long_token);
  const json got = run_json(shell_quote(world.path()) + " " + file.arg() + " -t 1");
  EXPECT_EQ(got["tokens"], 4);  // a | the long token | é | a | the long token: all but the first
  EXPECT_EQ(got["characters"], 24 + 1 + 1 + 24);
  EXPECT_NEAR(got["bits_per_token"].get<double>() * 4,
              got["bits_per_char"].get<double>() * (24 + 1 + 1 + 24), 1e-9);
}

TEST(AftEval, DivergenceFromAReferenceMatchesPyTorch) {
  const json want = expected().at("pair");
  const json got = run_json(model(want["model"]) + " " + text() + " --reference " +
                            model(want["reference"]) + " -t 1");
  EXPECT_EQ(got["window"], want["window"]);
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_NEAR(got["bits_per_char"].get<double>(), want["bits_per_char"].get<double>(),
              kBitsTolerance);
  EXPECT_NEAR(got["kld_mean"].get<double>(), want["kld_mean"].get<double>(), 1e-4);
  EXPECT_NEAR(got["kld_max"].get<double>(), want["kld_max"].get<double>(), 1e-3);
  EXPECT_NEAR(got["top1_agreement"].get<double>(), want["top1_agreement"].get<double>(), 1e-9);
  EXPECT_GT(got["kld_mean"].get<double>(), 0.0);
  EXPECT_LT(got["top1_agreement"].get<double>(), 1.0);
}

TEST(AftEval, AModelAgainstItselfDivergesByNothing) {
  for (const char* name : {"local", "conv_sinusoidal_gelu"}) {
    SCOPED_TRACE(name);
    const json alone = run_json(model(name) + " " + text() + " -t 1");
    const json got = run_json(model(name) + " " + text() + " --reference " + model(name));
    EXPECT_EQ(got["kld_mean"].get<double>(), 0.0);
    EXPECT_EQ(got["kld_max"].get<double>(), 0.0);
    EXPECT_EQ(got["top1_agreement"].get<double>(), 1.0);
    EXPECT_EQ(got["bits_per_char"], alone["bits_per_char"]) << "thread counts give the same bits";
  }
}

// --matmul-precision bf16 against the same model at f32: on matrix units a small divergence (the
// weights and the products' inputs rounded to bf16), far under issue 24's 1e-3; without units
// the same model exactly.
TEST(AftEval, Bf16MatmulPrecisionDivergesByTheRoundingOnly) {
  const json got = run_json(model("conv") + " " + text() + " --reference " + model("conv") +
                            " --matmul-precision bf16 -t 2");
  const json exact = run_json(model("conv") + " " + text() + " -t 1");
  if (kernels::matrix_units().empty()) {
    EXPECT_EQ(got["kld_mean"].get<double>(), 0.0);
    EXPECT_EQ(got["bits_per_char"], exact["bits_per_char"]);
    GTEST_SKIP() << "skipped: no matrix units taken (no AMX/AVX512-BF16, Intel's AVX512-BF16 "
                    "unless AFT_MATRIX_UNITS=on, or =off); bf16 "
                    "precision was exact f32, as it should be there";
  }
  EXPECT_GT(got["kld_mean"].get<double>(), 0.0);
  EXPECT_LT(got["kld_mean"].get<double>(), 1e-3);
  EXPECT_GT(got["top1_agreement"].get<double>(), 0.98);
  EXPECT_NEAR(got["bits_per_char"].get<double>(), exact["bits_per_char"].get<double>(), 0.01);
}

// --decode feeds one token per call: the same figures as the prompt chunks, within float rounding,
// for f32 weights and for q8_0 ones, whose products round their inputs to 8-bit blocks on both
// paths (a prompt's rows get the bits they get decoded alone); against the f32 model, that
// rounding shows. Where q8_0 prompts take the bf16 tiles (KernelTable::gemv_prompt_q8_0_bf16),
// their rows are rounded to bf16 instead, finer than 8-bit blocks: nearer the f32 model.
TEST(AftEval, DecodeFeedsOneTokenPerCall) {
  const json all = expected();
  for (const char* name : {"local", "simple"}) {
    SCOPED_TRACE(name);
    const json got = run_json(model(name) + " " + text() + " --decode -t 1");
    EXPECT_EQ(got["decode"], true);
    EXPECT_EQ(got["tokens"], all.at(name)["tokens"]);
    EXPECT_NEAR(got["bits_per_char"].get<double>(), all.at(name)["bits_per_char"].get<double>(),
                kBitsTolerance);
  }
  const json chunks =
      run_json(model("local_q8_0") + " " + text() + " --reference " + model("local"));
  const json tokens =
      run_json(model("local_q8_0") + " " + text() + " --reference " + model("local") + " --decode");
  EXPECT_EQ(chunks["decode"], false);
  EXPECT_EQ(tokens["decode"], true);
  EXPECT_EQ(tokens["tokens"], chunks["tokens"]);
  if (kernels::active_kernels().gemv_prompt_q8_0_bf16 != nullptr &&
      !kernels::matrix_units().empty()) {
    EXPECT_NEAR(tokens["bits_per_char"].get<double>(), chunks["bits_per_char"].get<double>(), 1e-3);
    EXPECT_GT(chunks["kld_mean"].get<double>(), 0.0);
    EXPECT_LT(chunks["kld_mean"].get<double>(), tokens["kld_mean"].get<double>());
  } else {
    EXPECT_NEAR(tokens["bits_per_char"].get<double>(), chunks["bits_per_char"].get<double>(),
                kBitsTolerance);
    EXPECT_NEAR(tokens["kld_mean"].get<double>(), chunks["kld_mean"].get<double>(), 1e-6);
  }
  EXPECT_GT(tokens["kld_mean"].get<double>(), 0.0);
  EXPECT_LT(tokens["kld_mean"].get<double>(), 0.01);
}

// A windowed model caps the windows of a one-stream reference; --window forces windows.
TEST(AftEval, WindowsOfTheShorterModelOrForced) {
  const json both = run_json(model("conv_sinusoidal_gelu") + " " + text() + " --reference " +
                             model("local_learned_char"));
  EXPECT_EQ(both["window"], 64);
  EXPECT_EQ(both["windows"], 10);
  const json forced = run_json(model("conv_sinusoidal_gelu") + " " + text() + " --window 100");
  EXPECT_EQ(forced["window"], 100);
  EXPECT_EQ(forced["windows"], 7);  // 611 scored tokens
  EXPECT_EQ(forced["tokens"], 611);
  const json stream = run_json(model("conv_sinusoidal_gelu") + " " + text());
  EXPECT_NE(forced["bits_per_char"], stream["bits_per_char"]) << "shorter contexts";

  const Result too_long = run(model("local") + " " + text() + " --window 65");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("--window 65"), std::string::npos) << too_long.err;
  EXPECT_NE(too_long.err.find("64 positions"), std::string::npos) << too_long.err;
}

TEST(AftEval, PrintsATable) {
  const Result r = run(model("simple") + " " + text() + " --reference " + model("conv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row :
       {"| bits per byte |", "| bits per token |", "| perplexity |", "| windows | one stream |",
        "| KL divergence, mean (nats) |", "| top-1 agreement |", "| tokens/s |"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
}

void expect_error(const Result& r, const std::string& named, const std::string& why) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
}

TEST(AftEval, RefusesBadFiles) {
  const TextFile empty("");
  expect_error(run(model("simple") + " " + empty.arg()), empty.path(), "empty");
  const TextFile one_token("a");
  expect_error(run(model("simple") + " " + one_token.arg()), one_token.path(), "at least two");
  expect_error(run(model("simple") + " no-such-text.txt"), "no-such-text.txt", "cannot open");
  const std::string directory = std::filesystem::temp_directory_path().string();
  expect_error(run(model("simple") + " " + shell_quote(directory)), directory,
               "is a directory, not the text file");
  expect_error(run(shell_quote("no-such-model.aft") + " " + text()), "no-such-model.aft",
               "loading the model");

  const TextFile outside("the Jury");  // no capital letters in the char fixtures' vocabulary
  expect_error(run(model("local_learned_char") + " " + outside.arg()), outside.path(), "tokeniz");
  const Result mismatched =
      run(model("local_learned_char") + " " + text() + " --reference " + model("simple"));
  expect_error(mismatched, "local_learned_char.aft and ", "different vocabularies");
  EXPECT_NE(mismatched.err.find("simple.aft"), std::string::npos) << mismatched.err;
}

TEST(AftEval, RefusesBadUsage) {
  for (const std::string& args :
       {std::string(""), model("simple"), model("simple") + " " + text() + " extra",
        model("simple") + " " + text() + " --window 0",
        model("simple") + " " + text() + " --threads many",
        model("simple") + " " + text() + " --reference", model("simple") + " " + text() + " -x",
        model("simple") + " " + text() + " --matmul-precision f16"}) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("usage: aft-eval"), std::string::npos) << r.err;
  }
  EXPECT_NE(run(model("simple") + " " + text() + " --window 0").err.find("--window"),
            std::string::npos);
  const Result help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("KL(P_reference || P_model)"), std::string::npos);
}

}  // namespace
}  // namespace aft::testing
