// The C API of sessions: evaluation, threads, state save / restore / fork, batch decode.
#include <string>

#include "c_api_guard.h"
#include "physical_cores.h"

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
    if (p.n_threads < 0) {
      throw aft::Error(AFT_ERR_INVALID_ARGUMENT,
                       "n_threads must be >= 0 (0 = one per physical core), found " +
                           std::to_string(p.n_threads));
    }
    auto handle = std::make_unique<aft_session>();
    handle->session = std::make_unique<aft::Session>(
        *model->model, p.n_threads > 0 ? p.n_threads : aft::physical_cores());
    *session = handle.release();
  });
}

void aft_session_free(aft_session* session) { delete session; }

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
