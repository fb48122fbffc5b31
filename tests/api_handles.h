// The C API in tests: owning handles (shared with the tools) and short calls that expect success.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/cli/api_call.h"

namespace aft::testing {

using ModelHandle = cli::Model;
using SessionHandle = cli::Session;
using SamplerHandle = cli::Sampler;

inline ModelHandle load_model(const std::string& path) {
  aft_model* model = nullptr;
  EXPECT_EQ(aft_model_load(path.c_str(), nullptr, &model), AFT_OK) << aft_last_error();
  return ModelHandle(model);
}

inline SessionHandle new_session(const aft_model* model, int threads = 1) {
  aft_session_params params = aft_session_default_params();
  params.n_threads = threads;
  aft_session* session = nullptr;
  EXPECT_EQ(aft_session_create(model, &params, &session), AFT_OK) << aft_last_error();
  return SessionHandle(session);
}

inline int32_t vocab_size(const aft_model* model) {
  aft_model_info info{};
  EXPECT_EQ(aft_model_get_info(model, &info), AFT_OK);
  return info.vocab_size;
}

// Evaluates tokens, returning the logits the mode asks for (empty for AFT_LOGITS_NONE).
inline std::vector<float> eval(aft_session* session, const aft_model* model,
                               const std::vector<int32_t>& tokens, aft_logits_mode mode) {
  const std::size_t rows = mode == AFT_LOGITS_ALL ? tokens.size() : mode == AFT_LOGITS_LAST;
  std::vector<float> logits(rows * static_cast<std::size_t>(vocab_size(model)));
  EXPECT_EQ(aft_session_eval(session, tokens.data(), tokens.size(), mode,
                             logits.empty() ? nullptr : logits.data()),
            AFT_OK)
      << aft_last_error();
  return logits;
}

// Pseudo-random token ids in [0, vocab).
inline std::vector<int32_t> token_sequence(std::size_t n, uint32_t vocab, uint32_t seed = 7) {
  std::vector<int32_t> tokens(n);
  uint32_t x = seed;
  for (auto& t : tokens) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>((x >> 8) % vocab);
  }
  return tokens;
}

// Logits of every position, each chunk of tokens in one call, in a fresh session.
inline std::vector<float> eval_chunks(const aft_model* model, const std::vector<int32_t>& tokens,
                                      const std::vector<std::size_t>& chunks, int threads = 1) {
  SessionHandle session = new_session(model, threads);
  std::vector<float> all;
  std::size_t done = 0;
  for (std::size_t n : chunks) {
    const std::vector<int32_t> chunk(tokens.begin() + done, tokens.begin() + done + n);
    const std::vector<float> logits = eval(session.get(), model, chunk, AFT_LOGITS_ALL);
    all.insert(all.end(), logits.begin(), logits.end());
    done += n;
  }
  EXPECT_EQ(done, tokens.size());
  return all;
}

// One token per call: the streaming accumulator, step by step.
inline std::vector<float> decode_each(const aft_model* model, const std::vector<int32_t>& tokens) {
  return eval_chunks(model, tokens, std::vector<std::size_t>(tokens.size(), 1));
}

}  // namespace aft::testing
