// The C API of sessions: evaluation, threads, state save / restore / fork, batch decode.
#include <string>
#include <vector>

#include "c_api_guard.h"

using aft::capi::guarded;
using aft::capi::require;

extern "C" {

aft_session_params aft_session_default_params(void) { return aft_session_params{0}; }

aft_status aft_session_create(const aft_model* model, const aft_session_params* params,
                              aft_session** session) {
  return guarded([&] {
    require(session, "session");
    *session = nullptr;
    require(model, "model");
    const aft_session_params p = params ? *params : aft_session_default_params();
    auto handle = std::make_unique<aft_session>();
    handle->session = std::make_unique<aft::Session>(*model->model, p.n_threads);
    *session = handle.release();
  });
}

void aft_session_free(aft_session* session) { delete session; }

aft_status aft_session_set_threads(aft_session* session, int32_t n_threads) {
  return guarded([&] {
    require(session, "session");
    session->session->set_threads(n_threads);
  });
}

int32_t aft_session_threads(const aft_session* session) {
  return session ? session->session->threads() : -1;
}

aft_status aft_session_set_abort_callback(aft_session* session, aft_abort_callback callback,
                                          void* user_data) {
  return guarded([&] {
    require(session, "session");
    session->session->set_abort_callback(callback, user_data);
  });
}

aft_status aft_session_reset(aft_session* session) {
  return guarded([&] {
    require(session, "session");
    session->session->reset();
  });
}

int64_t aft_session_position(const aft_session* session) {
  return session ? session->session->position() : -1;
}

aft_status aft_session_eval(aft_session* session, const int32_t* tokens, size_t n_tokens,
                            aft_logits_mode mode, float* logits) {
  return guarded([&] {
    require(session, "session");
    session->session->eval(tokens, n_tokens, mode, logits);
  });
}

aft_status aft_batch_decode(aft_session* const* sessions, const int32_t* tokens, size_t n_sessions,
                            aft_logits_mode mode, float* logits) {
  return guarded([&] {
    if (n_sessions == 0) throw aft::Error(AFT_ERR_INVALID_ARGUMENT, "no sessions to decode");
    require(sessions, "sessions");
    std::vector<aft::Session*> inner(n_sessions);
    for (std::size_t i = 0; i < n_sessions; ++i) {
      if (!sessions[i]) {
        throw aft::Error(AFT_ERR_INVALID_ARGUMENT, "sessions[" + std::to_string(i) + "] is NULL");
      }
      inner[i] = sessions[i]->session.get();
    }
    aft::Session::decode_batch(inner.data(), tokens, n_sessions, mode, logits);
  });
}

size_t aft_session_state_size(const aft_session* session) {
  return session ? session->session->state_size() : 0;
}

aft_status aft_session_state_save(const aft_session* session, void* buffer, size_t capacity,
                                  size_t* written) {
  return guarded([&] {
    require(session, "session");
    const std::size_t size = session->session->state_size();
    if (written) *written = size;
    if (capacity >= size) require(buffer, "buffer");
    session->session->save_state(buffer, capacity);
  });
}

aft_status aft_session_state_load(aft_session* session, const void* buffer, size_t size) {
  return guarded([&] {
    require(session, "session");
    require(buffer, "buffer");
    session->session->load_state(buffer, size);
  });
}

aft_status aft_session_fork(const aft_session* session, aft_session** fork) {
  return guarded([&] {
    require(fork, "fork");
    *fork = nullptr;
    require(session, "session");
    auto handle = std::make_unique<aft_session>();
    handle->session = session->session->fork();
    *fork = handle.release();
  });
}

}  // extern "C"
