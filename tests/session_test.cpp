// Sessions: position limits, rejected input leaving the state untouched, chunked prompts, logits
// modes, reset, and numerical stability for extreme keys and biases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "api_handles.h"
#include "logit_error.h"
#include "long_run.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace aft::testing {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  ModelHandle write_and_load(const nlohmann::json& config, uint32_t seed = 1, float scale = 0.1f) {
    write_random_model(file_.path(), config, seed, scale);
    return load_model(file_.path());
  }
  TempFile file_;
};

TEST_F(SessionTest, AbsolutePositionModelsStopAtMaxSeqLen) {
  for (const char* mixer : {"local", "full"}) {
    ModelHandle model = write_and_load(tiny_config(mixer));  // max_seq_len 64
    SessionHandle session = new_session(model.get());
    eval(session.get(), model.get(), token_sequence(60, 256), AFT_LOGITS_NONE);
    const std::vector<int32_t> five = token_sequence(5, 256);
    std::vector<float> logits(256);
    EXPECT_EQ(aft_session_eval(session.get(), five.data(), 5, AFT_LOGITS_LAST, logits.data()),
              AFT_ERR_OUT_OF_RANGE);
    const std::string message = aft_last_error();
    EXPECT_NE(message.find("max_seq_len = 64"), std::string::npos) << message;
    EXPECT_NE(message.find("position 64"), std::string::npos) << message;
    EXPECT_EQ(aft_session_position(session.get()), 60) << "a rejected call must not advance";
    eval(session.get(), model.get(), token_sequence(4, 256), AFT_LOGITS_LAST);
    EXPECT_EQ(aft_session_position(session.get()), 64);
    EXPECT_EQ(aft_session_eval(session.get(), five.data(), 1, AFT_LOGITS_LAST, logits.data()),
              AFT_ERR_OUT_OF_RANGE);
  }
}

TEST_F(SessionTest, LearnedPositionsStopAtMaxSeqLen) {
  nlohmann::json config = tiny_config("simple");
  config["pos_encoding"] = "learned";
  ModelHandle model = write_and_load(config);
  SessionHandle session = new_session(model.get());
  const std::vector<int32_t> tokens = token_sequence(65, 256);
  EXPECT_EQ(aft_session_eval(session.get(), tokens.data(), tokens.size(), AFT_LOGITS_NONE, nullptr),
            AFT_ERR_OUT_OF_RANGE);
  EXPECT_EQ(aft_session_position(session.get()), 0);
}

// Relative-position models have no length limit; prompts longer than a chunk (512 tokens) are
// split, and every chunking gives the logits of decoding token by token.
TEST_F(SessionTest, LongPromptsBeyondMaxSeqLenAndChunks) {
  for (const char* mixer : {"simple", "conv", "decay", "decay_shift", "rwkv4"}) {
    ModelHandle model = write_and_load(tiny_config(mixer));
    const std::vector<int32_t> tokens = token_sequence(600, 256);
    SessionHandle session = new_session(model.get());
    const std::vector<float> prefill = eval(session.get(), model.get(), tokens, AFT_LOGITS_ALL);
    EXPECT_EQ(aft_session_position(session.get()), 600);
    EXPECT_LE(max_relative_error(prefill, decode_each(model.get(), tokens), 256), 1e-4) << mixer;
  }
}

