// The model file container: a valid file loads in place; each kind of malformed file is refused
// with AFT_ERR_FORMAT (AFT_ERR_IO for open failures) and a message naming the path and the problem.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/format/crc32.h"
#include "engine/format/error.h"
#include "engine/format/mapped_file.h"
#include "engine/format/model_file.h"
#include "models/aft/aft_config.h"
#include "tests/model_file_writer.h"

namespace {

using aft::testing::ModelImage;
using aft::testing::TempFile;
using aft::testing::TestTensor;
using nlohmann::json;

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Three tensors, the last one more than 64 bytes long so a tensor can overlap it partially.
std::vector<TestTensor> sample_tensors() {
  return {{"embed.weight", {2, 3}, iota(6, 1.0f)},
          {"layers.0.mixer.key.weight", {4}, iota(4, -2.5f)},
          {"head.weight", {5, 20}, iota(100, 0.25f)}};
}

class ModelFileTest : public ::testing::Test {
 protected:
  // Plenty of slack: tests lengthen the header without moving the tensors.
  ModelImage image_ = aft::testing::layout_model(aft::testing::tiny_config("simple"),
                                                 aft::testing::byte_tokenizer(), sample_tensors(),
                                                 /*header_slack=*/512);
  TempFile file_;

  const std::string& write(const ModelImage& image) {
    aft::testing::write_bytes(file_.path(), aft::testing::to_bytes(image));
    return file_.path();
  }
  const std::string& write() { return write(image_); }
  const std::string& write_prefix(std::size_t n) {
    std::vector<uint8_t> bytes = aft::testing::to_bytes(image_);
    bytes.resize(n);
    aft::testing::write_bytes(file_.path(), bytes);
    return file_.path();
  }
  json& tensor(std::size_t i) { return image_.header["tensors"][i]; }
  uint64_t file_size() const { return aft::testing::to_bytes(image_).size(); }

  // Opening must fail with `status`, and the message must name the path and every word given.
  void expect_error(aft_status status, const std::vector<std::string>& words,
                    bool verify_checksums = true) {
    try {
      aft::ModelFile::open(file_.path(), verify_checksums);
      ADD_FAILURE() << "the file opened";
    } catch (const aft::Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(file_.path() + ": ", 0), 0u) << message;
      for (const std::string& w : words)
        EXPECT_NE(message.find(w), std::string::npos) << message << "\nlacks: " << w;
    }
  }
  void expect_format_error(const std::vector<std::string>& words) {
    expect_error(AFT_ERR_FORMAT, words);
  }
};

// ---- The mapping (CRC-32: crc32_test.cpp) ----

TEST(MappedFile, MapsContentAndMoves) {
  TempFile file;
  aft::testing::write_bytes(file.path(), {1, 2, 3, 4, 5});
  aft::MappedFile map = aft::MappedFile::open(file.path());
  ASSERT_EQ(map.size(), 5u);
  EXPECT_EQ(map.data()[4], 5);
  const uint8_t* data = map.data();
  aft::MappedFile moved = std::move(map);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(map.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is defined
  EXPECT_EQ(map.size(), 0u);
  map = std::move(moved);
  EXPECT_EQ(map.data(), data);
}

TEST(MappedFile, EmptyFileMapsNothing) {
  TempFile file;
  aft::testing::write_bytes(file.path(), {});
  const aft::MappedFile map = aft::MappedFile::open(file.path());
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.data(), nullptr);
}

TEST(MappedFile, CopyIsAlignedOwnedAndMoves) {
  const uint8_t bytes[] = {0, 1, 2, 3, 4, 5, 6};
  aft::MappedFile copy = aft::MappedFile::copy_of(bytes + 1, 5);  // an odd address
  ASSERT_EQ(copy.size(), 5u);
  EXPECT_NE(copy.data(), bytes + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data()) % 64, 0u);
  EXPECT_EQ(std::memcmp(copy.data(), bytes + 1, 5), 0);
  const uint8_t* data = copy.data();
  aft::MappedFile moved = std::move(copy);
  EXPECT_EQ(moved.data(), data);
  copy = aft::MappedFile::copy_of(bytes, 3);
  moved = std::move(copy);  // frees the first block: ASan reports a leak or a double free otherwise
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(aft::MappedFile::copy_of(bytes, 0).data(), nullptr);
}

