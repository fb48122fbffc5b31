// Many sessions of one model on several application threads at once, each thread running its own
// mixed script (prompts, single tokens, batch decodes, resets, state save and restore, forks) on
// its own sessions: every logit equals the same script run alone on one thread. It runs in every
// build; in the ThreadSanitizer build (tests/run.sh) it is the race detector's workload.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"

namespace aft::testing {
namespace {

constexpr std::size_t kWorkers = 4;
constexpr std::size_t kSessions = 3;  // per worker
constexpr std::size_t kSteps = 60;    // per worker

// Runs worker `seed`'s script and returns every logit it produced, in order. n_threads: each
// session's thread count (0: automatic, shared among the calls computing at once).
std::vector<float> run_script(const aft_model* model, uint32_t seed, int n_threads) {
  aft_model_info info{};
  EXPECT_EQ(aft_model_get_info(model, &info), AFT_OK);
  const int64_t limit = info.max_positions > 0 ? info.max_positions : 1 << 20;
  const auto vocab = static_cast<uint32_t>(info.vocab_size);
  std::vector<SessionHandle> sessions;
  for (std::size_t s = 0; s < kSessions; ++s) sessions.push_back(new_session(model, n_threads));
  std::mt19937 rng(seed);
  std::vector<float> log;
  auto room = [&](std::size_t s) { return limit - aft_session_position(sessions[s].get()); };
  for (std::size_t step = 0; step < kSteps; ++step) {
    const std::size_t s = rng() % kSessions, other = (s + 1 + rng() % (kSessions - 1)) % kSessions;
    switch (rng() % 6) {
      case 0: {  // a prompt chunk (the prefill paths, the scan included for long ones)
        const std::size_t n = 1 + rng() % 80;
        if (room(s) < static_cast<int64_t>(n)) {
          EXPECT_EQ(aft_session_reset(sessions[s].get()), AFT_OK);
        }
        const auto logits =
            eval(sessions[s].get(), model, token_sequence(n, vocab, rng()), AFT_LOGITS_LAST);
        log.insert(log.end(), logits.begin(), logits.end());
        break;
      }
      case 1: {  // one token
        if (room(s) < 1) {
          EXPECT_EQ(aft_session_reset(sessions[s].get()), AFT_OK);
        }
        const auto logits =
            eval(sessions[s].get(), model, {static_cast<int32_t>(rng() % vocab)}, AFT_LOGITS_LAST);
        log.insert(log.end(), logits.begin(), logits.end());
        break;
      }
      case 2: {  // a token for every session at once
        std::vector<aft_session*> all;
        std::vector<int32_t> tokens;
        for (std::size_t i = 0; i < kSessions; ++i) {
          if (room(i) < 1) {
            EXPECT_EQ(aft_session_reset(sessions[i].get()), AFT_OK);
          }
          all.push_back(sessions[i].get());
          tokens.push_back(static_cast<int32_t>(rng() % vocab));
        }
        std::vector<float> logits(kSessions * vocab);
        EXPECT_EQ(
            aft_batch_decode(all.data(), tokens.data(), kSessions, AFT_LOGITS_LAST, logits.data()),
            AFT_OK)
            << aft_last_error();
        log.insert(log.end(), logits.begin(), logits.end());
        break;
      }
      case 3:
        EXPECT_EQ(aft_session_reset(sessions[s].get()), AFT_OK);
        break;
      case 4: {  // another session continues from this one's state
        std::vector<unsigned char> state(aft_session_state_size(sessions[s].get()));
        EXPECT_EQ(aft_session_state_save(sessions[s].get(), state.data(), state.size(), nullptr),
                  AFT_OK);
        EXPECT_EQ(aft_session_state_load(sessions[other].get(), state.data(), state.size()), AFT_OK)
            << aft_last_error();
        break;
      }
      default: {  // another session is replaced by a fork of this one
        aft_session* fork = nullptr;
        EXPECT_EQ(aft_session_fork(sessions[s].get(), &fork), AFT_OK) << aft_last_error();
        sessions[other] = SessionHandle(fork);
        break;
      }
    }
  }
  return log;
}

class StressTest : public ::testing::TestWithParam<const char*> {};

TEST_P(StressTest, ConcurrentMixedScriptsGetTheBitsOfOneThread) {
  TempFile file("stress");
  nlohmann::json config = tiny_config(GetParam());
  config["d_model"] = 80;       // two channel blocks: the mixer splits its work
  config["max_seq_len"] = 256;  // room for prompts past a segment of the prefill's scan
  write_random_model(file.path(), config);
  ModelHandle model = load_model(file.path());
  std::vector<std::vector<float>> want;
  for (uint32_t w = 0; w < kWorkers; ++w) want.push_back(run_script(model.get(), 100 + w, 1));
  for (int n_threads : {0, 2}) {
    std::vector<std::vector<float>> got(kWorkers);
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] { got[w] = run_script(model.get(), 100 + w, n_threads); });
    }
    for (std::thread& worker : workers) worker.join();
    for (std::size_t w = 0; w < kWorkers; ++w) {
      ASSERT_EQ(got[w].size(), want[w].size());
      EXPECT_TRUE(got[w] == want[w]) << "worker " << w << ", n_threads " << n_threads;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, StressTest,
                         ::testing::Values("simple", "local", "conv", "full", "decay",
                                           "decay_shift", "rwkv4"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace aft::testing