TEST_F(SessionTest, RejectedTokenLeavesTheStateUnchanged) {
  ModelHandle model = write_and_load(tiny_config("local"));
  const std::vector<int32_t> prompt = token_sequence(10, 256);
  const std::vector<int32_t> next = token_sequence(3, 256, 99);

  SessionHandle clean = new_session(model.get());
  eval(clean.get(), model.get(), prompt, AFT_LOGITS_NONE);
  const std::vector<float> expected = eval(clean.get(), model.get(), next, AFT_LOGITS_ALL);

  SessionHandle session = new_session(model.get());
  eval(session.get(), model.get(), prompt, AFT_LOGITS_NONE);
  const std::vector<int32_t> bad = {5, 256, 7};
  EXPECT_EQ(aft_session_eval(session.get(), bad.data(), bad.size(), AFT_LOGITS_NONE, nullptr),
            AFT_ERR_OUT_OF_RANGE);
  const std::string message = aft_last_error();
  EXPECT_NE(message.find("token 256 at index 1"), std::string::npos) << message;
  const std::vector<int32_t> negative = {-1};
  EXPECT_EQ(aft_session_eval(session.get(), negative.data(), 1, AFT_LOGITS_NONE, nullptr),
            AFT_ERR_OUT_OF_RANGE);
  EXPECT_EQ(aft_session_position(session.get()), 10);
  EXPECT_EQ(eval(session.get(), model.get(), next, AFT_LOGITS_ALL), expected);
}

TEST_F(SessionTest, LogitsModesAgree) {
  ModelHandle model = write_and_load(tiny_config("conv"));
  const std::vector<int32_t> tokens = token_sequence(20, 256);
  SessionHandle all = new_session(model.get());
  const std::vector<float> rows = eval(all.get(), model.get(), tokens, AFT_LOGITS_ALL);
  SessionHandle last = new_session(model.get());
  const std::vector<float> final_row = eval(last.get(), model.get(), tokens, AFT_LOGITS_LAST);
  // One row goes through the GEMV kernel, many through oneDNN: equal up to rounding.
  EXPECT_LE(max_relative_error(final_row, std::vector<float>(rows.end() - 256, rows.end()), 256),
            1e-5);

  // NONE then LAST: the state advanced exactly as if the logits had been read.
  SessionHandle none = new_session(model.get());
  eval(none.get(), model.get(), std::vector<int32_t>(tokens.begin(), tokens.end() - 1),
       AFT_LOGITS_NONE);
  EXPECT_EQ(aft_session_position(none.get()), 19);
  const std::vector<float> after_none =
      eval(none.get(), model.get(), {tokens.back()}, AFT_LOGITS_LAST);
  EXPECT_LE(max_relative_error(after_none, final_row, 256), 1e-4);
}

TEST_F(SessionTest, ResetStartsOver) {
  ModelHandle model = write_and_load(tiny_config("full"));
  const std::vector<int32_t> tokens = token_sequence(30, 256);
  SessionHandle session = new_session(model.get());
  const std::vector<float> first = eval(session.get(), model.get(), tokens, AFT_LOGITS_ALL);
  ASSERT_EQ(aft_session_reset(session.get()), AFT_OK);
  EXPECT_EQ(aft_session_position(session.get()), 0);
  EXPECT_EQ(eval(session.get(), model.get(), tokens, AFT_LOGITS_ALL), first);
}

// Keys and position biases (the decay mixer's bonus) of +-80 and beyond: exp() of them overflows
// float32, the running-max accumulators must not; decays from e^-10 to e^10 a token. Logits stay
// finite and prefill agrees with decode.
TEST_F(SessionTest, ExtremeKeysAndBiasesStayFinite) {
  for (const char* mixer : {"simple", "local", "conv", "full", "decay", "decay_shift", "rwkv4"}) {
    const nlohmann::json config = tiny_config(mixer);
    std::vector<TestTensor> tensors = random_tensors(config, 3);
    for (TestTensor& t : tensors) {
      const bool key = t.name.find(".mixer.key.") != std::string::npos;
      const bool bias = t.name.find(".mixer.pos_bias") != std::string::npos ||
                        t.name.find(".mixer.bonus") != std::string::npos;
      const bool decay = t.name.find(".mixer.decay") != std::string::npos;
      for (std::size_t i = 0; decay && i < t.values.size(); ++i) t.values[i] *= 100.0f;
      for (std::size_t i = 0; key && i < t.values.size(); ++i)
        t.values[i] *= 2000.0f;  // |k| ~ 100+
      for (std::size_t i = 0; bias && i < t.values.size(); ++i) {
        t.values[i] = (i % 2 ? 80.0f : -80.0f) * (1.0f + t.values[i]);
      }
    }
    write_model_file(file_.path(), config, tokenizer_for(256), tensors);
    ModelHandle model = load_model(file_.path());
    const std::vector<int32_t> tokens = token_sequence(40, 256);
    SessionHandle session = new_session(model.get());
    const std::vector<float> prefill = eval(session.get(), model.get(), tokens, AFT_LOGITS_ALL);
    for (float logit : prefill) ASSERT_TRUE(std::isfinite(logit)) << mixer;
    EXPECT_LE(max_relative_error(prefill, decode_each(model.get(), tokens), 256), 1e-4) << mixer;
  }
}

