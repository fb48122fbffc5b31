// The C API's library-wide entry points, models and the tokenizer (c_api_session.cpp: sessions,
// c_api_sampler.cpp: sampling).
#include <algorithm>
#include <cstring>
#include <string>

#include "c_api_guard.h"
#include "engine/format/model_file.h"
#include "engine/runtime/log.h"
#include "engine/runtime/runtime_kernels.h"
#include "kernels/matmul.h"
#include "models/aft/session_state_blob.h"

namespace aft::capi {
namespace {
thread_local std::string last_error;
}  // namespace

aft_status fail(aft_status status, const std::string& message) {
  last_error = message;
  return status;
}

void require(const void* pointer, const char* name) {
  if (!pointer) throw Error(AFT_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

void copy_out(const void* bytes, std::size_t count, std::size_t item_size, void* out,
              std::size_t capacity, std::size_t* out_count) {
  *out_count = count;
  if (count > capacity) {
    throw Error(AFT_ERR_BUFFER_TOO_SMALL, "the output needs " + std::to_string(count) +
                                              " entries, the buffer holds " +
                                              std::to_string(capacity));
  }
  if (count > 0) {
    require(out, "the output buffer");
    std::memcpy(out, bytes, count * item_size);
  }
}

}  // namespace aft::capi

using aft::capi::copy_out;
using aft::capi::guarded;
using aft::capi::require;

namespace {

aft::kernels::MatmulPrecision matmul_precision(const aft_model_params& params) {
  switch (params.matmul_precision) {
    case AFT_MATMUL_PRECISION_F32:
      return aft::kernels::MatmulPrecision::F32;
    case AFT_MATMUL_PRECISION_BF16:
      return aft::kernels::MatmulPrecision::BF16;
    default:
      throw aft::Error(
          AFT_ERR_INVALID_ARGUMENT,
          "params.matmul_precision: " + std::to_string(static_cast<int>(params.matmul_precision)) +
              " is not an aft_matmul_precision (0 f32, 1 bf16)");
  }
}

// The engine's options from the C API's parameters (refuses values outside their ranges).
aft::ModelOptions model_options(const aft_model_params& params) {
  if (params.use_mmap != 0 && params.use_mmap != 1) {
    throw aft::Error(AFT_ERR_INVALID_ARGUMENT,
                     "params.use_mmap: " + std::to_string(params.use_mmap) + " is neither 1 nor 0");
  }
  aft::ModelOptions options;
  options.precision = matmul_precision(params);
  return options;
}

}  // namespace

extern "C" {

const char* aft_version(void) { return AFT_LIBRARY_VERSION; }

uint32_t aft_model_file_version(void) { return aft::kModelFileVersion; }

uint32_t aft_session_state_version(void) { return aft::kStateBlobVersion; }

void aft_log_set_callback(aft_log_callback callback, void* user_data) {
  aft::set_log_callback(callback, user_data);
}

const char* aft_status_string(aft_status status) {
  switch (status) {
    case AFT_OK:
      return "ok";
    case AFT_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case AFT_ERR_IO:
      return "i/o error";
    case AFT_ERR_FORMAT:
      return "malformed model file or session state";
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
    case AFT_ERR_ABORTED:
      return "aborted";
    case AFT_STATUS_MIN_ENUM:
    case AFT_STATUS_MAX_ENUM:
      break;
  }
  return "unknown status";
}

const char* aft_last_error(void) { return aft::capi::last_error.c_str(); }

const char* aft_kernel_isa(void) { return aft::runtime_kernels().isa; }

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

const char* aft_matrix_units(void) {
  static const std::string units = [] {
    try {
      return aft::kernels::matrix_unit_kernels();
    } catch (const std::exception&) {
      return std::string();
    }
  }();
  return units.c_str();
}

aft_model_params aft_model_default_params(void) {
  return aft_model_params{1, AFT_MATMUL_PRECISION_F32, 1};
}

aft_status aft_model_load(const char* path, const aft_model_params* params, aft_model** model) {
  return guarded([&] {
    require(model, "model");
    *model = nullptr;
    require(path, "path");
    const aft_model_params p = params ? *params : aft_model_default_params();
    auto handle = std::make_unique<aft_model>();
    const aft::ModelOptions options = model_options(p);
    handle->model = aft::Model::load(path, p.verify_checksums != 0, options);
    *model = handle.release();
  });
}

aft_status aft_model_load_from_memory(const void* data, size_t size, const aft_model_params* params,
                                      aft_model** model) {
  return guarded([&] {
    require(model, "model");
    *model = nullptr;
    require(data, "data");
    const aft_model_params p = params ? *params : aft_model_default_params();
    const aft::ModelOptions options = model_options(p);
    auto handle = std::make_unique<aft_model>();
    handle->model = aft::Model::load(
        aft::ModelFile::from_memory(data, size, "<memory>", p.verify_checksums != 0), options);
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
                           model->model->tokenizer().kind(),
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

int32_t aft_model_end_of_text(const aft_model* model) {
  if (!model) return -1;
  return model->model->tokenizer().end_of_text().value_or(-1);
}

size_t aft_model_metadata_count(const aft_model* model) {
  return model ? model->model->metadata().size() : 0;
}

aft_status aft_model_metadata_at(const aft_model* model, size_t index, const char** key,
                                 const char** value) {
  return guarded([&] {
    require(model, "model");
    require(key, "key");
    require(value, "value");
    const auto& entries = model->model->metadata();
    if (index >= entries.size()) {
      throw aft::Error(AFT_ERR_OUT_OF_RANGE, "metadata index " + std::to_string(index) +
                                                 " is past the model's " +
                                                 std::to_string(entries.size()) + " entries");
    }
    *key = entries[index].first.c_str();
    *value = entries[index].second.c_str();
  });
}

const char* aft_model_metadata_get(const aft_model* model, const char* key) {
  if (!model || !key) return nullptr;
  const auto& entries = model->model->metadata();
  const auto found =
      std::lower_bound(entries.begin(), entries.end(), key,
                       [](const auto& entry, const char* k) { return entry.first < k; });
  return found != entries.end() && found->first == key ? found->second.c_str() : nullptr;
}

uint32_t aft_model_fingerprint(const aft_model* model) {
  return model ? model->model->file().fingerprint() : 0;
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

}  // extern "C"
