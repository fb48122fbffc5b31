// The C API of aft_detokenizer (aft.h): tokens to valid UTF-8 as they come.

#include <string>
#include <utility>

#include "c_api_guard.h"

using aft::capi::copy_out;
using aft::capi::guarded;
using aft::capi::require;

extern "C" {

aft_status aft_detokenizer_create(const aft_model* model, aft_detokenizer** detokenizer) {
  return guarded([&] {
    require(detokenizer, "detokenizer");
    *detokenizer = nullptr;
    require(model, "model");
    *detokenizer = new aft_detokenizer{model->model.get(), {}};
  });
}

void aft_detokenizer_free(aft_detokenizer* detokenizer) { delete detokenizer; }

aft_status aft_detokenizer_push(aft_detokenizer* detokenizer, int32_t token, char* text,
                                size_t capacity, size_t* text_len) {
  return guarded([&] {
    require(detokenizer, "detokenizer");
    require(text_len, "text_len");
    // On a copy, kept only once the text fits: a refused push consumes nothing.
    aft::Utf8Stream next = detokenizer->stream;
    const std::string out = next.push(detokenizer->model->tokenizer().piece(token));
    copy_out(out.data(), out.size(), 1, text, capacity, text_len);
    detokenizer->stream = std::move(next);
  });
}

aft_status aft_detokenizer_flush(aft_detokenizer* detokenizer, char* text, size_t capacity,
                                 size_t* text_len) {
  return guarded([&] {
    require(detokenizer, "detokenizer");
    require(text_len, "text_len");
    aft::Utf8Stream next = detokenizer->stream;
    const std::string out = next.flush();
    copy_out(out.data(), out.size(), 1, text, capacity, text_len);
    detokenizer->stream = std::move(next);
  });
}

}  // extern "C"