// Models wide enough that every op's work is really split: d = 768 is 6 matmul column blocks
// (kMatmulBlockColumns = 128) and 12 mixer channel ranges, d_ff = 2048 is 16 blocks, so 3 threads
// get at least 2 blocks each. Prefill, decode and both after each other, for 1 to 4 threads; with
// f32 weights, and 1 against 3 threads with the same model's linear weights in bf16 and q8_0 (by
// aft-quantize: the same split, other GEMVs).
TEST_F(SessionTest, ThreadCountDoesNotChangeLogitsOfWideModels) {
  for (const char* mixer : {"simple", "local", "conv", "full", "decay_shift", "rwkv4"}) {
    nlohmann::json config = tiny_config(mixer);
    config["d_model"] = 768;
    config["d_ff"] = 2048;
    if (config["mixer"] == "conv") config["n_heads"] = 8;
    config["n_layers"] = 1;
    write_random_model(file_.path(), config, 1, 0.1f);
    for (const char* dtype : {"f32", "bf16", "q8_0"}) {
      TempFile quantized;
      std::string path = file_.path();
      if (std::string(dtype) != "f32") {
        path = quantized.path();
        const CommandResult result = run_command(
            AFT_QUANTIZE_PATH, shell_quote(file_.path()) + " " + shell_quote(path) + " " + dtype);
        ASSERT_EQ(result.exit_code, 0) << result.err;
      }
      ModelHandle model = load_model(path);
      const std::vector<int32_t> tokens = token_sequence(40, 256);
      auto run = [&](int threads) {
        SessionHandle session = new_session(model.get(), threads);
        std::vector<float> logits = eval(session.get(), model.get(), tokens, AFT_LOGITS_ALL);
        for (std::size_t i = 0; i < 3; ++i) {
          const std::vector<float> next =
              eval(session.get(), model.get(), {tokens[i]}, AFT_LOGITS_LAST);
          logits.insert(logits.end(), next.begin(), next.end());
        }
        return logits;
      };
      const std::vector<float> one = run(1);
      const bool f32 = std::string(dtype) == "f32";
      for (int threads : f32 ? std::vector<int>{2, 3, 4} : std::vector<int>{3}) {
        const std::vector<float> many = run(threads);
        ASSERT_EQ(one.size(), many.size());
        for (std::size_t i = 0; i < one.size(); ++i) {
          ASSERT_EQ(one[i], many[i])
              << mixer << ", " << dtype << ", " << threads << " threads, logit " << i;
        }
      }
    }
  }
}