// Released pages of a mapped file read back the same bytes (faulted in from the file again); a
// copy keeps its bytes; ranges past the end, empty or inside one page are accepted.
TEST(MappedFile, ReleasedBytesReadBackTheSame) {
  TempFile file;
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  aft::testing::write_bytes(file.path(), bytes);
  const aft::MappedFile map = aft::MappedFile::open(file.path());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < map.size(); ++i) sum += map.data()[i];  // every page resident
  map.release(100, 3 * 4096);
  map.release(0, map.size());
  map.release(map.size() - 10, 1000);
  map.release(map.size() + 1, 10);
  map.release(7, 0);
  ASSERT_EQ(map.size(), bytes.size());
  EXPECT_EQ(std::memcmp(map.data(), bytes.data(), bytes.size()), 0);
  const aft::MappedFile copy = aft::MappedFile::copy_of(bytes.data(), bytes.size());
  copy.release(0, copy.size());
  EXPECT_EQ(std::memcmp(copy.data(), bytes.data(), bytes.size()), 0);
  EXPECT_GT(sum, 0u);
}

// ---- Valid files ----

TEST_F(ModelFileTest, ValidFileLoadsInPlace) {
  write();
  const aft::ModelFile model = aft::ModelFile::open(file_.path(), true);
  EXPECT_EQ(model.path(), file_.path());
  EXPECT_EQ(model.size_bytes(), file_size());
  EXPECT_EQ(model.size_bytes(), std::filesystem::file_size(file_.path()));
  EXPECT_EQ(model.config(), aft::testing::tiny_config("simple"));
  EXPECT_EQ(model.tokenizer(), aft::testing::byte_tokenizer());

  const std::vector<TestTensor> expected = sample_tensors();
  ASSERT_EQ(model.tensors().size(), expected.size());
  const auto* base =
      static_cast<const uint8_t*>(model.tensors()[0].data) - model.tensors()[0].offset;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const aft::TensorInfo& t = model.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, expected[i].name);
    EXPECT_EQ(t.dtype, aft::DType::F32);
    EXPECT_EQ(t.shape, expected[i].shape);
    EXPECT_EQ(t.nbytes, expected[i].values.size() * 4);
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ(t.offset, tensor(i)["offset"].get<uint64_t>());
    EXPECT_EQ(static_cast<const uint8_t*>(t.data), base + t.offset);  // in place, no copy
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
    const auto* values = static_cast<const float*>(t.data);
    EXPECT_EQ(std::vector<float>(values, values + expected[i].values.size()), expected[i].values);
    EXPECT_EQ(model.find(t.name), &t);
  }
  EXPECT_EQ(model.find("nope"), nullptr);
}

TEST_F(ModelFileTest, MovedModelKeepsItsTensors) {
  write();
  aft::ModelFile first = aft::ModelFile::open(file_.path(), true);
  const void* data = first.tensors()[2].data;
  const aft::ModelFile second = std::move(first);
  EXPECT_EQ(second.tensors()[2].data, data);
  EXPECT_EQ(static_cast<const float*>(second.tensors()[2].data)[99], 99.25f);
}

TEST_F(ModelFileTest, UnknownKeysAreIgnored) {
  image_.header["future_section"] = {{"x", 1}};
  tensor(1)["future_field"] = "whatever";
  image_.header.erase("metadata");
  write();
  EXPECT_EQ(aft::ModelFile::open(file_.path(), true).tensors().size(), 3u);
}

TEST_F(ModelFileTest, ScalarAndEmptyTensorsAreAllowed) {
  image_ = aft::testing::layout_model(json::object(), json::object(),
                                      {{"scalar", {}, {42.0f}}, {"empty", {0, 5}, {}}});
  write();
  const aft::ModelFile model = aft::ModelFile::open(file_.path(), true);
  EXPECT_EQ(*static_cast<const float*>(model.find("scalar")->data), 42.0f);
  EXPECT_EQ(model.find("empty")->nbytes, 0u);
}

TEST_F(ModelFileTest, RandomModelForEveryMixerLoads) {
  for (const char* mixer : {"simple", "local", "conv", "full", "decay", "decay_shift", "rwkv4"}) {
    SCOPED_TRACE(mixer);
    const json config = aft::testing::tiny_config(mixer);
    aft::testing::write_random_model(file_.path(), config, 7);
    const aft::ModelFile model = aft::ModelFile::open(file_.path(), true);
    const auto specs =
        aft::expected_tensors(aft::ModelConfig::from_json(model.config(), model.path()));
    ASSERT_EQ(model.tensors().size(), specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(model.tensors()[i].name, specs[i].name);
      EXPECT_EQ(model.tensors()[i].shape, specs[i].shape);
    }
    EXPECT_EQ(model.tokenizer(), aft::testing::byte_tokenizer());
  }
}

