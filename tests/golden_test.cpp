// The engine against the PyTorch reference: for every fixture in tests/fixtures (one tiny random
// model per variant, and some of them with bf16 or q8_0 weights, made by
// tests/fixtures/make_fixtures.py), the logits of one prefill, of token-by-token decode and of
// mixed chunkings all match the reference's within a relative error of 1e-4. A q8_0 model's
// products quantize their inputs to 8-bit blocks too, a prompt's as a token's: every run of it is
// compared with the fixture's token reference, which does the same. A bf16 model's prefill on
// matrix units rounds the inputs of its products to bf16, and is compared with the fixture's unit
// reference (within 3e-4); where a run mixes that with one-token evals it is held to the distance
// between the two references. An f32 model loaded at bf16 matmul precision gives there the bits of
// the same model stored in bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aft.h"

namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 1e-4;
// A bf16 model on matrix units (aft_matrix_units) against the reference with the same products'
// inputs rounded to bf16: where the engine's float and PyTorch's differ in the last bit next to a
// bf16 rounding boundary, the two round an input one bf16 step apart (2^-8 of it).
constexpr double kUnitsTolerance = 3e-4;

struct Fixture {
  std::string name;
  std::string model_path;
  std::vector<int32_t> tokens;
  std::size_t vocab = 0;
  // [tokens, vocab]; of q8_0 models the token reference (their products' inputs in 8-bit blocks)
  std::vector<float> logits;
  std::vector<float> unit_logits;  // bf16 models: with the products' inputs in bf16
};