// The prefill of a narrow model is a scan over 64-position segments (aft_mixer_op.cpp): d = 80 is
// 2 channel blocks (64 and 16), 300 tokens are 5 segments, so 1 to 4 threads each get at least 2
// of the 10 units. Windows of 4 and of 100 (longer than a segment: a segment's ring starts with
// positions of two segments before it), keys spread wide. Bit-identical for any thread count, and
// equal to decoding token by token within float rounding, in any chunking.
TEST_F(SessionTest, ThreadCountDoesNotChangeLogitsOfTheScan) {
  struct Case {
    const char* mixer;
    int window;
    float key_scale;  // of the key projection's random weights: 500 spreads keys by tens
  };
  for (const Case& c : {Case{"simple", 0, 1.0f}, Case{"local", 4, 1.0f}, Case{"local", 100, 500.0f},
                        Case{"conv", 4, 1.0f}, Case{"conv", 100, 500.0f}, Case{"decay", 0, 1.0f},
                        Case{"decay_shift", 0, 500.0f}, Case{"rwkv4", 0, 500.0f}}) {
    nlohmann::json config = tiny_config(c.mixer);
    config["d_model"] = 80;
    config["window"] = c.window;
    config["max_seq_len"] = 512;
    std::vector<TestTensor> tensors = random_tensors(config, 3);
    for (TestTensor& t : tensors) {
      if (t.name.find(".mixer.key.") == std::string::npos) continue;
      for (float& v : t.values) v *= c.key_scale;
    }
    write_model_file(file_.path(), config, tokenizer_for(256), tensors);
    ModelHandle model = load_model(file_.path());
    const std::vector<int32_t> tokens = token_sequence(300, 256);
    const std::vector<std::vector<std::size_t>> chunkings = {
        {300}, {65, 1, 130, 104}, {64, 64, 172}};
    const std::vector<float> decoded = decode_each(model.get(), tokens);
    const std::string where = std::string(c.mixer) + " window " + std::to_string(c.window);
    for (const std::vector<std::size_t>& chunks : chunkings) {
      const std::vector<float> one = eval_chunks(model.get(), tokens, chunks, 1);
      for (float logit : decoded) ASSERT_TRUE(std::isfinite(logit)) << where << " decode";
      for (float logit : one) ASSERT_TRUE(std::isfinite(logit)) << where;
      EXPECT_LE(max_relative_error(one, decoded, 256), 1e-4)
          << where << ", chunks of " << ::testing::PrintToString(chunks);
      for (int threads : {2, 3, 4}) {
        const std::vector<float> many = eval_chunks(model.get(), tokens, chunks, threads);
        ASSERT_EQ(one.size(), many.size());
        for (std::size_t i = 0; i < one.size(); ++i) {
          ASSERT_EQ(one[i], many[i]) << where << ", " << threads << " threads, logit " << i;
        }
      }
    }
  }
}

// A 1-layer model's logits computed in float64 from its weights, when the mixer's sums depend on
// the tokens only through how often each was seen: no positional encoding, so each token has one
// key and value. `global[i][c]`: the weight of token i's positions outside the window in channel c
// (how often it was seen there, or for the decay mixer the sum of exp(-age lambda_c));
// `window`: the tokens inside it, newest first (distance 0 is the query's own position; the decay
// mixer's window is that position alone, with the bonus as its bias).
class ExactOneLayerModel {
 public:
  ExactOneLayerModel(const nlohmann::json& config, const std::vector<TestTensor>& tensors)
      : d_(config["d_model"]),
        d_ff_(config["d_ff"]),
        vocab_(config["vocab_size"]),
        heads_(config["mixer"] == "conv" ? int(config["n_heads"]) : 1),
        window_(config["window"]),
        decay_(config["mixer"] == "decay"),
        eps_(config["norm_eps"]) {
    for (const TestTensor& t : tensors) weights_[t.name] = {t.values.begin(), t.values.end()};
    const std::size_t key_width = config["mixer"] == "conv" ? heads_ : d_;
    for (std::size_t i = 0; i < vocab_; ++i) {
      const std::vector<double> embedded(weights_["embed.weight"].begin() + i * d_,
                                         weights_["embed.weight"].begin() + (i + 1) * d_);
      const std::vector<double> h = norm("layers.0.norm1", embedded);
      embedded_.push_back(embedded);
      q_.push_back(linear("layers.0.mixer.query", h, d_));
      k_.push_back(linear("layers.0.mixer.key", h, key_width));
      v_.push_back(linear("layers.0.mixer.value", h, d_));
    }
  }

