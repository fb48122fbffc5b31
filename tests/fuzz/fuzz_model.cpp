// Fuzz target: model file bytes, loaded from memory. Any bytes give a model or a status and a
// message; a model that loads answers every query and evaluates a two-token prompt and one more
// token (the matrix products, then the GEMV and the accumulators).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"

using aft::fuzz::check;
using aft::fuzz::check_refusal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Unverified checksums let mutated tensor bytes (NaN, infinities, huge scales) reach the graph;
  // the checksum test itself is tests/model_file_test.cpp's.
  aft_model_params params = aft_model_default_params();
  params.verify_checksums = 0;
  aft_model* model = nullptr;
  const aft_status loaded = aft_model_load_from_memory(data, size, &params, &model);
  if (loaded != AFT_OK) {
    check_refusal(loaded, "aft_model_load_from_memory refuses with a message");
    check(model == nullptr, "a refused load leaves no model");
    return 0;
  }

  aft_model_info info{};
  check(aft_model_get_info(model, &info) == AFT_OK, "a loaded model has info");
  check(info.vocab_size > 0 && info.file_bytes == size, "the info describes the bytes");
  for (size_t i = 0; i < aft_model_metadata_count(model); ++i) {
    const char* key = nullptr;
    const char* value = nullptr;
    check(aft_model_metadata_at(model, i, &key, &value) == AFT_OK, "every metadata entry reads");
    check(aft_model_metadata_get(model, key) == value, "a metadata key finds its own entry");
  }

  const int32_t last = info.vocab_size - 1;
  char piece[8];
  size_t piece_length = 0;
  check(aft_token_to_text(model, last, piece, sizeof piece, &piece_length) == AFT_OK,
        "every token in the vocabulary has text of at most 8 bytes");

  aft_session_params session_params = aft_session_default_params();
  session_params.n_threads = 1;
  aft_session* session = nullptr;
  check(aft_session_create(model, &session_params, &session) == AFT_OK, "a loaded model runs");
  std::vector<float> logits(static_cast<size_t>(info.vocab_size));
  const int32_t prompt[] = {0, last};
  const aft_status prefill = aft_session_eval(session, prompt, 2, AFT_LOGITS_LAST, logits.data());
  check(prefill == AFT_OK || (prefill == AFT_ERR_OUT_OF_RANGE && info.max_positions < 2),
        "a two-token prompt evaluates unless the model stops before position 2");
  const int32_t next = last / 2;
  const bool at_limit =
      info.max_positions != 0 && aft_session_position(session) == info.max_positions;
  check(aft_session_eval(session, &next, 1, AFT_LOGITS_LAST, logits.data()) ==
            (at_limit ? AFT_ERR_OUT_OF_RANGE : AFT_OK),
        "a decoded token evaluates unless the session is at the model's last position");
  aft_session_free(session);
  aft_model_free(model);
  return 0;
}
