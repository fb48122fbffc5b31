// The graph builder against the model family's one tensor list (models/aft/aft_config.h): for every
// mixer and option it reads exactly the tensors expected_tensors gives, no other and none less.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_file_writer.h"
#include "models/aft/aft_config.h"
#include "models/aft/aft_lm_graph.h"

namespace {

using nlohmann::json;

std::vector<json> every_variant() {
  std::vector<json> configs;
  for (const char* mixer : {"simple", "local", "conv", "full", "decay", "decay_shift", "rwkv4"}) {
    for (const char* full_bias : {"table", "factorized"}) {
      if (full_bias != std::string("table") && mixer != std::string("full")) continue;
      for (const char* pos_encoding : {"none", "sinusoidal", "learned"}) {
        for (const bool tied : {false, true}) {
          for (const bool head_bias : {false, true}) {
            json c = aft::testing::tiny_config(mixer);
            c["full_bias"] = full_bias;
            c["bias_rank"] = full_bias == std::string("factorized") ? 3 : 0;
            c["pos_encoding"] = pos_encoding;
            c["tied_embeddings"] = tied;
            c["head_bias"] = head_bias;
            configs.push_back(c);
          }
        }
      }
    }
  }
  return configs;
}

TEST(AftLmGraph, ReadsExactlyTheExpectedTensors) {
  for (const json& c : every_variant()) {
    const aft::ModelConfig config = aft::ModelConfig::from_json(c, "test");
    std::map<std::string, std::vector<float>> tensors;  // zeros of each expected size
    for (const aft::TensorSpec& spec : aft::expected_tensors(config)) {
      std::size_t n = 1;
      for (const int64_t dim : spec.shape) n *= static_cast<std::size_t>(dim);
      tensors[spec.name].assign(n, 0.0f);
    }
    std::set<std::string> read;
    std::string last;
    try {
      aft::build_aft_lm_graph(
          config,
          [&](const std::string& name) {
            read.insert(last = name);
            return static_cast<const float*>(tensors.at(name).data());
          },
          [&](const std::string& name) {
            read.insert(last = name);
            return aft::kernels::WeightMatrix(aft::kernels::WeightType::F32,
                                              tensors.at(name).data(), nullptr);
          });
    } catch (const std::out_of_range&) {
      ADD_FAILURE() << "reads " << last << ", not an expected tensor of " << c;
    }
    std::set<std::string> expected;
    for (const auto& [name, values] : tensors) expected.insert(name);
    EXPECT_EQ(read, expected) << c;
  }
}

}  // namespace
