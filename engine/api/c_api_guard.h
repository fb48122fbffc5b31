// What every C API entry point shares: the handles' layout, and the guard that turns any exception
// into a status plus a thread-local message, so no exception crosses into C.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "aft.h"
#include "engine/format/error.h"
#include "engine/format/utf8_stream.h"
#include "models/aft/model.h"
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
struct aft_detokenizer {
  const aft::Model* model;
  aft::Utf8Stream stream;
};

namespace aft::capi {

// Records message as this thread's last error; returns status.
aft_status fail(aft_status status, const std::string& message);

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

// Throws Error(AFT_ERR_INVALID_ARGUMENT) "<name> is NULL".
void require(const void* pointer, const char* name);

// Copies count items to a caller's buffer, or reports the count it needs (Error
// AFT_ERR_BUFFER_TOO_SMALL); *out_count receives count either way.
void copy_out(const void* bytes, std::size_t count, std::size_t item_size, void* out,
              std::size_t capacity, std::size_t* out_count);

}  // namespace aft::capi
