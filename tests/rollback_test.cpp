// A call that fails part-way leaves its sessions as they were (aft.h: "on any error the session
// is unchanged"). The failure is out of memory: this program replaces operator new, and makes
// allocation k of the call fail, for k = 1, 2, ... until the call needs fewer. Each failure point
// starts from new sessions, whose scratch (engine/runtime/scratch.h) is allocated anew:
// allocations, and so failures, happen all along the graph, after mixers have changed their state.
// The call also runs on a new thread each time, so that nothing a thread keeps carries over. After
// each failure: the status is AFT_ERR_OUT_OF_MEMORY, every session's state bytes are the ones
// before the call, and the same call then gives the logits of a call that never failed. Under the
// sanitizers and emulation (about 20 times slower) every 29th allocation fails instead.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "api_handles.h"
#include "long_run.h"
#include "model_file_writer.h"
#include "run_command.h"

namespace {

std::atomic<bool> armed{false};
std::atomic<long> allocations{0};
std::atomic<long> fail_at{0};

void* allocate(std::size_t size, std::size_t alignment) {
  if (armed.load(std::memory_order_relaxed) && ++allocations == fail_at.load()) {
    throw std::bad_alloc();
  }
  if (size == 0) size = 1;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Not inlined: GCC would see free() of a new-expression's pointer and warn of a mismatch.
[[gnu::noinline]] void release(void* p) noexcept { std::free(p); }

}  // namespace

void* operator new(std::size_t size) { return allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  return allocate(size, static_cast<std::size_t>(alignment));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }

namespace aft::testing {
namespace {

using Sessions = std::vector<SessionHandle>;
// Makes the sessions a call starts from (the same every time).
using MakeSessions = std::function<Sessions()>;
// The call: its status, its logits into the vector; the library call itself through counted().
using Call = std::function<aft_status(Sessions&, std::vector<float>&)>;

struct Outcome {
  aft_status status;
  std::string error;
};

// Runs library_call with its allocations counted, the one numbered fail_at failing.
template <class LibraryCall>
aft_status counted(const LibraryCall& library_call) {
  allocations = 0;
  armed = fail_at > 0;
  const aft_status status = library_call();
  armed = false;
  return status;
}

// Runs call on a new thread, allocation number k (from 1) of its library call failing; k = 0:
// none fails.
Outcome run_failing(long k, const Call& call, Sessions& sessions, std::vector<float>& logits) {
  Outcome outcome{};
  fail_at = k;
  std::thread thread([&] {
    outcome.status = call(sessions, logits);
    if (outcome.status != AFT_OK) outcome.error = aft_last_error();
  });
  thread.join();
  return outcome;
}

std::vector<std::vector<unsigned char>> state_bytes(const Sessions& sessions) {
  std::vector<std::vector<unsigned char>> all;
  for (const SessionHandle& s : sessions) {
    std::vector<unsigned char> bytes(aft_session_state_size(s.get()));
    EXPECT_EQ(aft_session_state_save(s.get(), bytes.data(), bytes.size(), nullptr), AFT_OK);
    all.push_back(bytes);
  }
  return all;
}

// Sessions made anew from saved states, rather than by evaluating their prefix again before every
// failure point.
MakeSessions restoring(const aft_model* model, int threads,
                       std::vector<std::vector<unsigned char>> states) {
  return [model, threads, states] {
    Sessions sessions;
    for (const std::vector<unsigned char>& state : states) {
      sessions.push_back(new_session(model, threads));
      EXPECT_EQ(aft_session_state_load(sessions.back().get(), state.data(), state.size()), AFT_OK);
    }
    return sessions;
  };
}

// Fails allocation k = 1, 2, ... of the call until it succeeds; returns how many failed.
int expect_failures_change_nothing(const MakeSessions& make, const Call& call) {
  std::vector<float> want;
  {
    Sessions sessions = make();
    const Outcome ok = run_failing(0, call, sessions, want);
    EXPECT_EQ(ok.status, AFT_OK) << ok.error;
  }
  int failures = 0;
  const long stride = aft::test_data::slow_test_run() ? 29 : 1;
  for (long k = 1; k < 100000; k += stride) {
    Sessions sessions = make();
    const auto before = state_bytes(sessions);
    std::vector<float> got(want.size());
    const Outcome failed = run_failing(k, call, sessions, got);
    if (failed.status == AFT_OK) {
      EXPECT_TRUE(got == want) << "allocation " << k << " was past the call's last";
      break;
    }
    ++failures;
    EXPECT_EQ(failed.status, AFT_ERR_OUT_OF_MEMORY) << "allocation " << k << ": " << failed.error;
    EXPECT_TRUE(state_bytes(sessions) == before) << "allocation " << k << ": " << failed.error;
    std::vector<float> again(want.size());
    const Outcome retried = run_failing(0, call, sessions, again);
    EXPECT_EQ(retried.status, AFT_OK) << retried.error;
    EXPECT_TRUE(again == want) << "after allocation " << k << " failed";
    if (::testing::Test::HasFailure()) break;
  }
  return failures;
}

Call eval_call(std::vector<int32_t> tokens, aft_logits_mode mode, std::size_t vocab) {
  return [tokens, mode, vocab](Sessions& sessions, std::vector<float>& logits) {
    logits.resize((mode == AFT_LOGITS_ALL ? tokens.size() : 1) * vocab);
    return counted([&] {
      return aft_session_eval(sessions[0].get(), tokens.data(), tokens.size(), mode, logits.data());
    });
  };
}

// One token for each session, 11 apart, in one aft_batch_decode.
Call batch_call(std::size_t vocab) {
  return [vocab](Sessions& sessions, std::vector<float>& logits) {
    std::vector<aft_session*> all;
    std::vector<int32_t> tokens;
    for (SessionHandle& s : sessions) {
      all.push_back(s.get());
      tokens.push_back(static_cast<int32_t>(11 * all.size() % 256));
    }
    logits.resize(all.size() * vocab);
    return counted([&] {
      return aft_batch_decode(all.data(), tokens.data(), all.size(), AFT_LOGITS_LAST,
                              logits.data());
    });
  };
}

struct Case {
  const char* mixer;
  int threads;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.mixer << ", " << c.threads << " threads"; }

class RollbackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    nlohmann::json config = tiny_config(GetParam().mixer);
    config["d_model"] = 80;       // two channel blocks
    config["max_seq_len"] = 512;  // room for a prompt of two chunks
    write_random_model(file_.path(), config);
    model_ = load_model(file_.path());
    vocab_ = static_cast<std::size_t>(vocab_size(model_.get()));
  }

