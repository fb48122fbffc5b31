// Timed runs of a model through the C API: one prefill, or decode steps after a context.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/cli/api_call.h"

namespace aft::bench {

class BenchModel {
 public:
  explicit BenchModel(const std::string& path);
  const aft_model_info& info() const { return info_; }
  // The linear layers' weight dtype: the file's metadata "dtype", f32 when absent.
  std::string weight_dtype() const;

  // Seconds to prefill tokens[0, n) in a fresh session (logits of the last token).
  double time_prefill(const std::vector<int32_t>& tokens, std::size_t n, int threads) const;
  // Seconds to decode tokens[depth, depth + n) one at a time (logits of each), in `batch` fresh
  // sessions that first consumed tokens[0, depth) untimed; a batch decodes its sessions together
  // (aft_batch_decode).
  double time_decode(const std::vector<int32_t>& tokens, std::size_t depth, std::size_t n,
                     std::size_t batch, int threads) const;

 private:
  cli::Model model_;
  aft_model_info info_{};
};

}  // namespace aft::bench
