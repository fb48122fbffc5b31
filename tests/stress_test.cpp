// Many sessions of one model on several application threads at once, each thread running its own
// mixed script (prompts, single tokens, batch decodes, resets, state save and restore, forks) on
// its own sessions: every logit equals the same script run alone on one thread; and two engines
// sharing one core. It runs in every build; in the ThreadSanitizer build (tests/run.sh) it is the
// race detector's workload.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
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

// Two engines (models loaded apart, each session on 2 threads) decoding at once with every thread
// on one CPU: each waiting thread must hand the core to the threads it waits for, or the two
// would stall each other for whole time slices. Asserts progress and bits, not time: the first to
// finish saw the other advance, and each got the tokens' logits it gets alone.
TEST(SharedCoresTest, TwoEnginesOnOneCoreBothProgress) {
  TempFile file("shared");
  // Wide: every op of a decoded token (one team run) splits its work, a barrier per op.
  nlohmann::json config = wide_config("local");
  config["max_seq_len"] = 128;
  write_random_model(file.path(), config);
  constexpr std::size_t kPrompt = 48, kTokens = 60;
  const std::vector<int32_t> prompt = token_sequence(kPrompt, 256, 7);
  auto run = [&](const aft_model* model, std::atomic<std::size_t>* done) {
    SessionHandle session = new_session(model, 2);
    std::vector<float> log = eval(session.get(), model, prompt, AFT_LOGITS_LAST);
    for (std::size_t t = 0; t < kTokens; ++t) {
      const int32_t token = static_cast<int32_t>((t * 37) % 256);
      const std::vector<float> logits = eval(session.get(), model, {token}, AFT_LOGITS_LAST);
      log.insert(log.end(), logits.begin(), logits.end());
      if (done) done->store(t + 1);
    }
    return log;
  };
  ModelHandle first = load_model(file.path());
  ModelHandle second = load_model(file.path());
  const std::vector<float> want = run(first.get(), nullptr);

  cpu_set_t allowed, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  CPU_ZERO(&one);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  CPU_SET(cpu, &one);
  std::atomic<std::size_t> done[2] = {{0}, {0}};
  std::atomic<int> ready{0};
  std::atomic<int> finished_first{-1};
  std::size_t other_when_first_finished = 0;
  std::vector<float> got[2];
  auto engine = [&](int e, const aft_model* model) {
    // A new thread, so a new team: its workers inherit this thread's CPU.
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    got[e] = run(model, &done[e]);
    int none = -1;
    if (finished_first.compare_exchange_strong(none, e)) {
      other_when_first_finished = done[1 - e].load();
    }
  };
  std::thread a(engine, 0, first.get());
  std::thread b(engine, 1, second.get());
  a.join();
  b.join();
  EXPECT_TRUE(got[0] == want);
  EXPECT_TRUE(got[1] == want);
  EXPECT_GT(other_when_first_finished, 0u)
      << "engine " << finished_first.load() << " ran to its end while the other made no progress";
}

INSTANTIATE_TEST_SUITE_P(Mixers, StressTest,
                         ::testing::Values("simple", "local", "conv", "full", "decay",
                                           "decay_shift", "rwkv4"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace aft::testing
