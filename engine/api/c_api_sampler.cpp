// The C API of samplers.
#include "c_api_guard.h"

using aft::capi::guarded;
using aft::capi::require;

extern "C" {

aft_sampler_params aft_sampler_default_params(void) {
  aft_sampler_params p{};
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_last_n = 64;
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;
  p.logit_bias = nullptr;
  p.n_logit_bias = 0;
  p.seed = 0;
  return p;
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

aft_status aft_sampler_accept(aft_sampler* sampler, int32_t token) {
  return guarded([&] {
    require(sampler, "sampler");
    sampler->sampler->accept(token);
  });
}

aft_status aft_sampler_reset(aft_sampler* sampler) {
  return guarded([&] {
    require(sampler, "sampler");
    sampler->sampler->reset();
  });
}

}  // extern "C"
