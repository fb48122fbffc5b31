// The q8_0 block (docs/format.md, "Tensor data types"): values per binary32 scale. One constant for
// the kernels, the model file reader and the quantizer; the file format fixes it at 32.
#pragma once

#include <cstddef>

namespace aft::kernels {

constexpr std::size_t kQ8BlockSize = 32;

}  // namespace aft::kernels
