// Timed runs of a model through the C API: one prefill, or decode steps after a context.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/bench/mapped_pages.h"
#include "tools/cli/api_call.h"

namespace aft::bench {

// What a model costs in memory: its file, the process resident after loading it and decoding
// one token in a session (before any probe buffer), of it the file's mapping and the share of that
// on 2 MiB pages, and a sequence's state (what aft_session_state_save writes) after that token.
struct Footprint {
  uint64_t file_bytes = 0;
  uint64_t resident_bytes = 0;  // 0 where /proc/self/statm is not available
  MappedPages mapped;
  std::size_t state_bytes = 0;
};

class BenchModel {
 public:
  BenchModel(const std::string& path, const aft_model_params& params);
  const aft_model_info& info() const { return info_; }
  // The linear layers' weight dtype: the file's metadata "dtype", f32 when absent.
  std::string weight_dtype() const;
  Footprint footprint(int32_t token) const;

  // Seconds to prefill tokens[0, n) in a fresh session (logits of the last token).
  double time_prefill(const std::vector<int32_t>& tokens, std::size_t n, int threads) const;
  // Seconds to decode tokens[depth, depth + n) one at a time (logits of each), in `batch` fresh
  // sessions that first consumed tokens[0, depth) untimed; a batch decodes its sessions together
  // (aft_batch_decode).
  double time_decode(const std::vector<int32_t>& tokens, std::size_t depth, std::size_t n,
                     std::size_t batch, int threads) const;

 private:
  std::string path_;
  cli::Model model_;
  aft_model_info info_{};
};

}  // namespace aft::bench
