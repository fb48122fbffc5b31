// The C API: handles wrap the C++ objects; every entry point catches everything, so no exception
// crosses into C, and reports it as a status plus a thread-local message.
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "aft.h"
#include "error.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "model.h"
#include "physical_cores.h"
#include "sampler.h"
#include "session.h"

struct aft_model {
  std::unique_ptr<const aft::Model> model;
};
struct aft_session {
  std::unique_ptr<aft::Session> session;
};
struct aft_sampler {
  std::unique_ptr<aft::Sampler> sampler;
};

namespace {

thread_local std::string last_error;

aft_status fail(aft_status status, const std::string& message) {
  last_error = message;
  return status;
}

// Runs body, turning any exception into a status and message.
template <class Body>
aft_status guarded(const Body& body) {
  try {
    body();
    return AFT_OK;
  } catch (const aft::Error& e) {
    return fail(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(AFT_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(AFT_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(AFT_ERR_INTERNAL, "unknown error");
  }
}

void require(const void* pointer, const char* name) {
  if (!pointer) throw aft::Error(AFT_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

// Copies bytes to a caller's buffer, or reports the size it needs.
void copy_out(const void* bytes, std::size_t count, std::size_t item_size, void* out,
              std::size_t capacity, std::size_t* out_count) {
  *out_count = count;
  if (count > capacity) {
    throw aft::Error(AFT_ERR_BUFFER_TOO_SMALL, "the output needs " + std::to_string(count) +
                                                   " entries, the buffer holds " +
                                                   std::to_string(capacity));
  }
  if (count > 0) {
    require(out, "the output buffer");
    std::memcpy(out, bytes, count * item_size);
  }
}

}  // namespace

extern "C" {

const char* aft_status_string(aft_status status) {
  switch (status) {
    case AFT_OK:
      return "ok";
    case AFT_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case AFT_ERR_IO:
      return "i/o error";
    case AFT_ERR_FORMAT:
      return "malformed model file";
    case AFT_ERR_OUT_OF_RANGE:
      return "out of range";
    case AFT_ERR_TOKENIZE:
      return "cannot tokenize";
    case AFT_ERR_BUFFER_TOO_SMALL:
      return "buffer too small";
    case AFT_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case AFT_ERR_INTERNAL:
      return "internal error";
    case AFT_STATUS_MAX_ENUM:
      break;
  }
  return "unknown status";
}

const char* aft_last_error(void) { return last_error.c_str(); }

const char* aft_kernel_isa(void) { return aft::kernels::active_kernels().isa; }

const char* aft_matmul_implementation(void) {
  static const std::string description = [] {
    try {
      return aft::kernels::matmul_description();
    } catch (const std::exception& e) {
      return std::string("unavailable: ") + e.what();
    }
  }();
  return description.c_str();
}

aft_model_params aft_model_default_params(void) { return aft_model_params{1}; }

aft_status aft_model_load(const char* path, const aft_model_params* params, aft_model** model) {
  return guarded([&] {
    require(model, "model");
    *model = nullptr;
    require(path, "path");
    const aft_model_params p = params ? *params : aft_model_default_params();
    auto handle = std::make_unique<aft_model>();
    handle->model = aft::Model::load(path, p.verify_checksums != 0);
    *model = handle.release();
  });
}

void aft_model_free(aft_model* model) { delete model; }

aft_status aft_model_get_info(const aft_model* model, aft_model_info* info) {
  return guarded([&] {
    require(model, "model");
    require(info, "info");
    const aft::ModelConfig& c = model->model->config();
    *info = aft_model_info{aft::to_string(c.mixer),
                           static_cast<int32_t>(c.vocab_size),
                           static_cast<int32_t>(c.d_model),
                           static_cast<int32_t>(c.n_layers),
                           static_cast<int32_t>(c.d_ff),
                           static_cast<int32_t>(c.window),
                           static_cast<int32_t>(c.n_heads),
                           c.max_positions(),
                           model->model->n_parameters(),
                           model->model->file().size_bytes(),
                           c.matmul_parameters()};
  });
}

aft_status aft_tokenize(const aft_model* model, const char* text, size_t text_len, int32_t* tokens,
                        size_t capacity, size_t* n_tokens) {
  return guarded([&] {
    require(model, "model");
    require(n_tokens, "n_tokens");
    if (text_len > 0) require(text, "text");
    const std::vector<int32_t> encoded =
        model->model->tokenizer().encode(std::string_view(text ? text : "", text_len));
    copy_out(encoded.data(), encoded.size(), sizeof(int32_t), tokens, capacity, n_tokens);
  });
}

aft_status aft_token_to_text(const aft_model* model, int32_t token, char* text, size_t capacity,
                             size_t* text_len) {
  return guarded([&] {
    require(model, "model");
    require(text_len, "text_len");
    const std::string& piece = model->model->tokenizer().piece(token);
    copy_out(piece.data(), piece.size(), 1, text, capacity, text_len);
  });
}

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

aft_sampler_params aft_sampler_default_params(void) {
  return aft_sampler_params{0.8f, 40, 0.95f, 0};
}

aft_status aft_sampler_create(const aft_sampler_params* params, aft_sampler** sampler) {
  return guarded([&] {
    require(sampler, "sampler");
    *sampler = nullptr;
    const aft_sampler_params p = params ? *params : aft_sampler_default_params();
    auto handle = std::make_unique<aft_sampler>();
    handle->sampler = std::make_unique<aft::Sampler>(p);
    *sampler = handle.release();
  });
}

void aft_sampler_free(aft_sampler* sampler) { delete sampler; }

aft_status aft_sampler_sample(aft_sampler* sampler, const float* logits, size_t n_vocab,
                              int32_t* token) {
  return guarded([&] {
    require(sampler, "sampler");
    require(logits, "logits");
    require(token, "token");
    *token = sampler->sampler->sample(logits, n_vocab);
  });
}

}  // extern "C"
