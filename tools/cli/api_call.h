// Calling the C API from the tools: failures become exceptions carrying the library's message,
// and handles free themselves.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "aft.h"

namespace aft::cli {

// A failed C API call: what was being done, and the library's message.
struct ApiError : std::runtime_error {
  ApiError(const std::string& doing, aft_status status);
};

// Throws ApiError unless status is AFT_OK.
void check(aft_status status, const std::string& doing);

struct ModelFree {
  void operator()(aft_model* m) const { aft_model_free(m); }
};
struct SessionFree {
  void operator()(aft_session* s) const { aft_session_free(s); }
};
struct SamplerFree {
  void operator()(aft_sampler* s) const { aft_sampler_free(s); }
};
struct DetokenizerFree {
  void operator()(aft_detokenizer* d) const { aft_detokenizer_free(d); }
};
using Model = std::unique_ptr<aft_model, ModelFree>;
using Session = std::unique_ptr<aft_session, SessionFree>;
using Sampler = std::unique_ptr<aft_sampler, SamplerFree>;
using Detokenizer = std::unique_ptr<aft_detokenizer, DetokenizerFree>;

}  // namespace aft::cli