TEST(RandomTensors, DeterministicAndScaled) {
  const json config = aft::testing::tiny_config("conv");
  const auto a = aft::testing::random_tensors(config, 3, 0.5f);
  const auto b = aft::testing::random_tensors(config, 3, 0.5f);
  const auto c = aft::testing::random_tensors(config, 4, 0.5f);
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].values, b[i].values);
    differs = differs || a[i].values != c[i].values;
    const bool norm = a[i].name.find("norm") != std::string::npos &&
                      a[i].name.find(".weight") != std::string::npos;
    for (float v : a[i].values) {
      EXPECT_LE(std::abs(v - (norm ? 1.0f : 0.0f)), 0.5f) << a[i].name;
    }
  }
  EXPECT_TRUE(differs);
}

TEST_F(ModelFileTest, ChecksumsCanBeSkipped) {
  image_.data[image_.data_index("head.weight") + 17] ^= 0x10;
  write();
  EXPECT_EQ(aft::ModelFile::open(file_.path(), false).tensors().size(), 3u);
}

// ---- Open failures ----

TEST_F(ModelFileTest, MissingFileIsAnIoError) {
  expect_error(AFT_ERR_IO, {"cannot open", "No such file"});
}

// A FIFO is refused at once: opening it must not wait for a writer that never comes.
TEST(ModelFile, FifoIsAnIoErrorWithoutWaiting) {
  TempFile fifo("fifo");
  ASSERT_EQ(::mkfifo(fifo.path().c_str(), 0600), 0);
  try {
    aft::ModelFile::open(fifo.path(), true);
    ADD_FAILURE() << "a FIFO opened";
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), AFT_ERR_IO);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

TEST(ModelFile, DirectoryIsAnIoError) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  try {
    aft::ModelFile::open(dir, true);
    ADD_FAILURE() << "a directory opened";
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), AFT_ERR_IO);
    EXPECT_NE(std::string(e.what()).find(dir + ": cannot open: not a regular file"),
              std::string::npos)
        << e.what();
  }
}

// ---- Preamble ----

TEST_F(ModelFileTest, EmptyFile) {
  write_prefix(0);
  expect_format_error({"file is 0 bytes, too small for the 24-byte preamble"});
}

TEST_F(ModelFileTest, TruncatedInsidePreamble) {
  for (std::size_t n : {1, 8, 10, 23}) {
    write_prefix(n);
    expect_format_error(
        {"file is " + std::to_string(n) + " bytes, too small for the 24-byte preamble"});
  }
}

TEST_F(ModelFileTest, TruncatedInsideHeader) {
  const uint64_t length = image_.header.dump().size();
  for (std::size_t n : {std::size_t{24}, std::size_t{25}, std::size_t(24 + length / 2),
                        std::size_t(24 + length - 1)}) {
    write_prefix(n);
    expect_format_error({"header length " + std::to_string(length) +
                         " runs past the end of the file (size " + std::to_string(n) + ")"});
  }
}

TEST_F(ModelFileTest, TruncatedInsideTensor) {
  const uint64_t offset = tensor(2)["offset"];
  const uint64_t end = offset + 400;
  for (uint64_t n : {offset, offset + 1, offset + 200, end - 1}) {
    write_prefix(n);
    expect_format_error({"tensor \"head.weight\": bytes [" + std::to_string(offset) + ", " +
                         std::to_string(end) + ") run past the end of the file (size " +
                         std::to_string(n) + ")"});
  }
  // Cut before the second tensor: it is the first one reported out of bounds.
  write_prefix(tensor(1)["offset"].get<uint64_t>() + 8);
  expect_format_error({"tensor \"layers.0.mixer.key.weight\": bytes", "run past the end"});
}

TEST_F(ModelFileTest, WrongMagic) {
  image_.magic = "AFTMODEX";
  write();
  expect_format_error({"bad magic (expected \"AFTMODEL\", found \"AFTMODEX\")"});
  image_.magic = std::string("\x89PNG\r\n\x1a\n", 8);
  write();
  expect_format_error({"bad magic", "found \"\\x89PNG\\x0d\\x0a\\x1a\\x0a\""});
}

