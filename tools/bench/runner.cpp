#include "tools/bench/runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace aft::bench {
namespace {

using Clock = std::chrono::steady_clock;

using cli::check;
using cli::Session;

Session new_session(const aft_model* model, int threads) {
  aft_session_params params = aft_session_default_params();
  params.n_threads = threads;
  aft_session* session = nullptr;
  check(aft_session_create(model, &params, &session), "creating a session");
  return Session(session);
}

}  // namespace

BenchModel::BenchModel(const std::string& path, const aft_model_params& params) : path_(path) {
  aft_model* model = nullptr;
  check(aft_model_load(path.c_str(), &params, &model), "loading the model");
  model_.reset(model);
  check(aft_model_get_info(model_.get(), &info_), "reading the model");
}

std::string BenchModel::weight_dtype() const {
  const char* dtype = aft_model_metadata_get(model_.get(), "metadata.dtype");
  return dtype ? dtype : "f32";
}

Footprint BenchModel::footprint(int32_t token) const {
  Footprint f;
  f.file_bytes = std::filesystem::file_size(path_);
  const Session session = new_session(model_.get(), 1);
  std::vector<float> logits(static_cast<std::size_t>(info_.vocab_size));
  check(aft_session_eval(session.get(), &token, 1, AFT_LOGITS_LAST, logits.data()), "decoding");
  f.state_bytes = aft_session_state_size(session.get());
  std::ifstream statm("/proc/self/statm");  // pages: total, resident, ...
  uint64_t total = 0, resident = 0;
  if (statm >> total >> resident) {
    f.resident_bytes = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  f.mapped = mapped_pages_of(path_);
  return f;
}

double BenchModel::time_prefill(const std::vector<int32_t>& tokens, std::size_t n,
                                int threads) const {
  const Session session = new_session(model_.get(), threads);
  std::vector<float> logits(static_cast<std::size_t>(info_.vocab_size));
  const auto start = Clock::now();
  check(aft_session_eval(session.get(), tokens.data(), n, AFT_LOGITS_LAST, logits.data()),
        "prefilling");
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double BenchModel::time_decode(const std::vector<int32_t>& tokens, std::size_t depth, std::size_t n,
                               std::size_t batch, int threads) const {
  std::vector<Session> sessions;
  std::vector<aft_session*> handles;
  for (std::size_t s = 0; s < batch; ++s) {
    sessions.push_back(new_session(model_.get(), threads));
    handles.push_back(sessions.back().get());
    if (depth > 0) {
      check(aft_session_eval(handles.back(), tokens.data(), depth, AFT_LOGITS_NONE, nullptr),
            "prefilling the context");
    }
  }
  std::vector<float> logits(batch * static_cast<std::size_t>(info_.vocab_size));
  std::vector<int32_t> step(batch);
  const auto start = Clock::now();
  for (std::size_t i = depth; i < depth + n; ++i) {
    if (batch == 1) {
      check(aft_session_eval(handles[0], &tokens[i], 1, AFT_LOGITS_LAST, logits.data()),
            "decoding");
    } else {
      std::fill(step.begin(), step.end(), tokens[i]);
      check(aft_batch_decode(handles.data(), step.data(), batch, AFT_LOGITS_LAST, logits.data()),
            "decoding a batch");
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace aft::bench
