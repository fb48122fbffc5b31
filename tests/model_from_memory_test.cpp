// aft_model_load_from_memory: the same model as aft_model_load from the same bytes (bit-identical
// logits), whatever the buffer's alignment and after the caller frees it; every refusal.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"

namespace aft::testing {
namespace {

std::string last_error() { return aft_last_error(); }

std::string fixture(const std::string& name) { return std::string(AFT_FIXTURES_DIR) + "/" + name; }

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Loads bytes from memory; on failure returns the status and leaves the message in last_error().
aft_status load(const void* data, size_t size, ModelHandle* model, int verify_checksums = 1) {
  aft_model_params params = aft_model_default_params();
  params.verify_checksums = verify_checksums;
  aft_model* raw = reinterpret_cast<aft_model*>(uintptr_t{1});  // must be reset on failure
  const aft_status status = aft_model_load_from_memory(data, size, &params, &raw);
  if (status != AFT_OK) {
    EXPECT_EQ(raw, nullptr) << "a failed load leaves *model NULL";
  }
  *model = ModelHandle(status == AFT_OK ? raw : nullptr);
  return status;
}

// One fixture per dtype and several mixers: f32 (full, factorized bias), bf16 (read in place),
// q8_0 (packed at load).
class FromMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(FromMemory, GivesTheBitsOfTheFileAtAnyAlignmentAfterTheBufferIsFreed) {
  const std::string path = fixture(GetParam());
  const std::vector<char> bytes = read_bytes(path);
  const ModelHandle from_file = load_model(path);
  ModelHandle from_memory;
  {
    // One byte in: a buffer the loader could not read tensors from in place.
    std::vector<char> buffer(bytes.size() + 1);
    std::memcpy(buffer.data() + 1, bytes.data(), bytes.size());
    ASSERT_EQ(load(buffer.data() + 1, bytes.size(), &from_memory), AFT_OK) << last_error();
    std::fill(buffer.begin(), buffer.end(), 0);  // the model must not read it any more
  }
  aft_model_info file_info{}, memory_info{};
  ASSERT_EQ(aft_model_get_info(from_file.get(), &file_info), AFT_OK);
  ASSERT_EQ(aft_model_get_info(from_memory.get(), &memory_info), AFT_OK);
  EXPECT_STREQ(memory_info.mixer, file_info.mixer);
  EXPECT_EQ(memory_info.n_parameters, file_info.n_parameters);
  EXPECT_EQ(memory_info.file_bytes, bytes.size());

