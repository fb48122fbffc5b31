// Saving, restoring and forking sessions (aft_session_state_* and aft_session_fork): continuing
// after a round trip or a fork gives the same bits as never leaving, for every mixer; bad bytes
// are refused with the session unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api_handles.h"
#include "model_file_writer.h"
#include "models/aft/state_checksum.h"

namespace aft::testing {
namespace {

constexpr std::size_t kPrompt = 70;  // past the windows, and past a 64-position scan segment
constexpr std::size_t kTokens = 100;

std::vector<uint8_t> save(const aft_session* session) {
  std::vector<uint8_t> blob(aft_session_state_size(session));
  size_t written = 0;
  EXPECT_EQ(aft_session_state_save(session, blob.data(), blob.size(), &written), AFT_OK)
      << aft_last_error();
  EXPECT_EQ(written, blob.size());
  return blob;
}

// The continuation after the prompt: a chunk of 20 with every logit, then one token at a time.
std::vector<float> continue_from_prompt(aft_session* session, const aft_model* model,
                                        const std::vector<int32_t>& tokens) {
  std::vector<float> logits = eval(
      session, model, std::vector<int32_t>(tokens.begin() + kPrompt, tokens.begin() + kPrompt + 20),
      AFT_LOGITS_ALL);
  for (std::size_t i = kPrompt + 20; i < kTokens; ++i) {
    const std::vector<float> row = eval(session, model, {tokens[i]}, AFT_LOGITS_LAST);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

void expect_same_bits(const std::vector<float>& want, const std::vector<float>& got,
                      const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i], got[i]) << where << ", logit " << i;
  }
}

class SessionStateTest : public ::testing::TestWithParam<const char*> {
 protected:
  ModelHandle load(uint32_t seed = 1) {
    nlohmann::json config = tiny_config(GetParam());
    config["d_model"] = 80;  // a channel block of 64 and one of 16
    config["max_seq_len"] = 128;
    write_random_model(file_.path(), config, seed, 0.1f);
    return load_model(file_.path());
  }
  TempFile file_;
};

TEST_P(SessionStateTest, RestoredAndForkedSessionsContinueBitForBit) {
  ModelHandle model = load();
  const std::vector<int32_t> tokens = token_sequence(kTokens, 256);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + kPrompt);
  for (int threads : {1, 2}) {
    const std::string where = std::string(GetParam()) + ", " + std::to_string(threads) + " threads";
    SessionHandle original = new_session(model.get(), threads);
    eval(original.get(), model.get(), prompt, AFT_LOGITS_NONE);
    const std::vector<uint8_t> blob = save(original.get());
    SessionHandle forked;
    {
      aft_session* fork = nullptr;
      ASSERT_EQ(aft_session_fork(original.get(), &fork), AFT_OK) << aft_last_error();
      forked = SessionHandle(fork);
    }
    const std::vector<float> want = continue_from_prompt(original.get(), model.get(), tokens);

    SessionHandle restored = new_session(model.get(), threads);
    ASSERT_EQ(aft_session_state_load(restored.get(), blob.data(), blob.size()), AFT_OK)
        << aft_last_error();
    EXPECT_EQ(aft_session_position(restored.get()), static_cast<int64_t>(kPrompt));
    expect_same_bits(want, continue_from_prompt(restored.get(), model.get(), tokens),
                     where + ", restored");
    expect_same_bits(want, continue_from_prompt(forked.get(), model.get(), tokens),
                     where + ", forked");
    // Back in time: the original, restored to the prompt, continues the same way again.
    ASSERT_EQ(aft_session_state_load(original.get(), blob.data(), blob.size()), AFT_OK);
    expect_same_bits(want, continue_from_prompt(original.get(), model.get(), tokens),
                     where + ", rewound");
  }
}

