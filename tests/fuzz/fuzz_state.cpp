// Fuzz target: session state bytes restored into sessions of four fixture models (AFT-simple,
// -local, -conv, -full). The harness writes the right checksum over the input first, so that
// mutations reach the fields behind it (the checksum check itself is tests/session_state_test's).
// Bytes a session refuses leave it unchanged; bytes it takes save back identically, and the
// session then evaluates a token.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "models/aft/state_checksum.h"

using aft::fuzz::check;
using aft::fuzz::check_refusal;

namespace {

struct Fixture {
  aft_model* model;
  aft_session* session;
  aft_model_info info;
};

Fixture load(const char* name) {
  Fixture f{};
  const std::string path = std::string(AFT_FIXTURES_DIR) + "/" + name;
  check(aft_model_load(path.c_str(), nullptr, &f.model) == AFT_OK, "the fixture loads");
  check(aft_model_get_info(f.model, &f.info) == AFT_OK, "the fixture has info");
  aft_session_params params = aft_session_default_params();
  params.n_threads = 1;
  check(aft_session_create(f.model, &params, &f.session) == AFT_OK, "a session starts");
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixtures[] = {load("simple.aft"),     load("local.aft"),       load("conv.aft"),
                               load("full_table.aft"), load("decay_shift.aft"), load("rwkv4.aft")};
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= 8) {
    const uint64_t checksum = aft::state_checksum(bytes.data(), size - 8);
    std::memcpy(bytes.data() + size - 8, &checksum, 8);
  }
  for (Fixture& f : fixtures) {
    const int64_t position = aft_session_position(f.session);
    const aft_status loaded = aft_session_state_load(f.session, bytes.data(), size);
    if (loaded != AFT_OK) {
      check_refusal(loaded, "aft_session_state_load refuses with a message");
      // An empty input is a NULL buffer (the vector's data()), which is an invalid argument.
      check(loaded == (bytes.data() ? AFT_ERR_FORMAT : AFT_ERR_INVALID_ARGUMENT),
            "bad state bytes are a format error");
      check(aft_session_position(f.session) == position, "a refused state changes nothing");
      continue;
    }
    std::vector<uint8_t> saved(aft_session_state_size(f.session));
    size_t written = 0;
    check(aft_session_state_save(f.session, saved.data(), saved.size(), &written) == AFT_OK &&
              written == size && saved == bytes,
          "a restored state saves back the same bytes");
    const int32_t token = 1;
    std::vector<float> logits(static_cast<size_t>(f.info.vocab_size));
    const bool at_limit =
        f.info.max_positions != 0 && aft_session_position(f.session) == f.info.max_positions;
    check(aft_session_eval(f.session, &token, 1, AFT_LOGITS_LAST, logits.data()) ==
              (at_limit ? AFT_ERR_OUT_OF_RANGE : AFT_OK),
          "a restored session evaluates a token unless at the model's last position");
  }
  return 0;
}
