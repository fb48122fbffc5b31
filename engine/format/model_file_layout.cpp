#include "model_file_layout.h"

namespace aft {
namespace {

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

void put_le(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

}  // namespace

std::vector<uint8_t> encode_preamble(const Preamble& preamble) {
  std::vector<uint8_t> out(preamble.magic.begin(), preamble.magic.end());
  put_le(out, preamble.version, 4);
  put_le(out, preamble.reserved, 4);
  put_le(out, preamble.header_length, 8);
  return out;
}

uint64_t place_tensors(nlohmann::json& header, uint64_t header_slack) {
  nlohmann::json& entries = header.at("tensors");
  uint64_t data_start = 0;
  for (;;) {
    uint64_t offset = data_start;
    for (nlohmann::json& entry : entries) {
      entry["offset"] = offset;
      offset = round_up(offset + entry.at("nbytes").get<uint64_t>(), kModelFileAlignment);
    }
    // Lengths only grow with the offsets, so this ends after a few rounds.
    const uint64_t needed = round_up(kModelFilePreambleBytes + header.dump().size() + header_slack,
                                     kModelFileAlignment);
    if (needed <= data_start) return data_start;
    data_start = needed;
  }
}

}  // namespace aft
