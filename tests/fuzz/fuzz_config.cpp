// Fuzz target: the "config" object of a model file's header (JSON). Any JSON gives a config or
// an Error(AFT_ERR_FORMAT) naming config.<key>, never another exception; a config accepted has
// every bound the engine relies on, and its tensors add up to its parameter count.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/format/error.h"
#include "fuzz_check.h"
#include "models/aft/aft_config.h"

using aft::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded()) return 0;
  aft::ModelConfig config;
  try {
    config = aft::ModelConfig::from_json(json, "<fuzz>");
  } catch (const aft::Error& e) {
    check(e.status() == AFT_ERR_FORMAT && std::string(e.what()).rfind("<fuzz>: config", 0) == 0,
          "a refused config is a format error naming the config");
    return 0;
  }
  const int64_t limit = int64_t{1} << 24;
  for (const int64_t dim : {config.vocab_size, config.d_model, config.n_layers, config.d_ff,
                            config.max_seq_len, config.n_heads}) {
    check(dim >= 1 && dim <= limit, "every dimension is in [1, 2^24]");
  }
  check(config.d_model % config.key_width() == 0, "the key width divides d_model");
  check(config.n_parameters() <= (int64_t{1} << 40), "at most 2^40 parameters");
  check(config.matmul_parameters() > 0 && config.matmul_parameters() < config.n_parameters(),
        "the matrix products' weights are some of the parameters");
  check(config.max_positions() == 0 || config.max_positions() == config.max_seq_len,
        "positions stop at max_seq_len or nowhere");
  if (config.n_parameters() <= (int64_t{1} << 20) && config.n_layers <= 64) {
    int64_t total = 0;
    for (const aft::TensorSpec& spec : aft::expected_tensors(config)) {
      int64_t elements = 1;
      for (const int64_t dim : spec.shape) elements *= dim;
      total += elements;
    }
    check(total == config.n_parameters(), "the tensors add up to n_parameters()");
  }
  return 0;
}
