// aft-quantize's work: an f32 model file rewritten with its linear layers' weights in bf16 or q8_0
// (docs/format.md), tensor by tensor.
#pragma once

#include <string>

#include "engine/format/model_file.h"
#include "tools/cli/progress.h"

namespace aft::quantize {

// Reads in_path (every checksum verified), writes out_path: the same header but for the converted
// tensors' dtype, place, size and checksum, and metadata "dtype". Holds one converted tensor at a
// time; out_path appears only once complete. Throws (aft::Error, std::runtime_error) naming the
// file and the problem: in_path unreadable or malformed, a tensor already bf16 or q8_0, out_path
// the same file as in_path, out_path unwritable.
void quantize_model(const std::string& in_path, const std::string& out_path, DType dtype,
                    cli::Progress& progress);

}  // namespace aft::quantize