  std::vector<double> logits(const std::vector<std::vector<double>>& global,
                             const std::vector<int32_t>& window, int32_t token) {
    std::vector<double> y(d_);
    for (std::size_t c = 0; c < d_; ++c) {
      const std::size_t head = c / (d_ / heads_);
      const auto key = [&](std::size_t i) { return k_[i][heads_ == 1 ? c : head]; };
      std::vector<double> weight, logit, value;
      for (std::size_t i = 0; i < vocab_; ++i) {
        if (global[i][c] == 0.0) continue;
        weight.push_back(global[i][c]);
        logit.push_back(key(i));
        value.push_back(v_[i][c]);
      }
      for (std::size_t dist = 0; dist < window.size(); ++dist) {
        weight.push_back(1.0);
        logit.push_back(key(window[dist]) +
                        (decay_ ? weights_["layers.0.mixer.bonus"][c]
                                : weights_["layers.0.mixer.pos_bias"][head * window_ + dist]));
        value.push_back(v_[window[dist]][c]);
      }
      const double top = *std::max_element(logit.begin(), logit.end());
      double num = 0.0, den = 0.0;
      for (std::size_t j = 0; j < logit.size(); ++j) {
        num += weight[j] * std::exp(logit[j] - top) * value[j];
        den += weight[j] * std::exp(logit[j] - top);
      }
      y[c] = num / den / (1.0 + std::exp(-q_[token][c]));
    }
    std::vector<double> x = linear("layers.0.mixer.output", y, d_);
    for (std::size_t c = 0; c < d_; ++c) x[c] += embedded_[token][c];
    std::vector<double> up = linear("layers.0.ffn.up", norm("layers.0.norm2", x), d_ff_);
    for (double& u : up) u = std::max(u, 0.0);
    const std::vector<double> down = linear("layers.0.ffn.down", up, d_);
    for (std::size_t c = 0; c < d_; ++c) x[c] += down[c];
    return linear("head", norm("norm", x), vocab_);
  }

 private:
  std::vector<double> norm(const std::string& name, const std::vector<double>& x) {
    double mean = 0.0, var = 0.0;
    for (double v : x) mean += v / x.size();
    for (double v : x) var += (v - mean) * (v - mean) / x.size();
    std::vector<double> y(x.size());
    for (std::size_t c = 0; c < x.size(); ++c) {
      y[c] = (x[c] - mean) / std::sqrt(var + eps_) * weights_[name + ".weight"][c] +
             weights_[name + ".bias"][c];
    }
    return y;
  }
  std::vector<double> linear(const std::string& name, const std::vector<double>& x,
                             std::size_t rows) {
    std::vector<double> y(weights_[name + ".bias"]);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < x.size(); ++c)
        y[r] += weights_[name + ".weight"][r * x.size() + c] * x[c];
    }
    return y;
  }

  std::size_t d_, d_ff_, vocab_, heads_, window_;
  bool decay_;
  double eps_;
  std::map<std::string, std::vector<double>> weights_;
  std::vector<std::vector<double>> embedded_, q_, k_, v_;
};