  const std::vector<int32_t> tokens =
      token_sequence(12, static_cast<uint32_t>(file_info.vocab_size));
  // A prompt at once (the matrix products) and token by token (the GEMV and the accumulators).
  for (const std::vector<std::size_t>& chunks :
       {std::vector<std::size_t>{12}, std::vector<std::size_t>(12, 1)}) {
    const std::vector<float> expected = eval_chunks(from_file.get(), tokens, chunks);
    const std::vector<float> found = eval_chunks(from_memory.get(), tokens, chunks);
    ASSERT_EQ(found.size(), expected.size());
    EXPECT_EQ(std::memcmp(found.data(), expected.data(), found.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FromMemory,
                         ::testing::Values("full_factorized.aft", "local_learned_char_bf16.aft",
                                           "local_q8_0.aft", "conv.aft"));

TEST(FromMemoryRefusals, NullPointersAreInvalidArguments) {
  const char byte = 0;
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load_from_memory(&byte, 1, nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "model is NULL");
  ModelHandle handle;
  EXPECT_EQ(load(nullptr, 100, &handle), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "data is NULL");
  EXPECT_EQ(aft_model_load_from_memory(nullptr, 0, nullptr, &model), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(model, nullptr);
}

TEST(FromMemoryRefusals, EmptyAndTruncatedBytesAreFormatErrorsNamingMemory) {
  const std::vector<char> bytes = read_bytes(fixture("simple.aft"));
  ModelHandle model;
  EXPECT_EQ(load(bytes.data(), 0, &model), AFT_ERR_FORMAT);
  EXPECT_EQ(last_error(), "<memory>: file is 0 bytes, too small for the 24-byte preamble");
  EXPECT_EQ(load(bytes.data(), 23, &model), AFT_ERR_FORMAT);
  EXPECT_EQ(last_error(), "<memory>: file is 23 bytes, too small for the 24-byte preamble");
  EXPECT_EQ(load(bytes.data(), 1000, &model), AFT_ERR_FORMAT);
  EXPECT_EQ(last_error().rfind("<memory>: header length 4323 runs past the end of the file (size "
                               "1000)",
                               0),
            0u)
      << last_error();
  EXPECT_EQ(load(bytes.data(), bytes.size() - 1, &model), AFT_ERR_FORMAT);
  EXPECT_EQ(last_error().rfind("<memory>: tensor ", 0), 0u) << last_error();
  EXPECT_NE(last_error().find("run past the end of the file (size " +
                              std::to_string(bytes.size() - 1) + ")"),
            std::string::npos)
      << last_error();
}

TEST(FromMemoryRefusals, ChecksumsAreVerifiedUnlessTurnedOff) {
  std::vector<char> bytes = read_bytes(fixture("simple.aft"));
  bytes.back() ^= 0x40;  // inside the last tensor
  ModelHandle model;
  EXPECT_EQ(load(bytes.data(), bytes.size(), &model), AFT_ERR_FORMAT);
  EXPECT_EQ(last_error().rfind("<memory>: tensor ", 0), 0u) << last_error();
  EXPECT_NE(last_error().find("checksum mismatch"), std::string::npos) << last_error();
  EXPECT_EQ(load(bytes.data(), bytes.size(), &model, 0), AFT_OK) << last_error();
}

// The model's checks after the container's: the tensors are the config's, the tokenizer has its
// vocabulary, the config is valid.
TEST(FromMemoryRefusals, TheTensorsAndTheTokenizerMustBeTheConfigs) {
  const nlohmann::json config = tiny_config("simple");
  const auto refusal = [](const nlohmann::json& cfg, const nlohmann::json& tokenizer,
                          const std::vector<TestTensor>& tensors) {
    const std::vector<uint8_t> bytes = to_bytes(layout_model(cfg, tokenizer, tensors));
    ModelHandle model;
    EXPECT_EQ(load(bytes.data(), bytes.size(), &model), AFT_ERR_FORMAT);
    return last_error();
  };
  const std::vector<TestTensor> tensors = random_tensors(config, 1);
  ASSERT_EQ(tensors.back().name, "head.bias");

  std::vector<TestTensor> missing = tensors;
  missing.pop_back();
  EXPECT_EQ(refusal(config, byte_tokenizer(), missing),
            "<memory>: missing tensor \"head.bias\" (shape [256])");
  std::vector<TestTensor> extra = tensors;
  extra.push_back({"extra.weight", {1}, {0.0f}});
  EXPECT_EQ(refusal(config, byte_tokenizer(), extra),
            "<memory>: tensor \"extra.weight\" is not part of a simple model with this config");
  std::vector<TestTensor> reshaped = tensors;
  reshaped.back() = {"head.bias", {255}, std::vector<float>(255)};
  EXPECT_EQ(refusal(config, byte_tokenizer(), reshaped),
            "<memory>: tensor \"head.bias\": expected shape [256], found [255]");
  EXPECT_EQ(refusal(config, char_tokenizer({"a", "b"}), tensors),
            "<memory>: the tokenizer has 2 tokens, config.vocab_size is 256");
  nlohmann::json bad_config = config;
  bad_config["d_model"] = 0;
  EXPECT_EQ(refusal(bad_config, byte_tokenizer(), tensors).rfind("<memory>: config.d_model: ", 0),
            0u)
      << last_error();
}

TEST(FromMemoryRefusals, NotAModelFile) {
  const std::string text = "this is a text file, not a model file at all";
  ModelHandle model;
  EXPECT_EQ(load(text.data(), text.size(), &model), AFT_ERR_FORMAT);
  EXPECT_EQ(
      last_error(),
      "<memory>: bad magic (expected \"AFTMODEL\", found \"this is \"): not an aft model file");
}

}  // namespace
}  // namespace aft::testing
