// Which tensors a bf16 or q8_0 file converts, and their converted bytes (docs/format.md, "Tensor
// data types"): the same bits as aft.modelfile's writer (python/aft/modelfile.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/format/model_file.h"

namespace aft::quantize {

// The dtype an f32 tensor takes in a file converted to `dtype`: the linear layers' weights (those
// expected_tensors flags linear_weight, models/aft/aft_config.h) take it, for q8_0 only those with
// a column count that is a multiple of 32; everything else stays f32.
DType stored_dtype(const TensorInfo& tensor, bool linear_weight, DType dtype);

// The f32 tensor's bytes in `dtype` (bf16 or q8_0; q8_0: the quants plane, then the scales plane).
// Throws std::runtime_error, naming `path`, the tensor and the value, for a NaN or an infinity, and
// for a finite value bf16 rounds to infinity.
std::vector<uint8_t> convert(const std::string& path, const TensorInfo& tensor, DType dtype);

}  // namespace aft::quantize
