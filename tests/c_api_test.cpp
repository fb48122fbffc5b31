// The C API's surface: NULL and bad arguments give a status and a message (never a crash), the
// tokenizer functions' buffer protocol, model info (the sampler: sampler_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"

namespace aft::testing {
namespace {

std::string last_error() { return aft_last_error(); }

TEST(CApi, NullArgumentsAreRejected) {
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load(nullptr, nullptr, &model), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("path is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(aft_model_load("x.aft", nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
  aft_model_info info;
  EXPECT_EQ(aft_model_get_info(nullptr, &info), AFT_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  EXPECT_EQ(aft_tokenize(nullptr, "a", 1, nullptr, 0, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_token_to_text(nullptr, 0, nullptr, 0, &n), AFT_ERR_INVALID_ARGUMENT);
  aft_session* session = nullptr;
  EXPECT_EQ(aft_session_create(nullptr, nullptr, &session), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session, nullptr);
  EXPECT_EQ(aft_session_reset(nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_position(nullptr), -1);
  const int32_t token = 0;
  EXPECT_EQ(aft_session_eval(nullptr, &token, 1, AFT_LOGITS_NONE, nullptr),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_sampler_create(nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
  int32_t sampled = 0;
  const float logit = 0.0f;
  EXPECT_EQ(aft_sampler_sample(nullptr, &logit, 1, &sampled), AFT_ERR_INVALID_ARGUMENT);
  // Freeing NULL is a no-op, as free() is.
  aft_model_free(nullptr);
  aft_session_free(nullptr);
  aft_sampler_free(nullptr);
}

TEST(CApi, MissingFileNamesThePath) {
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load("no/such/model.aft", nullptr, &model), AFT_ERR_IO);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(last_error().find("no/such/model.aft"), std::string::npos) << last_error();
  EXPECT_STREQ(aft_status_string(AFT_ERR_IO), "i/o error");
  EXPECT_STREQ(aft_status_string(AFT_ERR_FORMAT), "malformed model file or session state");
}

TEST(CApi, KernelIsaIsNamed) {
  const std::string isa = aft_kernel_isa();
  EXPECT_TRUE(isa == "avx512amx" || isa == "avx512bf16" || isa == "avx512vnni" || isa == "avx512" ||
              isa == "avx2" || isa == "sse2" || isa == "neondot" || isa == "neon" ||
              isa == "scalar")
      << isa;
}

TEST(CApi, MatmulImplementationIsNamed) {
  const std::string matmul = aft_matmul_implementation();
  EXPECT_EQ(matmul.rfind("oneDNN ", 0), 0u) << matmul;
  EXPECT_NE(matmul.find("M > 8"), std::string::npos) << matmul;
  EXPECT_EQ(matmul.find("ref"), std::string::npos) << "the slow reference fallback: " << matmul;
}

TEST(CApi, MatrixUnitsAreNamedOrEmpty) {
  const std::string units = aft_matrix_units();
  if (units.empty()) {
    EXPECT_NE(std::string(aft_matmul_implementation()).find("bf16 weights widened to f32"),
              std::string::npos);
    return;
  }
  EXPECT_TRUE(units.find("amx") != std::string::npos || units.find("bf16") != std::string::npos)
      << units;
  // On the avx512amx table aft's own kernels take the tiles; elsewhere oneDNN's product runs.
  if (std::string(aft_kernel_isa()) == "avx512amx") {
    EXPECT_EQ(units, "aft's AMX tile kernels (amx_bf16, amx_int8)");
  } else {
    EXPECT_EQ(units.size() - units.rfind(" (oneDNN)"), std::string(" (oneDNN)").size()) << units;
  }
  EXPECT_NE(std::string(aft_matmul_implementation()).find("bf16 weights on " + units),
            std::string::npos);
}

class CApiModel : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json config = tiny_config("conv");
    config["vocab_size"] = 5;
    write_model_file(file_.path(), config, char_tokenizer({"a", "b", " ", "\xC3\xA9", "\n"}),
                     random_tensors(config, 2));
    model_ = load_model(file_.path());
    ASSERT_TRUE(model_);
  }
  TempFile file_;
  ModelHandle model_;
};

TEST_F(CApiModel, InfoDescribesTheModel) {
  aft_model_info info;
  ASSERT_EQ(aft_model_get_info(model_.get(), &info), AFT_OK);
  EXPECT_STREQ(info.mixer, "conv");
  EXPECT_EQ(info.vocab_size, 5);
  EXPECT_EQ(info.d_model, 16);
  EXPECT_EQ(info.n_layers, 2);
  EXPECT_EQ(info.window, 4);
  EXPECT_EQ(info.n_heads, 2);
  EXPECT_EQ(info.max_positions, 0) << "conv with sinusoidal positions has no limit";
  EXPECT_GT(info.n_parameters, 0);
  EXPECT_GT(info.file_bytes, 0u);
  // Per layer: query, value, output 16 x 16, key 16 x 2 (one per head), ffn 32 x 16 twice; head.
  EXPECT_EQ(info.n_matmul_parameters, 2 * (3 * 16 * 16 + 16 * 2 + 2 * 32 * 16) + 5 * 16);
}

TEST_F(CApiModel, TokenizeReportsTheNeededSize) {
  const std::string text =
      "ab \xC3\xA9"
      "a";
  size_t n = 0;
  EXPECT_EQ(aft_tokenize(model_.get(), text.data(), text.size(), nullptr, 0, &n),
            AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5u);
  std::vector<int32_t> tokens(n);
  ASSERT_EQ(aft_tokenize(model_.get(), text.data(), text.size(), tokens.data(), tokens.size(), &n),
            AFT_OK);
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 1, 2, 3, 0}));

  std::string round_trip;
  for (int32_t token : tokens) {
    char piece[8];
    size_t length = 0;
    ASSERT_EQ(aft_token_to_text(model_.get(), token, piece, sizeof(piece), &length), AFT_OK);
    round_trip.append(piece, length);
  }
  EXPECT_EQ(round_trip, text);

  char one = 0;
  size_t length = 0;
  EXPECT_EQ(aft_token_to_text(model_.get(), 3, &one, 1, &length), AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, 2u) << "U+00E9 is two bytes of UTF-8";
  EXPECT_EQ(aft_token_to_text(model_.get(), 5, &one, 1, &length), AFT_ERR_OUT_OF_RANGE);
}

TEST_F(CApiModel, EndOfTextIsTheTokenizersOrNone) {
  EXPECT_EQ(aft_model_end_of_text(model_.get()), -1) << "a character vocabulary names none";
  EXPECT_EQ(aft_model_end_of_text(nullptr), -1);
  EXPECT_EQ(aft_model_metadata_get(model_.get(), "tokenizer.end_of_text"), nullptr);

  nlohmann::json config = tiny_config("simple");
  config["vocab_size"] = 5;
  nlohmann::json tokenizer = char_tokenizer({"a", "b", " ", ".", "\n"});
  tokenizer["end_of_text"] = 4;
  TempFile named;
  write_model_file(named.path(), config, tokenizer, random_tensors(config, 3));
  const ModelHandle with_end = load_model(named.path());
  ASSERT_TRUE(with_end);
  EXPECT_EQ(aft_model_end_of_text(with_end.get()), 4);
  EXPECT_STREQ(aft_model_metadata_get(with_end.get(), "tokenizer.end_of_text"), "4");

  TempFile world;
  write_model_file(world.path(), config,
                   {{"type", "world"}, {"vocab", {nullptr, "61", "62", "20", "2e"}}},
                   random_tensors(config, 3));
  const ModelHandle world_model = load_model(world.path());
  ASSERT_TRUE(world_model);
  EXPECT_EQ(aft_model_end_of_text(world_model.get()), 0) << "a World vocabulary's is 0, unstated";
}

TEST_F(CApiModel, TextOutsideTheVocabularyIsAnError) {
  size_t n = 0;
  int32_t tokens[4];
  EXPECT_EQ(aft_tokenize(model_.get(), "abz", 3, tokens, 4, &n), AFT_ERR_TOKENIZE);
  EXPECT_NE(last_error().find("U+007A"), std::string::npos) << last_error();
}

TEST_F(CApiModel, NullPointersBesideAValidModelAreNamed) {
  const aft_model* model = model_.get();
  size_t n = 7;
  int32_t tokens[4];
  EXPECT_EQ(aft_tokenize(model, nullptr, 3, tokens, 4, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "text is NULL");
  EXPECT_EQ(aft_tokenize(model, "ab", 2, tokens, 4, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "n_tokens is NULL");
  EXPECT_EQ(aft_tokenize(model, "ab", 2, nullptr, 4, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "the output buffer is NULL");
  EXPECT_EQ(aft_tokenize(model, nullptr, 0, nullptr, 0, &n), AFT_OK) << "no text, no tokens";
  EXPECT_EQ(n, 0u);
  char piece[8];
  EXPECT_EQ(aft_token_to_text(model, 0, piece, sizeof piece, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "text_len is NULL");
  EXPECT_EQ(aft_model_get_info(model, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "info is NULL");
  EXPECT_EQ(aft_session_create(model, nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "session is NULL");
  EXPECT_EQ(aft_model_metadata_count(nullptr), 0u);
  EXPECT_EQ(aft_model_metadata_get(nullptr, "config.mixer"), nullptr);
  EXPECT_EQ(aft_model_metadata_get(model, nullptr), nullptr);
  EXPECT_EQ(aft_model_fingerprint(nullptr), 0u);
  EXPECT_STREQ(aft_status_string(static_cast<aft_status>(42)), "unknown status");
}

TEST_F(CApiModel, NegativeThreadCountIsRejected) {
  aft_session_params params = aft_session_default_params();
  params.n_threads = -2;
  aft_session* session = nullptr;
  EXPECT_EQ(aft_session_create(model_.get(), &params, &session), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("n_threads"), std::string::npos);
}

}  // namespace
}  // namespace aft::testing
