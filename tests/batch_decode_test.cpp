// aft_batch_decode: N sessions advanced by one token each in one pass give every session the
// logits and the state it would have decoding alone, bit for bit; bad calls change no session.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace aft::testing {
namespace {

std::vector<uint8_t> saved_state(const aft_session* session) {
  std::vector<uint8_t> blob(aft_session_state_size(session));
  EXPECT_EQ(aft_session_state_save(session, blob.data(), blob.size(), nullptr), AFT_OK)
      << aft_last_error();
  return blob;
}

// Sessions at different points of different sequences (prompt lengths, 0 = a fresh session);
// `steps` tokens decoded in batches of all of them (batch_threads: the first session's threads)
// and, in a copy of each, alone. Logits and final states must be the same bits.
void expect_batch_equals_alone(const aft_model* model, const std::vector<std::size_t>& prompts,
                               std::size_t steps, int batch_threads, const std::string& where) {
  const std::size_t n = prompts.size();
  const auto vocab = static_cast<std::size_t>(vocab_size(model));
  std::vector<SessionHandle> batched, alone;
  std::vector<aft_session*> handles;
  for (std::size_t i = 0; i < n; ++i) {
    batched.push_back(new_session(model, i == 0 ? batch_threads : 1));
    alone.push_back(new_session(model, 1));
    const std::vector<int32_t> prompt = token_sequence(prompts[i], 256, 100 + i);
    if (!prompt.empty()) {
      eval(batched[i].get(), model, prompt, AFT_LOGITS_NONE);
      eval(alone[i].get(), model, prompt, AFT_LOGITS_NONE);
    }
    handles.push_back(batched[i].get());
  }
  for (std::size_t step = 0; step < steps; ++step) {
    const std::vector<int32_t> tokens = token_sequence(n, 256, 500 + step);
    std::vector<float> logits(n * vocab);
    ASSERT_EQ(aft_batch_decode(handles.data(), tokens.data(), n, AFT_LOGITS_LAST, logits.data()),
              AFT_OK)
        << aft_last_error();
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<float> want = eval(alone[i].get(), model, {tokens[i]}, AFT_LOGITS_LAST);
      for (std::size_t v = 0; v < vocab; ++v) {
        ASSERT_EQ(logits[i * vocab + v], want[v])
            << where << ", step " << step << ", session " << i << ", logit " << v;
      }
      ASSERT_EQ(aft_session_position(handles[i]), aft_session_position(alone[i].get()));
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(saved_state(handles[i]), saved_state(alone[i].get())) << where << ", session " << i;
  }
}

class BatchDecodeTest : public ::testing::TestWithParam<const char*> {
 protected:
  ModelHandle load(nlohmann::json config, const std::string& name = "model") {
    files_.emplace_back(name);
    write_random_model(files_.back().path(), config, 1, 0.1f);
    return load_model(files_.back().path());
  }
  nlohmann::json narrow_config() const {
    nlohmann::json config = tiny_config(GetParam());
    config["d_model"] = 80;  // a channel block of 64 and one of 16
    config["max_seq_len"] = 128;
    return config;
  }
  std::deque<TempFile> files_;  // (not movable)
};

// Positions 0, 1 and 3 (windows still filling), 40 and 70 (past a window, past a scan segment),
// batches split over 1 and 2 threads.
TEST_P(BatchDecodeTest, EachSessionGetsTheBitsOfDecodingAlone) {
  ModelHandle model = load(narrow_config());
  for (int threads : {1, 2}) {
    expect_batch_equals_alone(
        model.get(), {70, 0, 3, 40, 1}, 6, threads,
        std::string(GetParam()) + ", " + std::to_string(threads) + " threads");
  }
}

// Wide enough that every op is split (d = 768: 6 matmul column blocks, 12 channel blocks; 16 rows
// of norms and token shifts): in a batch's parallel region its ops' (row, block) units split among
// the threads, and each session still gets the bits of decoding alone.
TEST_P(BatchDecodeTest, WideModelsMatchTheOneRegionDecode) {
  nlohmann::json config = tiny_config(GetParam());
  config["d_model"] = 768;
  config["d_ff"] = 2048;
  config["n_layers"] = 1;
  if (config["mixer"] == "conv") config["n_heads"] = 8;
  ModelHandle model = load(config);
  aft_model_info info{};
  ASSERT_EQ(aft_model_get_info(model.get(), &info), AFT_OK);
  ASSERT_GE(info.n_matmul_parameters, int64_t{1} << 22);
  std::vector<std::size_t> prompts = {5, 0, 40};
  while (prompts.size() < 16) prompts.push_back(prompts.size() * 13 % 41);
  expect_batch_equals_alone(model.get(), prompts, 3, 2, GetParam());
}

// The same in one region with 8-bit and bf16 weights (by aft-quantize): a batch's rows are
// quantized (or rounded to bf16 on the matrix units) once, shared by the region's threads after
// a barrier, where a token decoded alone quantizes its row on each thread.
TEST_P(BatchDecodeTest, WideQuantizedModelsMatchDecodingAlone) {
  TempFile f32("batch_wide_f32");
  write_random_model(f32.path(), wide_config(GetParam()));
  for (const char* type : {"q8_0", "bf16"}) {
    files_.emplace_back(std::string("batch_wide_") + type);
    const CommandResult quantized =
        run_command(AFT_QUANTIZE_PATH,
                    shell_quote(f32.path()) + " " + shell_quote(files_.back().path()) + " " + type);
    ASSERT_EQ(quantized.exit_code, 0) << quantized.err;
    ModelHandle model = load_model(files_.back().path());
    expect_batch_equals_alone(model.get(), {5, 0, 40, 17}, 3, 2,
                              std::string(GetParam()) + ", " + type);
  }
}

// More sessions than a chunk of the graph's buffers holds (256 rows): two passes.
TEST_P(BatchDecodeTest, MoreSessionsThanAChunk) {
  ModelHandle model = load(narrow_config());
  std::vector<std::size_t> prompts(260);
  for (std::size_t i = 0; i < prompts.size(); ++i) prompts[i] = i % 7;
  expect_batch_equals_alone(model.get(), prompts, 2, 2, GetParam());
}

// Every bad call: a status naming the problem, and no session moved.
TEST_P(BatchDecodeTest, BadCallsChangeNoSession) {
  ModelHandle model = load(narrow_config());
  nlohmann::json other_config = narrow_config();
  ModelHandle other = load(other_config, "other");
  const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));
  SessionHandle a = new_session(model.get()), b = new_session(model.get()),
                c = new_session(model.get()), foreign = new_session(other.get());
  eval(a.get(), model.get(), token_sequence(126, 256), AFT_LOGITS_NONE);
  eval(b.get(), model.get(), token_sequence(3, 256), AFT_LOGITS_NONE);
  std::vector<float> logits(4 * vocab);
  const int32_t tokens[4] = {1, 2, 3, 4};

  struct Case {
    std::string what;
    std::vector<aft_session*> sessions;
    std::vector<int32_t> tokens;
    aft_logits_mode mode;
    aft_status status;
    std::string message;
  };
  std::vector<Case> cases = {
      {"no sessions", {}, {}, AFT_LOGITS_LAST, AFT_ERR_INVALID_ARGUMENT, "no sessions"},
      {"a NULL session",
       {b.get(), nullptr},
       {1, 2},
       AFT_LOGITS_LAST,
       AFT_ERR_INVALID_ARGUMENT,
       "sessions[1] is NULL"},
      {"a session twice",
       {b.get(), c.get(), b.get()},
       {1, 2, 3},
       AFT_LOGITS_LAST,
       AFT_ERR_INVALID_ARGUMENT,
       "twice"},
      {"another model's session",
       {b.get(), foreign.get()},
       {1, 2},
       AFT_LOGITS_LAST,
       AFT_ERR_INVALID_ARGUMENT,
       "sessions[1] is of another model"},
      {"a token outside the vocabulary",
       {b.get(), c.get()},
       {1, 256},
       AFT_LOGITS_LAST,
       AFT_ERR_OUT_OF_RANGE,
       "sessions[1]: token 256"},
      {"a negative token",
       {c.get(), b.get()},
       {-1, 2},
       AFT_LOGITS_LAST,
       AFT_ERR_OUT_OF_RANGE,
       "sessions[0]: token -1"},
      {"an unknown logits mode",
       {b.get()},
       {1},
       static_cast<aft_logits_mode>(3),
       AFT_ERR_INVALID_ARGUMENT,
       "logits mode 3"},
      {"a negative logits mode",
       {b.get()},
       {1},
       static_cast<aft_logits_mode>(-1),
       AFT_ERR_INVALID_ARGUMENT,
       "logits mode -1"},
  };
  ASSERT_EQ(aft_session_eval(a.get(), tokens, 2, AFT_LOGITS_NONE, nullptr), AFT_OK);
  aft_model_info info{};
  ASSERT_EQ(aft_model_get_info(model.get(), &info), AFT_OK);
  if (info.max_positions > 0) {  // AFT-local and -full: a is at its last position, 128
    cases.push_back({"a session at max_seq_len",
                     {b.get(), c.get(), a.get()},
                     {1, 2, 3},
                     AFT_LOGITS_LAST,
                     AFT_ERR_OUT_OF_RANGE,
                     "sessions[2]: position 128"});
  }
  for (const Case& t : cases) {
    EXPECT_EQ(aft_batch_decode(t.sessions.data(), t.tokens.data(), t.sessions.size(), t.mode,
                               logits.data()),
              t.status)
        << t.what;
    EXPECT_NE(std::string(aft_last_error()).find(t.message), std::string::npos)
        << t.what << ": " << aft_last_error();
    EXPECT_EQ(aft_session_position(a.get()), 128) << t.what;
    EXPECT_EQ(aft_session_position(b.get()), 3) << t.what;
    EXPECT_EQ(aft_session_position(c.get()), 0) << t.what;
  }
  aft_session* pair[2] = {b.get(), c.get()};
  EXPECT_EQ(aft_batch_decode(nullptr, tokens, 2, AFT_LOGITS_LAST, logits.data()),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_batch_decode(pair, nullptr, 2, AFT_LOGITS_LAST, logits.data()),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_batch_decode(pair, tokens, 2, AFT_LOGITS_LAST, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(aft_last_error()).find("logits is NULL"), std::string::npos);
  EXPECT_EQ(aft_session_position(b.get()), 3);
  EXPECT_EQ(aft_session_position(c.get()), 0);
  // Without logits the sessions still advance.
  EXPECT_EQ(aft_batch_decode(pair, tokens, 2, AFT_LOGITS_NONE, nullptr), AFT_OK);
  EXPECT_EQ(aft_session_position(b.get()), 4);
  EXPECT_EQ(aft_session_position(c.get()), 1);
}

INSTANTIATE_TEST_SUITE_P(Mixers, BatchDecodeTest,
                         ::testing::Values("simple", "local", "conv", "full", "decay",
                                           "decay_shift", "rwkv4"));

}  // namespace
}  // namespace aft::testing
