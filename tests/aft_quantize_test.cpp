// aft-quantize as a user meets it: the linear layers' weights of an f32 model become bf16 or q8_0
// (the rest byte for byte as it was), each within its rounding bound of the original and with the
// contract's exact bits on hand-made values; a quantized, damaged or missing input, an unwritable
// or clashing output and bad command lines are refused, leaving no output file behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/model_file.h"
#include "kernels/bf16.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace aft::testing {
namespace {

using nlohmann::json;

CommandResult run(const std::string& args) { return run_command(AFT_QUANTIZE_PATH, args); }

CommandResult quantize(const std::string& in, const std::string& out, const std::string& dtype) {
  return run(shell_quote(in) + " " + shell_quote(out) + " " + dtype);
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// AFT-conv (its key weight is [n_heads, d]) with d_model 64, so that q8_0 applies to every
// d-column matrix, and d_ff 80, so that ffn.down ([d, d_ff]) has no whole blocks.
json wide_config() {
  json config = tiny_config("conv");
  config["d_model"] = 64;
  config["d_ff"] = 80;
  return config;
}

bool is_linear_weight(const std::string& name) {
  for (const char* part : {"query", "key", "value", "output"}) {
    if (name.find(std::string(".mixer.") + part + ".weight") != std::string::npos) return true;
  }
  return name.find(".ffn.up.weight") != std::string::npos ||
         name.find(".ffn.down.weight") != std::string::npos || name == "head.weight";
}

// A converted model next to its f32 original.
class AftQuantizeTest : public ::testing::Test {
 protected:
  TempFile in_{"quantize_in"};
  TempFile out_{"quantize_out"};

  void SetUp() override { write_random_model(in_.path(), wide_config(), 5, 0.5f); }

  void expect_refused(const CommandResult& r, const std::vector<std::string>& words) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    for (const std::string& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out_.path()));
    EXPECT_FALSE(exists(out_.path() + ".tmp"));
  }
};

TEST_F(AftQuantizeTest, Q8_0ConvertsTheLinearWeightsWithinHalfAStep) {
  const CommandResult r = quantize(in_.path(), out_.path(), "q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "") << "stderr is not a terminal: no progress line";
  EXPECT_FALSE(exists(out_.path() + ".tmp"));

  const ModelFile in = ModelFile::open(in_.path(), true);
  const ModelFile out = ModelFile::open(out_.path(), true);
  EXPECT_EQ(out.config(), in.config());
  EXPECT_EQ(out.tokenizer(), in.tokenizer());
  EXPECT_EQ(out.metadata().at("dtype"), "q8_0");
  EXPECT_EQ(out.metadata().at("producer"), "aft tests");  // the rest of the metadata stays
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  int converted = 0;
  for (std::size_t i = 0; i < in.tensors().size(); ++i) {
    const TensorInfo& original = in.tensors()[i];
    const TensorInfo& t = out.tensors()[i];
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.name, original.name);
    EXPECT_EQ(t.shape, original.shape);
    const bool q8 = is_linear_weight(t.name) && t.name.find("ffn.down") == std::string::npos;
    if (!q8) {
      EXPECT_EQ(t.dtype, DType::F32);
      ASSERT_EQ(t.nbytes, original.nbytes);
      EXPECT_EQ(std::memcmp(t.data, original.data, t.nbytes), 0);
      continue;
    }
    ++converted;
    ASSERT_EQ(t.dtype, DType::Q8_0);
    const auto* w = static_cast<const float*>(original.data);
    const std::size_t n = t.element_count();
    for (std::size_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (std::size_t i = 32 * b; i < 32 * (b + 1); ++i) amax = std::max(amax, std::fabs(w[i]));
      const float d = t.q8_0_scales()[b];
      ASSERT_EQ(d, amax / 127.0f) << "block " << b;
      ASSERT_GT(d, 0.0f);
      for (std::size_t i = 32 * b; i < 32 * (b + 1); ++i) {
        const float value = d * static_cast<float>(t.q8_0_quants()[i]);
        ASSERT_LE(std::fabs(w[i] - value), 0.5f * d * (1.0f + 1e-6f)) << "element " << i;
        ASSERT_GE(t.q8_0_quants()[i], -127);
      }
    }
  }
  EXPECT_EQ(converted, 2 * 5 + 1);  // per layer query, key, value, output, up; the head
}