TEST_F(ModelFileTest, WrongVersion) {
  image_.version = 7;
  write();
  expect_format_error({"unsupported format version 7 (this build reads version 1)"});
  image_.version = 0;
  write();
  expect_format_error({"unsupported format version 0"});
}

TEST_F(ModelFileTest, ReservedFieldNonzero) {
  image_.reserved = 5;
  write();
  expect_format_error({"reserved preamble field is 5 (expected 0)"});
}

TEST_F(ModelFileTest, HeaderLengthPastEnd) {
  const uint64_t size = file_size();
  image_.header_length = 99999;
  write();
  expect_format_error(
      {"header length 99999 runs past the end of the file (size " + std::to_string(size) + ")"});
  image_.header_length = UINT64_MAX;  // 24 + length would wrap around
  write();
  expect_format_error({"header length 18446744073709551615 runs past the end"});
  image_.header_length = size - 23;
  write();
  expect_format_error({"runs past the end"});
}

// ---- Header JSON ----

TEST_F(ModelFileTest, HeaderNotJson) {
  image_.header_text = R"({"config": {}, "tokenizer": )";
  write();
  expect_format_error({"header is not valid JSON: ", "parse error"});
  image_.header_text = "{\"config\": {\"name\": \"\xff\"}}";  // invalid UTF-8 in a string
  write();
  expect_format_error({"header is not valid JSON: "});
  image_.header_text = "";
  write();
  expect_format_error({"header is not valid JSON: "});
}

TEST_F(ModelFileTest, HeaderLengthCutsTheJson) {
  image_.header_length = image_.header.dump().size() - 1;
  write();
  expect_format_error({"header is not valid JSON: "});
}

// Found while writing the fuzz targets (tests/fuzz/corpus/model/crash-deep_nesting.aft): a
// header nested a few hundred thousand levels deep overflowed the stack when printed.
TEST(ModelFileHeader, NestingDeeperThan64LevelsIsRefused) {
  const auto image = [](int levels) {  // a header whose metadata is `levels` nested arrays
    const std::string text = R"({"config": {}, "tokenizer": {}, "tensors": [], "metadata": )" +
                             std::string(levels, '[') + std::string(levels, ']') + "}";
    std::vector<uint8_t> bytes = {'A', 'F', 'T', 'M', 'O', 'D', 'E', 'L', 1, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(text.size() >> (8 * i)));
    bytes.insert(bytes.end(), text.begin(), text.end());
    return bytes;
  };
  // The root object and 63 arrays: the deepest header there may be.
  const std::vector<uint8_t> deepest = image(63);
  EXPECT_EQ(aft::ModelFile::from_memory(deepest.data(), deepest.size(), "<memory>", true)
                .metadata()
                .size(),
            1u);
  for (const int levels : {64, 1000000}) {
    const std::vector<uint8_t> bytes = image(levels);
    try {
      aft::ModelFile::from_memory(bytes.data(), bytes.size(), "<memory>", true);
      ADD_FAILURE() << levels << " levels loaded";
    } catch (const aft::Error& e) {
      EXPECT_EQ(e.status(), AFT_ERR_FORMAT);
      EXPECT_STREQ(e.what(), "<memory>: header: arrays and objects nested deeper than 64 levels");
    }
  }
}

TEST_F(ModelFileTest, HeaderNotAnObject) {
  image_.header_text = "[1, 2, 3]";
  write();
  expect_format_error({"header: expected a JSON object, found an array"});
}

TEST_F(ModelFileTest, HeaderMissingSections) {
  for (const char* key : {"tensors", "config", "tokenizer"}) {
    ModelImage image = image_;
    image.header.erase(key);
    write(image);
    expect_format_error({std::string("header: missing key \"") + key + "\""});
  }
}

TEST_F(ModelFileTest, HeaderSectionsOfWrongType) {
  image_.header["tensors"] = {{"embed.weight", 1}};
  write();
  expect_format_error({"header: \"tensors\": expected an array, found an object"});
  image_.header["tensors"] = "none";
  write();
  expect_format_error({"header: \"tensors\": expected an array, found string \"none\""});
  image_.header["config"] = 3;
  write();
  expect_format_error({"header: \"config\": expected an object, found 3"});
}