// The mixer's sums over 2^24 positions (prompts of 2^16 tokens) against float64 logits from the
// token counts, at 2^20, 2^22 and 2^24 positions, for AFT-simple, AFT-conv and the decay mixer
// (its decays from 2^-4 to 2^-19 a token, so that the slowest channels remember about 2^19
// positions: the per-token weights, summed in float64 here, are a geometric series). Keys spread
// over about +-3, so that the sums mix weights from 1 down to e^-6. Measured: largest error 4.4e-7;
// with float32 sums (state format 2) 2.4e-3, 9.5e-3 and 1.9e-2 (simple), 1.9e-3, 9.0e-3 and
// 1.7e-2 (conv). Slow runs (long_run.h), which check memory and undefined behaviour rather than the
// sums' length, stop at 2^18 (at 2^20 under ASan+UBSan: 56 s for simple, 93 s for conv). One test
// per mixer: both in one took 10 s alone and 25 to 36 s beside other tests under ctest -j 2 on 2
// cores.
class LongSequenceTest : public SessionTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(LongSequenceTest, LogitsStayExactOverLongSequences) {
  const char* mixer = GetParam();
  nlohmann::json config = tiny_config(mixer);
  config["vocab_size"] = 8;
  config["n_layers"] = 1;
  config["d_ff"] = 16;
  config["activation"] = "relu";
  config["pos_encoding"] = "none";
  config["embed_scale"] = 1.0;
  std::vector<TestTensor> tensors = random_tensors(config, 3, 0.5f);
  const bool decay = config["mixer"] == "decay";
  std::vector<double> kept(config["d_model"].get<std::size_t>(), 1.0);  // exp(-lambda_c)
  for (TestTensor& t : tensors) {
    if (t.name != "layers.0.mixer.decay") continue;
    for (std::size_t c = 0; c < t.values.size(); ++c) {
      t.values[c] = static_cast<float>(-std::log(2.0) * double(4 + c % 16));
      kept[c] = std::exp(-std::exp(double(t.values[c])));
    }
  }
  write_model_file(file_.path(), config, tokenizer_for(8), tensors);
  ModelHandle model = load_model(file_.path());
  ExactOneLayerModel exact(config, tensors);
  const std::size_t window = decay ? 1 : config["window"].get<std::size_t>();
  SessionHandle session = new_session(model.get());
  std::vector<std::vector<double>> global(8, std::vector<double>(kept.size()));
  std::vector<int32_t> chunk(std::size_t{1} << 16), recent;  // recent: newest first
  uint32_t x = 11;
  std::size_t position = 0;
  // Slow runs check at 2^18: 4 prompts, each continuing the state of the one before.
  std::vector<std::size_t> checkpoints =
      test_data::slow_test_run()
          ? std::vector<std::size_t>{std::size_t{1} << 18}
          : std::vector<std::size_t>{std::size_t{1} << 20, std::size_t{1} << 22,
                                     std::size_t{1} << 24};
  // AFT_LONG_SEQUENCE_LOG2=N goes on to 2^26, 2^28, ... 2^N (docs/reliability.md: 2^30 takes
  // minutes a mixer, too long for every run).
  if (const char* log2 = std::getenv("AFT_LONG_SEQUENCE_LOG2");
      log2 && !test_data::slow_test_run()) {
    for (int e = 26; e <= std::min(std::atoi(log2), 40); e += 2)
      checkpoints.push_back(std::size_t{1} << e);
  }
  for (std::size_t checkpoint : checkpoints) {
    while (position < checkpoint) {
      const std::size_t n = std::min(chunk.size(), checkpoint - position);
      for (std::size_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        chunk[i] = static_cast<int32_t>(x >> 29);
        recent.insert(recent.begin(), chunk[i]);
        if (recent.size() > window) {
          for (std::size_t c = 0; decay && c < kept.size(); ++c) {
            for (std::vector<double>& weights : global) weights[c] *= kept[c];
          }
          for (double& weight : global[recent.back()]) weight += 1.0;
          recent.pop_back();
        }
      }
      const bool last = position + n == checkpoint;
      const std::vector<float> got =
          eval(session.get(), model.get(), {chunk.begin(), chunk.begin() + n},
               last ? AFT_LOGITS_LAST : AFT_LOGITS_NONE);
      position += n;
      if (!last) continue;
      const std::vector<double> want = exact.logits(global, recent, chunk[n - 1]);
      double error = 0.0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        error = std::max(error, std::fabs(got[i] - want[i]));
      }
      EXPECT_LE(error, 1e-5) << mixer << " at position " << position;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, LongSequenceTest, ::testing::Values("simple", "conv", "decay"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST_F(SessionTest, BadCallsAreRejected) {
  ModelHandle model = write_and_load(tiny_config("simple"));
  SessionHandle session = new_session(model.get());
  const int32_t token = 1;
  float logits[256];
  EXPECT_EQ(aft_session_eval(session.get(), &token, 0, AFT_LOGITS_LAST, logits),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_eval(session.get(), nullptr, 1, AFT_LOGITS_LAST, logits),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_eval(session.get(), &token, 1, AFT_LOGITS_LAST, nullptr),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_eval(session.get(), &token, 1, static_cast<aft_logits_mode>(7), logits),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_position(session.get()), 0);
}

}  // namespace
}  // namespace aft::testing