// Truncated, extended, changed or foreign bytes: AFT_ERR_FORMAT, and the session goes on as if
// the call had not been made.
TEST_P(SessionStateTest, BadBytesAreRefusedAndLeaveTheSessionUnchanged) {
  ModelHandle model = load();
  const std::vector<int32_t> tokens = token_sequence(kTokens, 256);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + kPrompt);
  SessionHandle session = new_session(model.get());
  eval(session.get(), model.get(), prompt, AFT_LOGITS_NONE);
  const std::vector<uint8_t> blob = save(session.get());
  SessionHandle other_place = new_session(model.get());
  eval(other_place.get(), model.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 30),
       AFT_LOGITS_NONE);

  std::vector<std::pair<std::string, std::vector<uint8_t>>> bad;
  for (std::size_t length :
       {std::size_t{0}, std::size_t{7}, std::size_t{30}, blob.size() / 2, blob.size() - 1}) {
    bad.emplace_back("truncated to " + std::to_string(length),
                     std::vector<uint8_t>(blob.begin(), blob.begin() + length));
  }
  std::vector<uint8_t> longer = blob;
  longer.push_back(0);
  bad.emplace_back("one byte too many", longer);
  for (std::size_t offset : {std::size_t{0}, std::size_t{9}, std::size_t{13}, std::size_t{40},
                             blob.size() / 2, blob.size() - 1}) {
    std::vector<uint8_t> changed = blob;
    changed[offset] ^= 0x10;
    bad.emplace_back("bit flipped at " + std::to_string(offset), changed);
  }
  {
    TempFile other_file("other");
    nlohmann::json config = tiny_config(GetParam());
    config["d_model"] = 80;
    config["max_seq_len"] = 128;
    write_random_model(other_file.path(), config, 2, 0.1f);  // same shapes, other weights
    ModelHandle other = load_model(other_file.path());
    SessionHandle foreign = new_session(other.get());
    eval(foreign.get(), other.get(), prompt, AFT_LOGITS_NONE);
    bad.emplace_back("another model's", save(foreign.get()));
  }
  for (const auto& [what, bytes] : bad) {
    EXPECT_EQ(aft_session_state_load(other_place.get(), bytes.empty() ? blob.data() : bytes.data(),
                                     bytes.size()),
              AFT_ERR_FORMAT)
        << what;
    EXPECT_NE(std::string(aft_last_error()).find("session state"), std::string::npos)
        << what << ": " << aft_last_error();
    EXPECT_EQ(aft_session_position(other_place.get()), 30) << what;
  }
  // Still the sequence it was: it continues as a session that never saw the bad bytes.
  SessionHandle untouched = new_session(model.get());
  const std::vector<int32_t> first30(tokens.begin(), tokens.begin() + 30);
  eval(untouched.get(), model.get(), first30, AFT_LOGITS_NONE);
  const std::vector<int32_t> next(tokens.begin() + 30, tokens.begin() + 40);
  expect_same_bits(eval(untouched.get(), model.get(), next, AFT_LOGITS_ALL),
                   eval(other_place.get(), model.get(), next, AFT_LOGITS_ALL), "after bad loads");
}

// The bytes as docs/format.md ("Session state") lays them out, field by field: the global sums as
// float64 (version 3), which over the positions that left the window hold 1 <= b <= their number
// (the entry at the maximum adds exp(0) = 1, every other entry at most 1).
TEST_P(SessionStateTest, BytesFollowTheDocumentedLayout) {
  ModelHandle model = load();
  SessionHandle session = new_session(model.get());
  eval(session.get(), model.get(), token_sequence(kPrompt, 256), AFT_LOGITS_NONE);
  const std::vector<uint8_t> blob = save(session.get());
  std::size_t at = 0;
  const auto read = [&](auto& value) {
    ASSERT_LE(at + sizeof(value), blob.size());
    std::memcpy(&value, blob.data() + at, sizeof(value));
    at += sizeof(value);
  };
  char magic[8];
  uint32_t version = 0, fingerprint = 0, layers = 0, d = 0;
  int64_t position = 0;
  read(magic);
  read(version);
  read(fingerprint);
  read(position);
  read(layers);
  read(d);
  EXPECT_EQ(std::string(magic, 8), "AFTSTATE");
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(position, int64_t{kPrompt});
  ASSERT_EQ(layers, 2u);
  ASSERT_EQ(d, 80u);
  const std::string mixer = GetParam();
  const bool decay = mixer.rfind("decay", 0) == 0 || mixer == "rwkv4";
  const std::size_t window = mixer == "simple" || decay ? 0 : mixer == "full" ? kPrompt : 4;
  const double left = double(kPrompt - window);  // positions that joined the global sums
  for (uint32_t layer = 0; layer < layers; ++layer) {
    uint64_t rows = 0, frame_flag = 0;
    read(rows);
    read(frame_flag);
    EXPECT_EQ(rows, window) << mixer << ": only the rows the positions read";
    EXPECT_LE(frame_flag, 1u);
    std::vector<double> m(d), a(d), b(d);
    for (std::vector<double>* sums : {&m, &a, &b}) {
      for (double& value : *sums) read(value);
    }
    for (uint32_t c = 0; c < d; ++c) {
      const std::string where =
          mixer + " layer " + std::to_string(layer) + " channel " + std::to_string(c);
      if (left == 0) {
        EXPECT_EQ(m[c], -std::numeric_limits<double>::infinity()) << where;
        EXPECT_EQ(b[c], 0.0) << where;
        continue;
      }
      EXPECT_TRUE(std::isfinite(m[c]) && std::isfinite(a[c])) << where;
      EXPECT_GE(b[c], 1.0) << where;
      EXPECT_LE(b[c], left) << where;
    }
    // The frame; the last input (token shift) and the feed-forward's (channel mixing); keys,
    // values, scaled keys.
    const std::size_t shifted = mixer == "decay_shift" ? d : mixer == "rwkv4" ? 2 * d : 0;
    at += (d + shifted + 3 * ((d + 63) / 64) * rows * 64) * sizeof(float);
  }
  EXPECT_EQ(at + sizeof(uint64_t), blob.size());  // the checksum last
}

INSTANTIATE_TEST_SUITE_P(Mixers, SessionStateTest,
                         ::testing::Values("simple", "local", "conv", "full", "decay",
                                           "decay_shift", "rwkv4"));