  // A session at position `at` (its window full for the local and conv models).
  MakeSessions at(std::size_t at, std::size_t count = 1) const {
    Sessions sessions;
    for (std::size_t i = 0; i < count; ++i) {
      sessions.push_back(new_session(model_.get(), GetParam().threads));
      if (at > 0)
        eval(sessions.back().get(), model_.get(), token_sequence(at, 256, 3 + i), AFT_LOGITS_NONE);
    }
    return restoring(model_.get(), GetParam().threads, state_bytes(sessions));
  }

  TempFile file_{"rollback"};
  ModelHandle model_;
  std::size_t vocab_ = 0;
};

TEST_P(RollbackTest, AFailedPromptChangesNothing) {
  EXPECT_GT(expect_failures_change_nothing(
                at(0), eval_call(token_sequence(40, 256, 5), AFT_LOGITS_ALL, vocab_)),
            0);
  // Two chunks (the second through the prefill's scan), continuing a sequence.
  EXPECT_GT(expect_failures_change_nothing(
                at(9), eval_call(token_sequence(300, 256, 6), AFT_LOGITS_LAST, vocab_)),
            0);
}

TEST_P(RollbackTest, AFailedTokenChangesNothing) {
  EXPECT_GT(expect_failures_change_nothing(
                at(30), eval_call(token_sequence(1, 256, 8), AFT_LOGITS_LAST, vocab_)),
            0);
}

TEST_P(RollbackTest, AFailedBatchDecodeChangesNoSession) {
  EXPECT_GT(expect_failures_change_nothing(at(20, 3), batch_call(vocab_)), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Mixers, RollbackTest,
    ::testing::Values(Case{"simple", 1}, Case{"local", 1}, Case{"conv", 1}, Case{"full", 1},
                      Case{"simple", 2}, Case{"local", 2}, Case{"conv", 2}, Case{"full", 2},
                      Case{"decay", 1}, Case{"decay_shift", 1}, Case{"decay", 2},
                      Case{"decay_shift", 2}, Case{"rwkv4", 1}, Case{"rwkv4", 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.mixer) + "_" + std::to_string(info.param.threads) + "_threads";
    });

// q8_0 weights (by aft-quantize): a decoded token's row is quantized into its thread's scratch,
// which grows at the first product wider than the model, the feed-forward's second, after the
// first layer's mixer changed its state. Allocations fail there too, where a one-token call of the
// f32 models above allocates nothing after the first mixer for AFT-simple, AFT-full and the decay
// mixers. Without the restore of the sums (m, a, b), this test fails for AFT-simple, AFT-local and
// the decay mixers, where RollbackTest's one-token case fails for AFT-local only.
TEST(RollbackQuantized, AFailedTokenChangesNothing) {
  for (const char* mixer : {"simple", "local", "conv", "full", "decay", "decay_shift", "rwkv4"}) {
    nlohmann::json config = tiny_config(mixer);
    config["d_model"] = 96;  // whole q8_0 blocks, two channel blocks
    config["d_ff"] = 192;
    TempFile f32("rollback_f32"), q8("rollback_q8_0");
    write_random_model(f32.path(), config);
    const CommandResult quantized = run_command(
        AFT_QUANTIZE_PATH, shell_quote(f32.path()) + " " + shell_quote(q8.path()) + " q8_0");
    ASSERT_EQ(quantized.exit_code, 0) << quantized.err;
    ModelHandle model = load_model(q8.path());
    const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(mixer) + ", " + std::to_string(threads) + " threads");
      Sessions prefix;
      prefix.push_back(new_session(model.get(), threads));
      eval(prefix.back().get(), model.get(), token_sequence(30, 256, 3), AFT_LOGITS_NONE);
      EXPECT_GT(expect_failures_change_nothing(
                    restoring(model.get(), threads, state_bytes(prefix)),
                    eval_call(token_sequence(1, 256, 8), AFT_LOGITS_LAST, vocab)),
                0);
    }
  }
}