TEST_F(ModelFileTest, TensorEntryNotAnObject) {
  image_.header["tensors"][1] = "layers.0.mixer.key.weight";
  write();
  expect_format_error({"tensors[1]: expected an object, found string"});
}

TEST_F(ModelFileTest, TensorMissingFields) {
  const ModelImage original = image_;
  for (const char* key : {"dtype", "shape", "offset", "nbytes", "crc32"}) {
    image_ = original;
    tensor(1).erase(key);
    write();
    expect_format_error(
        {std::string("tensor \"layers.0.mixer.key.weight\": missing key \"") + key + "\""});
  }
  image_ = original;
  tensor(1).erase("name");
  write();
  expect_format_error({"tensors[1]: missing key \"name\""});
}

TEST_F(ModelFileTest, TensorFieldsOfWrongType) {
  const ModelImage original = image_;
  struct Case {
    const char* key;
    json value;
    std::string message;
  };
  const std::string t = "tensor \"layers.0.mixer.key.weight\": ";
  const Case cases[] = {
      {"offset", "4096", t + "offset: expected a non-negative integer, found string \"4096\""},
      {"offset", -64, t + "offset: expected a non-negative integer, found -64"},
      {"offset", 128.0, t + "offset: expected a non-negative integer, found 128.0"},
      {"nbytes", nullptr, t + "nbytes: expected a non-negative integer, found null"},
      {"nbytes", true, t + "nbytes: expected a non-negative integer, found true"},
      {"crc32", json::array(), t + "crc32: expected a non-negative integer, found an array"},
      {"crc32", 4294967296ull, t + "crc32: expected an integer below 2^32, found 4294967296"},
      {"dtype", 32, t + "dtype: expected a string, found 32"},
      {"shape", "[4]", t + "shape: expected an array, found string \"[4]\""},
      {"shape", {4, "1"}, t + "shape[1]: expected a non-negative integer, found string \"1\""},
      {"shape", {-4}, t + "shape[0]: expected a non-negative integer, found -4"},
      {"shape", {2.5}, t + "shape[0]: expected a non-negative integer, found 2.5"},
      {"name", 7, "tensors[1]: name: expected a string, found 7"},
      {"name", "", "tensors[1]: name is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    image_ = original;
    tensor(1)[c.key] = c.value;
    write();
    expect_format_error({c.message});
  }
}

TEST_F(ModelFileTest, ShapeTooLarge) {
  tensor(0)["shape"] = {uint64_t{1} << 62, uint64_t{1} << 62};
  write();
  expect_format_error(
      {"tensor \"embed.weight\": shape [4611686018427387904, 4611686018427387904] "
       "is too large"});
  tensor(0)["shape"] = {uint64_t{1} << 61};  // 2^63 bytes: no overflow, but no such file either
  tensor(0)["nbytes"] = uint64_t{1} << 63;
  write();
  expect_format_error({"tensor \"embed.weight\": bytes", "run past the end of the file"});
  tensor(0)["shape"] = {UINT64_MAX};
  write();
  expect_format_error(
      {"tensor \"embed.weight\": shape[0]: dimension 18446744073709551615 is too "
       "large"});
  tensor(0)["shape"] = {1e30};
  write();
  expect_format_error(
      {"tensor \"embed.weight\": shape[0]: expected a non-negative integer, found"});
}

// ---- Tensor placement ----

TEST_F(ModelFileTest, TensorOutOfBounds) {
  const uint64_t size = file_size();
  const uint64_t offset = (size / 64 + 2) * 64;
  tensor(1)["offset"] = offset;
  write();
  expect_format_error({"tensor \"layers.0.mixer.key.weight\": bytes [" + std::to_string(offset) +
                       ", " + std::to_string(offset + 16) +
                       ") run past the end of the file (size " + std::to_string(size) + ")"});
  tensor(1)["offset"] = UINT64_MAX - 63;  // the last aligned offset: still in range
  write();
  expect_format_error(
      {"tensor \"layers.0.mixer.key.weight\": bytes [18446744073709551552, "
       "18446744073709551568) run past the end of the file"});
  tensor(1)["offset"] = tensor(0)["offset"];
  tensor(2)["offset"] = UINT64_MAX - 63;  // offset + 400 bytes wraps around
  write();
  expect_format_error(
      {"tensor \"head.weight\": bytes [18446744073709551552, "
       "18446744073709551552 + 400) run past the end of the file"});
}

TEST_F(ModelFileTest, MisalignedOffset) {
  const uint64_t offset = tensor(1)["offset"].get<uint64_t>() + 4;
  tensor(1)["offset"] = offset;
  write();
  expect_format_error({"tensor \"layers.0.mixer.key.weight\": offset " + std::to_string(offset) +
                       " is not 64-byte aligned"});
}

TEST_F(ModelFileTest, TensorOverlapsHeader) {
  tensor(0)["offset"] = 0;
  write();
  const uint64_t header_end = 24 + image_.header.dump().size();
  expect_format_error({"tensor \"embed.weight\": offset 0 overlaps the header (bytes [0, " +
                       std::to_string(header_end) + "))"});
  tensor(0)["offset"] = 64;
  write();
  expect_format_error({"tensor \"embed.weight\": offset 64 overlaps the header"});
}

TEST_F(ModelFileTest, NbytesDoesNotMatchShape) {
  tensor(0)["shape"] = {3, 4};
  tensor(0)["nbytes"] = 40;
  write();
  expect_format_error(
      {"tensor \"embed.weight\": nbytes 40 does not match shape [3, 4] of f32 (48)"});
}

TEST_F(ModelFileTest, UnsupportedDtype) {
  for (const char* dtype : {"f64", "", "Q8_0", "bf16 ", "q4_0"}) {
    tensor(2)["dtype"] = dtype;
    write();
    expect_format_error({std::string("tensor \"head.weight\": unsupported dtype \"") + dtype +
                         "\" (this build reads \"f32\", \"bf16\", \"q8_0\")"});
  }
}

// ---- bf16 and q8_0 tensors ----

TEST(DType, NamesAndSizes) {
  for (const aft::DType dtype : {aft::DType::F32, aft::DType::BF16, aft::DType::Q8_0}) {
    EXPECT_EQ(aft::dtype_from_name(aft::dtype_name(dtype)), dtype);
  }
  EXPECT_STREQ(aft::dtype_name(aft::DType::Q8_0), "q8_0");
  EXPECT_EQ(aft::dtype_from_name("Q8_0"), std::nullopt);
  EXPECT_EQ(aft::dtype_from_name("f16"), std::nullopt);
  EXPECT_EQ(aft::stored_bytes(aft::DType::F32, 96), 384u);
  EXPECT_EQ(aft::stored_bytes(aft::DType::BF16, 96), 192u);
  EXPECT_EQ(aft::stored_bytes(aft::DType::Q8_0, 96), 96u + 3 * 4);  // 3 blocks of 32
  EXPECT_EQ(aft::stored_bytes(aft::DType::Q8_0, 0), 0u);
  EXPECT_EQ(aft::stored_bytes(aft::DType::F32, uint64_t{1} << 62), std::nullopt);
  EXPECT_EQ(aft::stored_bytes(aft::DType::BF16, uint64_t{1} << 63), std::nullopt);
  EXPECT_EQ(aft::stored_bytes(aft::DType::Q8_0, uint64_t{1} << 63), (uint64_t{9} << 60));
  EXPECT_EQ(aft::stored_bytes(aft::DType::Q8_0, UINT64_MAX - 31), std::nullopt);
}

// The tests below turn the last tensor (head.weight) into a bf16 or q8_0 one.
class TypedTensorTest : public ModelFileTest {
 protected:
  // Gives head.weight this dtype, shape and bytes (and their checksum), keeping its offset.
  void retype(const char* dtype, const std::vector<int64_t>& shape,
              const std::vector<uint8_t>& bytes) {
    const std::size_t at = image_.data_index("head.weight");
    image_.data.resize(at);
    image_.data.insert(image_.data.end(), bytes.begin(), bytes.end());
    tensor(2)["dtype"] = dtype;
    tensor(2)["shape"] = shape;
    tensor(2)["nbytes"] = bytes.size();
    tensor(2)["crc32"] = aft::crc32(bytes.data(), bytes.size());
  }
  // A q8_0 tensor [rows, cols]: quant i is (i % 255) - 127, scale k is 0.25 * (k + 1).
  static std::vector<uint8_t> q8_0_bytes(std::size_t rows, std::size_t cols) {
    const std::size_t n = rows * cols;
    std::vector<uint8_t> bytes(n + n / 32 * 4);
    for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(int(i % 255) - 127);
    for (std::size_t k = 0; k < n / 32; ++k) {
      const float scale = 0.25f * static_cast<float>(k + 1);
      std::memcpy(bytes.data() + n + 4 * k, &scale, 4);
    }
    return bytes;
  }
};

TEST_F(TypedTensorTest, Q8_0TensorLoadsWithItsPlanes) {
  retype("q8_0", {3, 64}, q8_0_bytes(3, 64));
  write();
  const aft::ModelFile model = aft::ModelFile::open(file_.path(), true);
  const aft::TensorInfo& t = *model.find("head.weight");
  EXPECT_EQ(t.dtype, aft::DType::Q8_0);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(t.element_count(), 192u);
  EXPECT_EQ(t.nbytes, 192u + 6 * 4);
  EXPECT_EQ(static_cast<const void*>(t.q8_0_quants()), t.data);
  EXPECT_EQ(t.q8_0_quants()[0], -127);
  EXPECT_EQ(t.q8_0_quants()[127], 0);
  EXPECT_EQ(t.q8_0_quants()[191], 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.q8_0_scales()) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(t.q8_0_scales()),
            static_cast<const uint8_t*>(t.data) + 192);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(t.q8_0_scales()[k], 0.25f * static_cast<float>(k + 1));
  // The others stay f32: a file may mix dtypes.
  EXPECT_EQ(model.find("embed.weight")->dtype, aft::DType::F32);
}

