// The C API in tests: owning handles (shared with the tools) and short calls that expect success.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace aft::testing