TEST_F(AftQuantizeTest, Bf16ConvertsEveryLinearWeight) {
  const CommandResult r = quantize(in_.path(), out_.path(), "bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ModelFile in = ModelFile::open(in_.path(), true);
  const ModelFile out = ModelFile::open(out_.path(), true);
  EXPECT_EQ(out.metadata().at("dtype"), "bf16");
  int converted = 0;
  for (std::size_t i = 0; i < in.tensors().size(); ++i) {
    const TensorInfo& original = in.tensors()[i];
    const TensorInfo& t = out.tensors()[i];
    SCOPED_TRACE(t.name);
    if (!is_linear_weight(t.name)) {
      EXPECT_EQ(t.dtype, DType::F32);
      EXPECT_EQ(std::memcmp(t.data, original.data, t.nbytes), 0);
      continue;
    }
    ++converted;
    ASSERT_EQ(t.dtype, DType::BF16);
    ASSERT_EQ(t.nbytes, original.nbytes / 2);
    const auto* w = static_cast<const float*>(original.data);
    const auto* halves = static_cast<const uint16_t*>(t.data);
    for (std::size_t k = 0; k < t.element_count(); ++k) {
      ASSERT_EQ(halves[k], kernels::f32_to_bf16(w[k])) << k;
      const float value = kernels::bf16_to_float(halves[k]);
      ASSERT_LE(std::fabs(w[k] - value), std::ldexp(std::fabs(w[k]), -8)) << k;
    }
  }
  EXPECT_EQ(converted, 2 * 6 + 1);  // ffn.down too: bf16 has no blocks
}

// The contract's rounding on values whose quants are known: d = 127 / 127 = 1, halves to even.
TEST_F(AftQuantizeTest, Q8_0BitsOfHandMadeBlocks) {
  std::vector<TestTensor> tensors = random_tensors(wide_config(), 5);
  for (TestTensor& t : tensors) {
    if (t.name != "head.weight") continue;
    const std::vector<float> first = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -126.5f};
    std::copy(first.begin(), first.end(), t.values.begin());
    std::fill(t.values.begin() + 8, t.values.begin() + 32, 0.0f);
    std::fill(t.values.begin() + 32, t.values.begin() + 64, -0.0f);  // a block of zeros
    std::fill(t.values.begin() + 64, t.values.begin() + 96, 0.0f);
    t.values[64] = -254.0f;  // d = 2, the largest magnitude negative
    t.values[65] = 5.0f;     // 2.5 -> 2
    t.values[66] = 7.0f;     // 3.5 -> 4
  }
  write_model_file(in_.path(), wide_config(), tokenizer_for(256), tensors);
  ASSERT_EQ(quantize(in_.path(), out_.path(), "q8_0").exit_code, 0);
  const ModelFile out = ModelFile::open(out_.path(), true);
  const TensorInfo& head = *out.find("head.weight");
  const std::vector<int> expected = {127, 2, 4, -2, 0, 0, 2, -126};
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(head.q8_0_quants()[i], expected[i]);
  for (std::size_t i = 8; i < 64; ++i) EXPECT_EQ(head.q8_0_quants()[i], 0) << i;
  EXPECT_EQ(head.q8_0_quants()[64], -127);
  EXPECT_EQ(head.q8_0_quants()[65], 2);
  EXPECT_EQ(head.q8_0_quants()[66], 4);
  EXPECT_EQ(head.q8_0_scales()[0], 1.0f);
  uint32_t zero_scale;
  std::memcpy(&zero_scale, &head.q8_0_scales()[1], 4);
  EXPECT_EQ(zero_scale, 0u);  // +0, also for a block of -0
  EXPECT_EQ(head.q8_0_scales()[2], 2.0f);
}

TEST_F(AftQuantizeTest, ReplacesAnExistingOutput) {
  write_bytes(out_.path(), {1, 2, 3});
  ASSERT_EQ(quantize(in_.path(), out_.path(), "bf16").exit_code, 0);
  EXPECT_EQ(ModelFile::open(out_.path(), true).metadata().at("dtype"), "bf16");
}

TEST_F(AftQuantizeTest, RefusesAQuantizedInput) {
  TempFile quantized("quantized");
  ASSERT_EQ(quantize(in_.path(), quantized.path(), "q8_0").exit_code, 0);
  for (const char* dtype : {"q8_0", "bf16"}) {
    expect_refused(quantize(quantized.path(), out_.path(), dtype),
                   {quantized.path() + ": tensor \"layers.0.mixer.query.weight\" is q8_0",
                    "already quantized: convert the f32 model"});
  }
}

TEST_F(AftQuantizeTest, RefusesADamagedOrMissingInput) {
  std::ifstream file(in_.path(), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 100);
  write_bytes(in_.path(), truncated);
  expect_refused(quantize(in_.path(), out_.path(), "q8_0"),
                 {in_.path() + ": tensor \"head.bias\"", "run past the end of the file"});

  bytes[bytes.size() - 10] ^= 0x04;
  write_bytes(in_.path(), bytes);
  expect_refused(quantize(in_.path(), out_.path(), "q8_0"),
                 {in_.path() + ": tensor \"head.bias\": checksum mismatch"});

  expect_refused(quantize("no-such-model.aft", out_.path(), "q8_0"), {"no-such-model.aft"});
}