// Decoded tokens that raise their window's frame: the rescaled scaled keys are saved column by
// column as the mixer raises them (StateRollback::save_scaled_lanes). The frame rises with
// headroom (kAftWindowHeadroom), so small keys seldom raise it once a sequence is under way: here
// an AFT-local model's key projections are scaled up, and its keys spread far beyond the headroom.
// Without that save, this test fails at 1 and 2 threads.
TEST(RollbackFrameRaise, AFailedTokenChangesNothing) {
  nlohmann::json config = tiny_config("local");
  config["d_model"] = 80;
  std::vector<TestTensor> tensors = random_tensors(config, 1);
  for (TestTensor& t : tensors) {
    if (t.name.find(".key.") == std::string::npos) continue;
    for (float& v : t.values) v *= 40.0f;
  }
  TempFile file("rollback_raise");
  write_model_file(file.path(), config, tokenizer_for(config["vocab_size"]), tensors);
  ModelHandle model = load_model(file.path());
  const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    Sessions prefix;
    for (uint32_t i = 0; i < 3; ++i) {
      prefix.push_back(new_session(model.get(), threads));
      eval(prefix.back().get(), model.get(), token_sequence(30, 256, 3 + i), AFT_LOGITS_NONE);
      for (int32_t token : {7, 91, 200}) {  // one at a time: the frame stays in use
        eval(prefix.back().get(), model.get(), {token}, AFT_LOGITS_NONE);
      }
    }
    const auto states = state_bytes(prefix);
    EXPECT_GT(expect_failures_change_nothing(
                  restoring(model.get(), threads, {states[0]}),
                  eval_call(token_sequence(1, 256, 8), AFT_LOGITS_LAST, vocab)),
              0);
    EXPECT_GT(
        expect_failures_change_nothing(restoring(model.get(), threads, states), batch_call(vocab)),
        0);
  }
}

// A decoded token of a model wide enough that its ops split their work among threads, in one
// parallel region: the ops of every layer between the same barriers.
TEST(RollbackOneRegion, AFailedTokenChangesNothing) {
  for (const char* mixer : {"local", "full"}) {
    SCOPED_TRACE(mixer);
    TempFile file("rollback_wide");
    write_random_model(file.path(), wide_config(mixer));
    ModelHandle model = load_model(file.path());
    const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));
    Sessions prefix;
    prefix.push_back(new_session(model.get(), 2));
    eval(prefix.back().get(), model.get(), token_sequence(12, 256, 4), AFT_LOGITS_NONE);
    const MakeSessions make = restoring(model.get(), 2, state_bytes(prefix));
    EXPECT_GT(expect_failures_change_nothing(
                  make, eval_call(token_sequence(1, 256, 9), AFT_LOGITS_LAST, vocab)),
              0);
  }
}

// A batch of sessions whose rollbacks save their states on both threads (enough sessions and
// channels for Session::decode_batch to split them): a failure on either thread restores every
// session that saved, and only those.
TEST(RollbackBatchOnThreads, AFailedBatchDecodeChangesNoSession) {
  TempFile file("rollback_batch");
  write_random_model(file.path(), wide_config("local"));
  ModelHandle model = load_model(file.path());
  const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));
  Sessions prefix;
  for (int i = 0; i < 12; ++i) {
    prefix.push_back(new_session(model.get(), 2));
    eval(prefix.back().get(), model.get(), token_sequence(10 + i, 256, 4 + i), AFT_LOGITS_NONE);
  }
  EXPECT_GT(expect_failures_change_nothing(restoring(model.get(), 2, state_bytes(prefix)),
                                           batch_call(vocab)),
            0);
}

}  // namespace
}  // namespace aft::testing
