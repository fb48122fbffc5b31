// Writing the model file container (docs/format.md): where the tensors go and the preamble bytes.
// Shared by every C++ writer, so that they all lay files out the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_file.h"

namespace aft {

constexpr uint64_t kModelFilePreambleBytes = 24;
constexpr uint64_t kModelFileAlignment = 64;

// The 24 preamble bytes for a header of header_length bytes. The fields are taken as given (a
// magic of another length included), so tests can write broken files.
struct Preamble {
  std::string magic = "AFTMODEL";
  uint32_t version = kModelFileVersion;
  uint32_t reserved = 0;
  uint64_t header_length = 0;
};
std::vector<uint8_t> encode_preamble(const Preamble& preamble);

// Sets the "offset" of every entry of header["tensors"] (each with its "nbytes"): in list order,
// each at the next 64-byte boundary after the previous one, the first at the first boundary at
// least header_slack bytes past the header. Offsets are absolute, so their digits change the
// header's length: iterates to a fixed point. Returns the first tensor's offset (where the data
// starts; also for a file without tensors).
uint64_t place_tensors(nlohmann::json& header, uint64_t header_slack = 0);

}  // namespace aft
