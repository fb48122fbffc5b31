// What the library and a model say about themselves (versions, the header's metadata), where its
// messages go (the log callback), and the session controls (threads, the abort callback).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"

namespace aft::testing {
namespace {

TEST(LibraryInfo, VersionsMatchTheHeaderAndTheFormats) {
  const std::string header_version = std::to_string(AFT_VERSION_MAJOR) + "." +
                                     std::to_string(AFT_VERSION_MINOR) + "." +
                                     std::to_string(AFT_VERSION_PATCH);
  EXPECT_EQ(aft_version(), header_version);
  EXPECT_EQ(aft_model_file_version(), 1u);     // docs/format.md
  EXPECT_EQ(aft_session_state_version(), 3u);  // docs/format.md, "Session state"
}

class TinyModelTest : public ::testing::Test {
 protected:
  ModelHandle load() {
    nlohmann::json config = tiny_config("local");
    write_random_model(file_.path(), config);
    return load_model(file_.path());
  }
  TempFile file_;
};

TEST_F(TinyModelTest, MetadataHoldsEveryConfigKeyTheTokenizerAndTheFileStrings) {
  ModelHandle model = load();
  const nlohmann::json config = tiny_config("local");
  const size_t count = aft_model_metadata_count(model.get());
  ASSERT_EQ(count, config.size() + 2);  // + tokenizer.type, metadata.producer
  std::vector<std::string> keys;
  for (size_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    const char* value = nullptr;
    ASSERT_EQ(aft_model_metadata_at(model.get(), i, &key, &value), AFT_OK);
    keys.push_back(key);
    EXPECT_STREQ(aft_model_metadata_get(model.get(), key), value) << key;
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  for (const auto& [key, value] : config.items()) {
    const char* got = aft_model_metadata_get(model.get(), ("config." + key).c_str());
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(got, value.is_string() ? value.get<std::string>() : value.dump()) << key;
  }
  EXPECT_STREQ(aft_model_metadata_get(model.get(), "config.mixer"), "local");
  EXPECT_STREQ(aft_model_metadata_get(model.get(), "config.d_model"), "16");
  EXPECT_STREQ(aft_model_metadata_get(model.get(), "tokenizer.type"), "byte");
  EXPECT_STREQ(aft_model_metadata_get(model.get(), "metadata.producer"), "aft tests");
  EXPECT_EQ(aft_model_metadata_get(model.get(), "config.no_such_key"), nullptr);
  EXPECT_EQ(aft_model_metadata_get(model.get(), nullptr), nullptr);
  EXPECT_EQ(aft_model_metadata_get(nullptr, "config.mixer"), nullptr);
  EXPECT_EQ(aft_model_metadata_count(nullptr), 0u);

  const char* key = nullptr;
  const char* value = nullptr;
  EXPECT_EQ(aft_model_metadata_at(model.get(), count, &key, &value), AFT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(aft_last_error()).find("metadata index"), std::string::npos);
  EXPECT_EQ(aft_model_metadata_at(model.get(), 0, nullptr, &value), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_model_metadata_at(nullptr, 0, &key, &value), AFT_ERR_INVALID_ARGUMENT);

  aft_model_info info{};
  ASSERT_EQ(aft_model_get_info(model.get(), &info), AFT_OK);
  EXPECT_STREQ(info.tokenizer, "byte");
}

// The fingerprint is the one the model's saved states carry (bytes 12 to 15, docs/format.md): the
// same for the same file, another for other weights.
TEST_F(TinyModelTest, FingerprintIsTheOneStatesCarry) {
  ModelHandle model = load();
  const uint32_t fingerprint = aft_model_fingerprint(model.get());
  SessionHandle session = new_session(model.get());
  std::vector<unsigned char> state(aft_session_state_size(session.get()));
  ASSERT_EQ(aft_session_state_save(session.get(), state.data(), state.size(), nullptr), AFT_OK);
  ASSERT_GE(state.size(), 16u);
  const uint32_t carried =
      state[12] | state[13] << 8 | state[14] << 16 | static_cast<uint32_t>(state[15]) << 24;
  EXPECT_EQ(fingerprint, carried);
  EXPECT_EQ(aft_model_fingerprint(load_model(file_.path()).get()), fingerprint);
  TempFile other;
  write_random_model(other.path(), tiny_config("local"), /*seed=*/2);
  EXPECT_NE(aft_model_fingerprint(load_model(other.path()).get()), fingerprint);
  EXPECT_EQ(aft_model_fingerprint(nullptr), 0u);
}

TEST_F(TinyModelTest, ThreadCountIsCheckedAndChangeable) {
  ModelHandle model = load();
  SessionHandle session = new_session(model.get(), 0);
  EXPECT_EQ(aft_session_threads(session.get()), 0);
  EXPECT_EQ(aft_session_set_threads(session.get(), 3), AFT_OK);
  EXPECT_EQ(aft_session_threads(session.get()), 3);
  for (int32_t bad : {-1, AFT_MAX_THREADS + 1, 40000, INT32_MAX, INT32_MIN}) {
    EXPECT_EQ(aft_session_set_threads(session.get(), bad), AFT_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(aft_last_error()).find("n_threads"), std::string::npos);
    EXPECT_EQ(aft_session_threads(session.get()), 3);
    aft_session_params params = aft_session_default_params();
    params.n_threads = bad;
    aft_session* created = nullptr;
    EXPECT_EQ(aft_session_create(model.get(), &params, &created), AFT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(created, nullptr);
  }
  EXPECT_EQ(aft_session_set_threads(nullptr, 1), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_threads(nullptr), -1);
  // The same bits whatever the count, automatic included.
  const std::vector<int32_t> tokens = token_sequence(20, 256);
  const std::vector<float> want = eval_chunks(model.get(), tokens, {20}, 1);
  EXPECT_EQ(eval_chunks(model.get(), tokens, {20}, 0), want);
  EXPECT_EQ(eval_chunks(model.get(), tokens, {20}, 64), want);
}

// Sessions of one model evaluated on four application threads at once, with automatic thread
// counts (the cores shared among the calls computing) and with fixed ones: each gets the bits it
// gets alone.
TEST_F(TinyModelTest, SessionsOnSeveralThreadsAtOnceGetTheBitsOfOne) {
  nlohmann::json config = tiny_config("local");
  config["d_model"] = 80;
  write_random_model(file_.path(), config);
  ModelHandle model = load_model(file_.path());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> want;
  for (uint32_t i = 0; i < 4; ++i) {
    prompts.push_back(token_sequence(60, 256, 40 + i));
    want.push_back(eval_chunks(model.get(), prompts.back(), {50, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  }
  for (int n_threads : {0, 2}) {
    std::vector<std::vector<float>> got(4);
    std::vector<std::thread> workers;
    for (std::size_t i = 0; i < 4; ++i) {
      workers.emplace_back([&, i] {
        got[i] =
            eval_chunks(model.get(), prompts[i], {50, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, n_threads);
      });
    }
    for (std::thread& worker : workers) worker.join();
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(got[i], want[i]) << "session " << i << ", n_threads " << n_threads;
    }
  }
}

struct AbortCounter {
  int calls = 0;
  int stop_at = 0;  // stop on this call
};

int count_and_maybe_stop(void* user_data) {
  auto* counter = static_cast<AbortCounter*>(user_data);
  return ++counter->calls == counter->stop_at;
}

// Asked between chunks of 512 tokens: stopping keeps the chunks done, and feeding the rest from
// there gives the logits of never stopping.
TEST_F(TinyModelTest, AbortCallbackStopsBetweenChunksAndTheRestContinues) {
  nlohmann::json config = tiny_config("local");
  config["max_seq_len"] = 2048;
  write_random_model(file_.path(), config);
  ModelHandle model = load_model(file_.path());
  const std::vector<int32_t> tokens = token_sequence(1200, 256);  // chunks 512, 512, 176
  const auto vocab = static_cast<std::size_t>(vocab_size(model.get()));

  SessionHandle plain = new_session(model.get());
  AbortCounter never{0, 0};
  ASSERT_EQ(aft_session_set_abort_callback(plain.get(), count_and_maybe_stop, &never), AFT_OK);
  const std::vector<float> want = eval(plain.get(), model.get(), tokens, AFT_LOGITS_ALL);
  EXPECT_EQ(never.calls, 2);  // before the second and the third chunk

  SessionHandle stopped = new_session(model.get());
  AbortCounter second{0, 2};
  ASSERT_EQ(aft_session_set_abort_callback(stopped.get(), count_and_maybe_stop, &second), AFT_OK);
  std::vector<float> logits(tokens.size() * vocab);
  EXPECT_EQ(
      aft_session_eval(stopped.get(), tokens.data(), tokens.size(), AFT_LOGITS_ALL, logits.data()),
      AFT_ERR_ABORTED);
  EXPECT_NE(std::string(aft_last_error()).find("abort callback after 1024 of 1200 tokens"),
            std::string::npos)
      << aft_last_error();
  EXPECT_STREQ(aft_status_string(AFT_ERR_ABORTED), "aborted");
  ASSERT_EQ(aft_session_position(stopped.get()), 1024);
  ASSERT_EQ(aft_session_set_abort_callback(stopped.get(), nullptr, nullptr), AFT_OK);
  const std::vector<float> rest =
      eval(stopped.get(), model.get(), std::vector<int32_t>(tokens.begin() + 1024, tokens.end()),
           AFT_LOGITS_ALL);
  ASSERT_EQ(rest.size(), (tokens.size() - 1024) * vocab);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    ASSERT_EQ(rest[i], want[1024 * vocab + i]) << "logit " << i;
  }
  EXPECT_EQ(aft_session_set_abort_callback(nullptr, nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
}

struct LogLines {
  std::vector<std::pair<aft_log_level, std::string>> lines;
};

void record(aft_log_level level, const char* message, void* user_data) {
  static_cast<LogLines*>(user_data)->lines.emplace_back(level, message);
}

// With `variable` set to `value`, which it does not understand, the kernels are still chosen and
// the one line logged is the warning "variable=value is unknown", through the callback. Run in a
// child process: the kernel choice is made once per process.
bool unknown_setting_warns_through_callback(const char* variable, const char* value) {
  setenv(variable, value, 1);
  LogLines log;
  aft_log_set_callback(record, &log);
  const bool known = aft_kernel_isa() != nullptr;
  const std::string warning = std::string(variable) + "=" + value + " is unknown";
  const bool logged = log.lines.size() == 1 && log.lines[0].first == AFT_LOG_WARNING &&
                      log.lines[0].second.find(warning) != std::string::npos;
  aft_log_set_callback(nullptr, nullptr);
  return known && logged;
}

// The warning of a forced ISA the CPU lacks goes to the callback, not stderr.
TEST(LogDeathTest, WarningsGoToTheCallback) {
  EXPECT_EXIT(std::exit(unknown_setting_warns_through_callback("AFT_ISA", "no-such-isa") ? 0 : 1),
              ::testing::ExitedWithCode(0), "^$");
}

// So does an AFT_MATRIX_UNITS setting that is not understood, with the default choice kept.
TEST(LogDeathTest, MatrixUnitSettingWarningsGoToTheCallback) {
  EXPECT_EXIT(std::exit(unknown_setting_warns_through_callback("AFT_MATRIX_UNITS", "yes") ? 0 : 1),
              ::testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace aft::testing