// The state's size per mixer: constant for AFT-simple and for the rings of AFT-local and
// AFT-conv once the window is full; AFT-full keeps every position, so it grows.
TEST(SessionStateSize, FollowsEachMixersState) {
  TempFile file;
  for (const char* mixer : {"simple", "local", "conv", "full", "decay", "decay_shift", "rwkv4"}) {
    nlohmann::json config = tiny_config(mixer);
    config["max_seq_len"] = 128;
    write_random_model(file.path(), config, 1, 0.1f);
    ModelHandle model = load_model(file.path());
    SessionHandle session = new_session(model.get());
    const std::vector<int32_t> tokens = token_sequence(100, 256);
    eval(session.get(), model.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 10),
         AFT_LOGITS_NONE);
    const std::size_t at10 = aft_session_state_size(session.get());
    eval(session.get(), model.get(), std::vector<int32_t>(tokens.begin() + 10, tokens.end()),
         AFT_LOGITS_NONE);
    const std::size_t at100 = aft_session_state_size(session.get());
    if (std::string(mixer) == "full") {
      EXPECT_GT(at100, at10) << mixer;
    } else {
      EXPECT_EQ(at100, at10) << mixer;
    }
  }
}

TEST(SessionStateCalls, BadArgumentsAreRefused) {
  TempFile file;
  write_random_model(file.path(), tiny_config("local"), 1, 0.1f);
  ModelHandle model = load_model(file.path());
  SessionHandle session = new_session(model.get());
  const std::size_t size = aft_session_state_size(session.get());
  ASSERT_GT(size, 0u);
  EXPECT_EQ(aft_session_state_size(nullptr), 0u);
  std::vector<uint8_t> small(size - 1);
  size_t written = 0;
  EXPECT_EQ(aft_session_state_save(session.get(), small.data(), small.size(), &written),
            AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(written, size);
  EXPECT_EQ(aft_session_state_save(session.get(), nullptr, 0, &written), AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(aft_session_state_save(nullptr, small.data(), small.size(), &written),
            AFT_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> blob(size);
  EXPECT_EQ(aft_session_state_save(session.get(), nullptr, size, &written),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_state_save(session.get(), blob.data(), blob.size(), nullptr), AFT_OK);
  EXPECT_EQ(aft_session_state_load(nullptr, blob.data(), blob.size()), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_session_state_load(session.get(), nullptr, blob.size()), AFT_ERR_INVALID_ARGUMENT);
  aft_session* fork = reinterpret_cast<aft_session*>(&blob);  // must be reset to NULL on failure
  EXPECT_EQ(aft_session_fork(nullptr, &fork), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fork, nullptr);
  EXPECT_EQ(aft_session_fork(session.get(), nullptr), AFT_ERR_INVALID_ARGUMENT);
}

// A model without a position limit takes any saved position up to int64_t's largest; a state
// there takes no more tokens (the position would overflow), refused with the session unchanged,
// alone and in a batch.
TEST(SessionStateCalls, TheLastPositionTakesNoMoreTokens) {
  TempFile file;
  for (const char* mixer : {"simple", "decay"}) {
    write_random_model(file.path(), tiny_config(mixer), 1, 0.1f);
    ModelHandle model = load_model(file.path());
    SessionHandle session = new_session(model.get());
    eval(session.get(), model.get(), {1, 2}, AFT_LOGITS_NONE);
    std::vector<uint8_t> blob = save(session.get());
    constexpr std::size_t kPositionAt = 16;  // magic, version, fingerprint (docs/format.md)
    const int64_t last = std::numeric_limits<int64_t>::max();
    const int64_t before_last = last - 1;
    std::memcpy(blob.data() + kPositionAt, &before_last, sizeof before_last);
    const uint64_t checksum = state_checksum(blob.data(), blob.size() - 8);
    std::memcpy(blob.data() + blob.size() - 8, &checksum, 8);
    ASSERT_EQ(aft_session_state_load(session.get(), blob.data(), blob.size()), AFT_OK)
        << mixer << ": " << aft_last_error();
    const int32_t two[2] = {3, 4};
    EXPECT_EQ(aft_session_eval(session.get(), two, 2, AFT_LOGITS_NONE, nullptr),
              AFT_ERR_OUT_OF_RANGE)
        << mixer;
    EXPECT_NE(std::string(aft_last_error()).find("would pass the last position"), std::string::npos)
        << mixer << ": " << aft_last_error();
    EXPECT_EQ(aft_session_position(session.get()), before_last) << mixer;
    eval(session.get(), model.get(), {3}, AFT_LOGITS_LAST);
    EXPECT_EQ(aft_session_position(session.get()), last) << mixer;
    EXPECT_EQ(aft_session_eval(session.get(), two, 1, AFT_LOGITS_NONE, nullptr),
              AFT_ERR_OUT_OF_RANGE)
        << mixer;
    aft_session* batch[1] = {session.get()};
    EXPECT_EQ(aft_batch_decode(batch, two, 1, AFT_LOGITS_NONE, nullptr), AFT_ERR_OUT_OF_RANGE)
        << mixer;
    EXPECT_EQ(aft_session_position(session.get()), last) << mixer;
  }
}

}  // namespace
}  // namespace aft::testing