TEST_F(TypedTensorTest, Bf16TensorLoads) {
  std::vector<uint8_t> bytes(2 * 5 * 32);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  retype("bf16", {5, 32}, bytes);
  write();
  const aft::ModelFile model = aft::ModelFile::open(file_.path(), true);
  const aft::TensorInfo& t = *model.find("head.weight");
  EXPECT_EQ(t.dtype, aft::DType::BF16);
  EXPECT_EQ(t.nbytes, 320u);
  EXPECT_EQ(t.element_count(), 160u);
  const auto* values = static_cast<const uint16_t*>(t.data);
  EXPECT_EQ(values[1], 0x150E);  // bytes 14, 21 little-endian
}

TEST_F(TypedTensorTest, Bf16AnyShape) {  // no blocks: scalars and odd shapes are fine
  retype("bf16", {3, 1, 5}, std::vector<uint8_t>(30, 1));
  write();
  EXPECT_EQ(aft::ModelFile::open(file_.path(), true).find("head.weight")->element_count(), 15u);
}

TEST_F(TypedTensorTest, Q8_0EmptyTensorIsAllowed) {
  retype("q8_0", {0, 32}, {});
  write();
  EXPECT_EQ(aft::ModelFile::open(file_.path(), true).find("head.weight")->nbytes, 0u);
}

