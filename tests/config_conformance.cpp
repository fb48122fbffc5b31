// The engine's side of the config conformance test (tests/python/test_config_conformance.py): reads
// one config JSON per line on stdin and writes one JSON line per config, what
// ModelConfig::from_json decides and the tensors expected_tensors gives, so that the Python
// validator can be held to it.
//
//   {"accepted": false, "error": "<message>"}
//   {"accepted": true, "n_parameters": N, "tensors": [[name, [dims...], linear_weight], ...]}
//
// "tensors" is left out above kMaxListedLayers layers: a config at the n_layers limit would list
// hundreds of millions of tensors, and its acceptance is what such a case tests.
#include <cstdint>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/format/error.h"
#include "models/aft/aft_config.h"

namespace {

constexpr int64_t kMaxListedLayers = 16;

nlohmann::json decide(const std::string& line) {
  const nlohmann::json config = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return {{"accepted", false}, {"error", "not JSON"}};
  try {
    const aft::ModelConfig c = aft::ModelConfig::from_json(config, "conformance");
    nlohmann::json result = {{"accepted", true}, {"n_parameters", c.n_parameters()}};
    if (c.n_layers <= kMaxListedLayers) {
      nlohmann::json tensors = nlohmann::json::array();
      for (const aft::TensorSpec& spec : aft::expected_tensors(c))
        tensors.push_back({spec.name, spec.shape, spec.linear_weight});
      result["tensors"] = std::move(tensors);
    }
    return result;
  } catch (const aft::Error& error) {
    return {{"accepted", false}, {"error", error.what()}};
  }
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    // A message quoting a cut string may end inside a UTF-8 sequence.
    std::cout << decide(line).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
  }
  return 0;
}