std::vector<float> read_logits(const fs::path& path, std::size_t count) {
  std::vector<float> logits(count);
  std::ifstream raw(path, std::ios::binary);
  raw.read(reinterpret_cast<char*>(logits.data()),
           static_cast<std::streamsize>(logits.size() * sizeof(float)));
  EXPECT_TRUE(raw) << path << ": shorter than the logits' shape";
  return logits;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  const std::string suffix = ".expected.json";
  for (const auto& entry : fs::directory_iterator(AFT_FIXTURES_DIR)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > suffix.size() &&
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(file.substr(0, file.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

Fixture load_fixture(const std::string& name) {
  const fs::path dir = AFT_FIXTURES_DIR;
  std::ifstream json_file(dir / (name + ".expected.json"));
  const nlohmann::json expected = nlohmann::json::parse(json_file);
  Fixture f;
  f.name = name;
  f.model_path = (dir / expected.at("model").get<std::string>()).string();
  f.tokens = expected.at("tokens").get<std::vector<int32_t>>();
  const auto shape = expected.at("logits_shape").get<std::vector<std::size_t>>();
  f.vocab = shape.at(1);
  EXPECT_EQ(shape.at(0), f.tokens.size());
  f.logits = read_logits(dir / expected.at("logits_file").get<std::string>(), shape[0] * shape[1]);
  if (expected.contains("token_logits_file")) {
    f.logits =
        read_logits(dir / expected.at("token_logits_file").get<std::string>(), f.logits.size());
  }
  if (expected.contains("unit_logits_file")) {
    f.unit_logits =
        read_logits(dir / expected.at("unit_logits_file").get<std::string>(), f.logits.size());
  }
  return f;
}

// max |got - want| / max |want| over one position's logits.
double relative_error(const float* got, const float* want, std::size_t n) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fixture_ = load_fixture(GetParam());
    ASSERT_EQ(aft_model_load(fixture_.model_path.c_str(), nullptr, &model_), AFT_OK)
        << aft_last_error();
    aft_model_info info;
    ASSERT_EQ(aft_model_get_info(model_, &info), AFT_OK);
    ASSERT_EQ(static_cast<std::size_t>(info.vocab_size), fixture_.vocab);
    const char* dtype = aft_model_metadata_get(model_, "metadata.dtype");
    // On the units every product of a bf16 model, prompt or decode, takes its input in bf16.
    if (dtype != nullptr && std::string(dtype) == "bf16" && *aft_matrix_units() != '\0') {
      ASSERT_FALSE(fixture_.unit_logits.empty()) << fixture_.name << ": no unit_logits_file";
      reference_ = fixture_.unit_logits;
      tolerance_ = kUnitsTolerance;
    } else {
      reference_ = fixture_.logits;
    }
  }
  void TearDown() override { aft_model_free(model_); }

  aft_session* new_session(int threads) {
    aft_session_params params = aft_session_default_params();
    params.n_threads = threads;
    aft_session* session = nullptr;
    EXPECT_EQ(aft_session_create(model_, &params, &session), AFT_OK) << aft_last_error();
    return session;
  }

  // Feeds the fixture's tokens in chunks of the given sizes (cycled), collecting every logit row.
  std::vector<float> run_chunked(const std::vector<std::size_t>& chunks, int threads = 1) {
    aft_session* session = new_session(threads);
    const std::size_t n = fixture_.tokens.size();
    std::vector<float> logits(n * fixture_.vocab);
    for (std::size_t done = 0, i = 0; done < n; ++i) {
      const std::size_t size = std::min(chunks[i % chunks.size()], n - done);
      EXPECT_EQ(aft_session_eval(session, fixture_.tokens.data() + done, size, AFT_LOGITS_ALL,
                                 logits.data() + done * fixture_.vocab),
                AFT_OK)
          << aft_last_error();
      done += size;
    }
    EXPECT_EQ(aft_session_position(session), static_cast<int64_t>(n));
    aft_session_free(session);
    return logits;
  }

  void expect_matches_reference(const std::vector<float>& logits, const std::vector<float>& want,
                                double tolerance, const char* how) {
    for (std::size_t t = 0; t < fixture_.tokens.size(); ++t) {
      const double error = relative_error(logits.data() + t * fixture_.vocab,
                                          want.data() + t * fixture_.vocab, fixture_.vocab);
      EXPECT_LE(error, tolerance) << fixture_.name << ", " << how << ", position " << t;
    }
  }

  Fixture fixture_;
  std::vector<float> reference_;  // what every run is compared with, within tolerance_
  double tolerance_ = kTolerance;
  aft_model* model_ = nullptr;
};

TEST_P(GoldenTest, PrefillMatchesReference) {
  expect_matches_reference(run_chunked({1u << 20}), reference_, tolerance_, "prefill");
}

TEST_P(GoldenTest, DecodeMatchesReference) {
  expect_matches_reference(run_chunked({1}), reference_, tolerance_, "decode");
}

TEST_P(GoldenTest, UnevenChunksMatchReference) {
  expect_matches_reference(run_chunked({5, 1, 3, 11, 2}), reference_, tolerance_,
                           "chunks of 5, 1, 3, 11, 2");
}

// Prefill a prompt, then decode: the same logits as decoding from the start.
TEST_P(GoldenTest, PrefillThenDecodeEqualsDecodeOnly) {
  const std::size_t n = fixture_.tokens.size();
  const std::size_t prompt = n / 2;
  const std::vector<float> decode_only = run_chunked({1});
  aft_session* session = new_session(1);
  std::vector<float> last(fixture_.vocab);
  ASSERT_EQ(aft_session_eval(session, fixture_.tokens.data(), prompt, AFT_LOGITS_LAST, last.data()),
            AFT_OK);
  EXPECT_LE(relative_error(last.data(), decode_only.data() + (prompt - 1) * fixture_.vocab,
                           fixture_.vocab),
            tolerance_);
  for (std::size_t t = prompt; t < n; ++t) {
    ASSERT_EQ(aft_session_eval(session, &fixture_.tokens[t], 1, AFT_LOGITS_LAST, last.data()),
              AFT_OK);
    EXPECT_LE(relative_error(last.data(), decode_only.data() + t * fixture_.vocab, fixture_.vocab),
              tolerance_)
        << "position " << t;
  }
  aft_session_free(session);
}

// Same inputs, any thread count: bit-identical logits.
TEST_P(GoldenTest, ThreadCountDoesNotChangeLogits) {
  for (const std::vector<std::size_t>& chunks :
       {std::vector<std::size_t>{1u << 20}, std::vector<std::size_t>{1}}) {
    const std::vector<float> one = run_chunked(chunks, 1);
    for (int threads : {2, 3}) {
      const std::vector<float> many = run_chunked(chunks, threads);
      ASSERT_EQ(one.size(), many.size());
      for (std::size_t i = 0; i < one.size(); ++i) {
        ASSERT_EQ(one[i], many[i]) << threads << " threads, logit " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(GoldenFixtures, EveryVariantIsCovered) {
  std::vector<std::string> mixers;
  for (const std::string& name : fixture_names()) {
    aft_model* model = nullptr;
    const Fixture f = load_fixture(name);
    ASSERT_EQ(aft_model_load(f.model_path.c_str(), nullptr, &model), AFT_OK) << aft_last_error();
    aft_model_info info;
    ASSERT_EQ(aft_model_get_info(model, &info), AFT_OK);
    mixers.push_back(info.mixer);
    // Every fixture's sequence is longer than its window, so the global sums are exercised.
    EXPECT_GT(static_cast<int64_t>(f.tokens.size()), info.window) << name;
    aft_model_free(model);
  }
  for (const char* mixer : {"simple", "local", "conv", "full", "decay"}) {
    EXPECT_NE(std::find(mixers.begin(), mixers.end(), mixer), mixers.end()) << mixer;
  }
}

// The logits of every token of `tokens` fed to a fresh session of the model at `path` in calls of
// `chunk` tokens, the model loaded at `precision`.
std::vector<float> logits_at(const std::string& path, const aft_model_params& params,
                             const std::vector<int32_t>& tokens, std::size_t chunk, int threads) {
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load(path.c_str(), &params, &model), AFT_OK) << aft_last_error();
  aft_model_info info;
  EXPECT_EQ(aft_model_get_info(model, &info), AFT_OK);
  aft_session_params session_params = aft_session_default_params();
  session_params.n_threads = threads;
  aft_session* session = nullptr;
  EXPECT_EQ(aft_session_create(model, &session_params, &session), AFT_OK) << aft_last_error();
  const auto vocab = static_cast<std::size_t>(info.vocab_size);
  std::vector<float> logits(tokens.size() * vocab);
  for (std::size_t done = 0; done < tokens.size(); done += chunk) {
    const std::size_t size = std::min(chunk, tokens.size() - done);
    EXPECT_EQ(aft_session_eval(session, tokens.data() + done, size, AFT_LOGITS_ALL,
                               logits.data() + done * vocab),
              AFT_OK)
        << aft_last_error();
  }
  aft_session_free(session);
  aft_model_free(model);
  return logits;
}

std::vector<float> logits_at(const std::string& path, aft_matmul_precision precision,
                             const std::vector<int32_t>& tokens, std::size_t chunk, int threads) {
  aft_model_params params = aft_model_default_params();
  params.matmul_precision = precision;
  return logits_at(path, params, tokens, chunk, threads);
}

// An f32 model loaded with AFT_MATMUL_PRECISION_BF16: where the CPU has matrix units its prompt's
// logits are, bit for bit, those of the same model stored in bf16 (conv_bf16 holds conv's linear
// weights rounded to bf16; conv's head is not tied to its embedding), so within kUnitsTolerance of
// the PyTorch reference of that; elsewhere they are its f32 logits. Decoding stays exact f32.
TEST(MatmulPrecision, F32ModelsPromptsOnMatrixUnitsHaveTheBitsOfTheirBf16Copy) {
  const Fixture f32 = load_fixture("conv");
  const Fixture bf16 = load_fixture("conv_bf16");
  ASSERT_EQ(f32.tokens, bf16.tokens);
  const std::size_t all = f32.tokens.size();
  const std::vector<float> prompt =
      logits_at(f32.model_path, AFT_MATMUL_PRECISION_BF16, f32.tokens, all, 2);
  const std::vector<float> decode =
      logits_at(f32.model_path, AFT_MATMUL_PRECISION_BF16, f32.tokens, 1, 2);
  EXPECT_EQ(decode, logits_at(f32.model_path, AFT_MATMUL_PRECISION_F32, f32.tokens, 1, 1))
      << "one token at a time stays f32";
  if (*aft_matrix_units() == '\0') {
    EXPECT_EQ(prompt, logits_at(f32.model_path, AFT_MATMUL_PRECISION_F32, f32.tokens, all, 1));
    GTEST_SKIP() << "skipped: no matrix units taken (no AMX/AVX512-BF16, Intel's AVX512-BF16 "
                    "unless AFT_MATRIX_UNITS=on, or =off); the prompt "
                    "was exact f32, as it should be there";
  }
  EXPECT_EQ(prompt, logits_at(bf16.model_path, AFT_MATMUL_PRECISION_F32, f32.tokens, all, 1));
  for (std::size_t t = 0; t < all; ++t) {
    EXPECT_LE(relative_error(prompt.data() + t * f32.vocab, bf16.unit_logits.data() + t * f32.vocab,
                             f32.vocab),
              kUnitsTolerance)
        << "position " << t;
  }
}

// A precision that aft_matmul_precision does not name is refused before the file is read.
TEST(MatmulPrecision, UnknownValuesAreRefused) {
  for (int value : {2, -1, 0x7fffffff}) {
    aft_model_params params = aft_model_default_params();
    params.matmul_precision = static_cast<aft_matmul_precision>(value);
    aft_model* model = reinterpret_cast<aft_model*>(&params);
    EXPECT_EQ(aft_model_load(load_fixture("conv").model_path.c_str(), &params, &model),
              AFT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(model, nullptr);
    EXPECT_NE(
        std::string(aft_last_error()).find("params.matmul_precision: " + std::to_string(value)),
        std::string::npos)
        << aft_last_error();
  }
  EXPECT_EQ(aft_model_default_params().matmul_precision, AFT_MATMUL_PRECISION_F32);
}

// use_mmap = 0 is still accepted and no longer changes anything (every weight matrix is packed at
// load): the same bits, prompt and token by token, on 1 and 2 threads. A quantized model and a
// model loaded from memory take the parameter too.
TEST(UseMmap, CopiedF32WeightsGiveTheBitsOfTheMappedFile) {
  aft_model_params copied = aft_model_default_params();
  copied.use_mmap = 0;
  EXPECT_EQ(aft_model_default_params().use_mmap, 1);
  for (const char* name : {"local", "conv", "decay_shift", "conv_q8_0"}) {
    const Fixture f = load_fixture(name);
    const std::size_t all = f.tokens.size();
    for (int threads : {1, 2}) {
      const std::vector<float> mapped_prompt =
          logits_at(f.model_path, aft_model_default_params(), f.tokens, all, threads);
      EXPECT_EQ(logits_at(f.model_path, copied, f.tokens, all, threads), mapped_prompt)
          << name << ", " << threads << " threads";
      EXPECT_EQ(logits_at(f.model_path, copied, f.tokens, 1, threads),
                logits_at(f.model_path, aft_model_default_params(), f.tokens, 1, threads))
          << name << ", " << threads << " threads, token by token";
    }
  }
  const std::string path = load_fixture("local").model_path;
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  aft_model* model = nullptr;
  ASSERT_EQ(aft_model_load_from_memory(bytes.data(), bytes.size(), &copied, &model), AFT_OK)
      << aft_last_error();
  aft_model_free(model);
}

// use_mmap is 1 or 0; anything else is refused before the file is read.
TEST(UseMmap, OtherValuesAreRefused) {
  for (int value : {2, -1}) {
    aft_model_params params = aft_model_default_params();
    params.use_mmap = value;
    aft_model* model = reinterpret_cast<aft_model*>(&params);
    EXPECT_EQ(aft_model_load(load_fixture("local").model_path.c_str(), &params, &model),
              AFT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(model, nullptr);
    EXPECT_NE(std::string(aft_last_error()).find("params.use_mmap: " + std::to_string(value)),
              std::string::npos)
        << aft_last_error();
  }
}

// Every mixer also runs with q8_0 weights, and some with bf16.
TEST(GoldenFixtures, EveryVariantIsCoveredQuantized) {
  std::vector<std::string> q8_mixers, bf16_mixers;
  for (const std::string& name : fixture_names()) {
    aft_model* model = nullptr;
    ASSERT_EQ(aft_model_load(load_fixture(name).model_path.c_str(), nullptr, &model), AFT_OK)
        << aft_last_error();
    aft_model_info info;
    ASSERT_EQ(aft_model_get_info(model, &info), AFT_OK);
    const char* dtype = aft_model_metadata_get(model, "metadata.dtype");
    if (dtype != nullptr && std::string(dtype) == "q8_0") q8_mixers.push_back(info.mixer);
    if (dtype != nullptr && std::string(dtype) == "bf16") bf16_mixers.push_back(info.mixer);
    aft_model_free(model);
  }
  for (const char* mixer : {"simple", "local", "conv", "full", "decay"}) {
    EXPECT_NE(std::find(q8_mixers.begin(), q8_mixers.end(), mixer), q8_mixers.end()) << mixer;
  }
  EXPECT_GE(bf16_mixers.size(), 2u);
}

}  // namespace