TEST_F(TypedTensorTest, Q8_0NeedsTwoDimensions) {
  retype("q8_0", {64}, q8_0_bytes(1, 64));
  write();
  expect_format_error(
      {"tensor \"head.weight\": dtype \"q8_0\" needs a 2-D shape [rows, cols], found [64]"});
  retype("q8_0", {2, 1, 32}, q8_0_bytes(2, 32));
  write();
  expect_format_error({"needs a 2-D shape [rows, cols], found [2, 1, 32]"});
}

TEST_F(TypedTensorTest, Q8_0NeedsColumnsInWholeBlocks) {
  retype("q8_0", {2, 48}, q8_0_bytes(3, 32));  // 96 values: whole blocks, but across rows
  write();
  expect_format_error(
      {"tensor \"head.weight\": dtype \"q8_0\" needs a column count that is a multiple of 32, "
       "found shape [2, 48]"});
}

TEST_F(TypedTensorTest, NbytesDoesNotMatchTheDtype) {
  retype("bf16", {5, 20}, std::vector<uint8_t>(400));  // f32's size
  write();
  expect_format_error(
      {"tensor \"head.weight\": nbytes 400 does not match shape [5, 20] of bf16 (200)"});
  std::vector<uint8_t> quants_only = q8_0_bytes(3, 64);
  quants_only.resize(192);
  retype("q8_0", {3, 64}, quants_only);
  write();
  expect_format_error(
      {"tensor \"head.weight\": nbytes 192 does not match shape [3, 64] of q8_0 (216)"});
}