TEST_F(AftQuantizeTest, RefusesNonFiniteAndOutOfRangeWeights) {
  std::vector<TestTensor> tensors = random_tensors(wide_config(), 5);
  for (TestTensor& t : tensors) {
    if (t.name == "layers.1.ffn.up.weight") t.values[70] = std::numeric_limits<float>::quiet_NaN();
  }
  write_model_file(in_.path(), wide_config(), tokenizer_for(256), tensors);
  for (const char* dtype : {"q8_0", "bf16"}) {
    expect_refused(quantize(in_.path(), out_.path(), dtype),
                   {in_.path() + ": tensor \"layers.1.ffn.up.weight\": value nan at index 70 "
                                 "cannot be converted"});
  }
  for (TestTensor& t : tensors) {
    if (t.name == "layers.1.ffn.up.weight") t.values[70] = 3.4e38f;  // above bf16's largest
  }
  write_model_file(in_.path(), wide_config(), tokenizer_for(256), tensors);
  expect_refused(quantize(in_.path(), out_.path(), "bf16"),
                 {"tensor \"layers.1.ffn.up.weight\": value 3.39999995e+38 at index 70 is beyond "
                  "bf16's range"});
  EXPECT_EQ(quantize(in_.path(), out_.path(), "q8_0").exit_code, 0);  // q8_0 has the range
}

TEST_F(AftQuantizeTest, RefusesAnUnwritableOrClashingOutput) {
  const std::string nowhere = out_.path() + ".d/out.aft";
  const CommandResult r = quantize(in_.path(), nowhere, "q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(nowhere + ".tmp (for " + nowhere + "): cannot create"), std::string::npos)
      << r.err;

  std::ifstream file(in_.path(), std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
  const std::filesystem::path in_path(in_.path());
  const std::string same_file = (in_path.parent_path() / "." / in_path.filename()).string();
  for (const std::string& args : {shell_quote(in_.path()) + " " + shell_quote(in_.path()),
                                  shell_quote(in_.path()) + " " + shell_quote(same_file)}) {
    const CommandResult same = run(args + " q8_0");
    EXPECT_EQ(same.exit_code, 1);
    EXPECT_NE(same.err.find("is the input file " + in_.path()), std::string::npos) << same.err;
  }
  // OUT's temporary name must not be the input either.
  const std::string stem = in_.path().substr(0, in_.path().size() - 4);
  std::filesystem::copy_file(in_.path(), stem + ".tmp");
  const CommandResult tmp = run(shell_quote(stem + ".tmp") + " " + shell_quote(stem) + " q8_0");
  EXPECT_EQ(tmp.exit_code, 1);
  EXPECT_NE(tmp.err.find(stem + ".tmp is the input file"), std::string::npos) << tmp.err;
  EXPECT_EQ(std::filesystem::file_size(stem + ".tmp"), before.size());
  std::filesystem::remove(stem + ".tmp");
  std::ifstream again(in_.path(), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()),
            before);

  // A pipe, a device or a directory at OUT, or a pipe at its temporary name: refused, left as
  // they are (the rename would replace them with a regular file; opening the pipe would block).
  const std::string pipe = out_.path() + ".pipe";
  ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0);
  const std::string directory = out_.path() + ".dir";
  std::filesystem::create_directory(directory);
  for (const std::string& target : {pipe, std::string("/dev/null"), directory}) {
    const CommandResult r = quantize(in_.path(), target, "q8_0");
    EXPECT_EQ(r.exit_code, 1) << target;
    EXPECT_NE(r.err.find(target + ": exists and is not a regular file"), std::string::npos)
        << r.err;
  }
  EXPECT_TRUE(std::filesystem::is_fifo(pipe));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  EXPECT_TRUE(std::filesystem::is_directory(directory));
  const std::string piped_out = out_.path() + ".2";
  ASSERT_EQ(mkfifo((piped_out + ".tmp").c_str(), 0600), 0);
  const CommandResult piped_temporary = quantize(in_.path(), piped_out, "q8_0");
  EXPECT_EQ(piped_temporary.exit_code, 1);
  EXPECT_NE(piped_temporary.err.find(piped_out + ".tmp: exists and is not a regular file"),
            std::string::npos)
      << piped_temporary.err;
  EXPECT_FALSE(std::filesystem::exists(piped_out));
  for (const std::string& made : {pipe, directory, piped_out + ".tmp"}) {
    std::filesystem::remove(made);
  }
}

TEST(AftQuantize, UsageErrorsAndHelp) {
  const CommandResult help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out.rfind("usage: aft-quantize IN.aft OUT.aft bf16|q8_0", 0), 0u) << help.out;
  const struct {
    std::string args, message;
  } cases[] = {
      {"", "expected IN.aft OUT.aft and a dtype, found 0 argument(s)"},
      {"a.aft b.aft", "found 2 argument(s)"},
      {"a.aft b.aft q8_0 extra", "found 4 argument(s)"},
      {"a.aft b.aft f32", "dtype: expected bf16 or q8_0, found \"f32\""},
      {"a.aft b.aft Q8_0", "dtype: expected bf16 or q8_0, found \"Q8_0\""},
      {"a.aft b.aft q8_0 --threads", "unknown option --threads"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = run(c.args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("usage: aft-quantize"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace aft::testing