TEST_F(TypedTensorTest, ShapeTooLargeForTheDtype) {
  retype("bf16", {int64_t{1} << 62, 2}, {});  // 2^63 values fit, their 2^64 bytes do not
  write();
  expect_format_error({"tensor \"head.weight\": shape [4611686018427387904, 2] is too large"});
  retype("q8_0", {int64_t{1} << 59, 32}, {});  // 2^64 values
  write();
  expect_format_error({"tensor \"head.weight\": shape [576460752303423488, 32] is too large"});
}

TEST_F(TypedTensorTest, Q8_0ChecksumCoversTheScales) {
  const std::vector<uint8_t> bytes = q8_0_bytes(3, 64);
  retype("q8_0", {3, 64}, bytes);
  image_.data[image_.data_index("head.weight") + 192 + 5] ^= 0x01;  // in the scales plane
  write();
  expect_format_error({"tensor \"head.weight\": checksum mismatch"});
}

TEST_F(ModelFileTest, TensorsOverlap) {
  const uint64_t head = tensor(2)["offset"];
  tensor(1)["offset"] = head + 64;  // inside head.weight's 400 bytes
  write();
  expect_format_error(
      {"tensor \"layers.0.mixer.key.weight\" overlaps tensor \"head.weight\" (bytes [" +
       std::to_string(head + 64) + ", " + std::to_string(head + 80) + ") and [" +
       std::to_string(head) + ", " + std::to_string(head + 400) + "))"});
}

TEST_F(ModelFileTest, TensorsAtTheSameOffset) {
  tensor(1)["offset"] = tensor(0)["offset"];
  write();
  expect_format_error({"tensor \"layers.0.mixer.key.weight\" overlaps tensor \"embed.weight\""});
}

TEST_F(ModelFileTest, DuplicateName) {
  tensor(2)["name"] = "embed.weight";
  write();
  expect_format_error({"duplicate tensor name \"embed.weight\" (tensors[0] and tensors[2])"});
}

TEST_F(ModelFileTest, ChecksumMismatch) {
  const std::size_t at = image_.data_index("head.weight") + 17;
  image_.data[at] ^= 0x10;  // one flipped bit
  write();
  const uint32_t expected = tensor(2)["crc32"];
  const uint32_t found = aft::crc32(image_.data.data() + image_.data_index("head.weight"), 400);
  ASSERT_NE(expected, found);
  char words[128];
  std::snprintf(words, sizeof words,
                "tensor \"head.weight\": checksum mismatch (expected crc32 0x%08x, found 0x%08x)",
                expected, found);
  expect_format_error({words});
}

TEST_F(ModelFileTest, WrongChecksumInHeader) {
  tensor(0)["crc32"] = tensor(0)["crc32"].get<uint32_t>() ^ 1u;
  write();
  expect_format_error({"tensor \"embed.weight\": checksum mismatch"});
}

// ---- Robustness: any damage is either harmless or a clean format error ----

TEST_F(ModelFileTest, EveryTruncationIsAFormatError) {
  const std::vector<uint8_t> bytes = aft::testing::to_bytes(image_);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    write_prefix(n);
    try {
      aft::ModelFile::open(file_.path(), true);
      ADD_FAILURE() << "a file cut at " << n << " opened";
    } catch (const aft::Error& e) {
      ASSERT_EQ(e.status(), AFT_ERR_FORMAT) << n << ": " << e.what();
    }
  }
}

TEST_F(ModelFileTest, RandomCorruptionOnlyEverThrowsFormatErrors) {
  const std::vector<uint8_t> original = aft::testing::to_bytes(image_);
  uint64_t state = 12345;
  const auto next = [&state] {  // xorshift64: a fixed sequence on every platform
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int opened = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the preamble and header, where damage is the most varied.
      const std::size_t limit = next() % 4 == 0 ? bytes.size() : image_.data_start;
      bytes[next() % limit] ^= static_cast<uint8_t>(1u << (next() % 8));
    }
    aft::testing::write_bytes(file_.path(), bytes);
    try {
      aft::ModelFile::open(file_.path(), true);
      ++opened;  // e.g. a flipped bit in the padding or in the metadata
    } catch (const aft::Error& e) {
      ASSERT_EQ(e.status(), AFT_ERR_FORMAT) << e.what();
      ASSERT_EQ(std::string(e.what()).rfind(file_.path() + ": ", 0), 0u) << e.what();
    }
  }
  EXPECT_LT(opened, 400);
}

}  // namespace
